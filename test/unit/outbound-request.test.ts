import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type Dial,
  type Lookup,
  OutboundBlockedError,
  OutboundConnectionError,
  type OutboundOptions,
  OutboundRedirectLimitError,
  OutboundTimeoutError,
  OutboundTooLargeError,
  outboundRequest,
} from '../../src/lib/outbound/index.js';
import { lacks, OPENSSL } from '../support/programs.js';

// Every connection in this file goes to a server it starts on loopback. "Public" and "private"
// answers come from injected resolvers; where a test lets the guard pick a public address, an
// injected dialer records it and carries the connection to a loopback server instead.

interface Seen {
  method: string;
  url: string;
  host: string | undefined;
  authorization: string | undefined;
  body: string;
  local: string;
}

interface TestServer {
  port: number;
  address: string;
  seen: Seen[];
  connections: number;
  close(): Promise<void>;
}

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function startServer(
  handler: (req: IncomingMessage, res: ServerResponse, server: TestServer) => void = (_req, res) => res.end('ok'),
  host = '127.0.0.1',
  make: (listener: http.RequestListener) => http.Server = (listener) => http.createServer(listener),
  port = 0,
): Promise<TestServer> {
  const sockets = new Set<Socket>();
  const state: TestServer = {
    port: 0,
    address: host,
    seen: [],
    connections: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  const server = make((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      state.seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        host: req.headers.host,
        authorization: req.headers.authorization,
        body: Buffer.concat(chunks).toString(),
        local: req.socket.localAddress ?? '',
      });
      handler(req, res, state);
    });
  });
  server.on('connection', (socket: Socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  state.port = (server.address() as AddressInfo).port;
  servers.push(state);
  return state;
}

/** A resolver answering from a table (a list per call for rebinding), counting its calls. */
function scriptedLookup(table: Record<string, string[] | string[][]>) {
  const calls: string[] = [];
  const lookup: Lookup = async (hostname) => {
    const n = calls.filter((h) => h === hostname).length;
    calls.push(hostname);
    const entry = table[hostname];
    if (!entry) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    const answer = (Array.isArray(entry[0]) ? (entry as string[][])[Math.min(n, entry.length - 1)] : entry) as string[];
    return answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { lookup, calls };
}

/** A dialer that records each target and connects it to `to` (a loopback server) instead. */
function recordingDial(to?: TestServer) {
  const targets: Array<{ host: string; port: number }> = [];
  const dial: Dial = ({ host, port }) => {
    targets.push({ host, port });
    if (!to) throw new Error(`test dialer asked to connect to ${host}:${port}`);
    return net.connect({ host: to.address, port: to.port });
  };
  return { dial, targets };
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  const result = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(result).toBeInstanceOf(Error);
  return result as Error;
}

describe('outboundRequest: refusing before connecting', () => {
  it.each([
    ['127.0.0.1', /Requests to (localhost|loopback addresses) are not allowed/],
    ['127.0.0.53', /Requests to loopback addresses are not allowed/],
    ['::1', /Requests to (localhost|loopback addresses) are not allowed/],
    ['10.0.0.1', /Requests to the local network are not allowed/],
    ['172.16.5.4', /Requests to the local network are not allowed/],
    ['192.168.1.1', /Requests to the local network are not allowed/],
    ['fd00::1', /Requests to the local network are not allowed/],
    ['100.64.0.1', /Requests to the shared address space are not allowed/],
    ['169.254.169.254', /Requests to the link local network are not allowed/],
    ['fe80::1', /Requests to the link local network are not allowed/],
    ['0.0.0.0', /Requests to localhost are not allowed/],
    ['::', /Requests to localhost are not allowed/],
    ['224.0.0.1', /Requests to multicast addresses are not allowed/],
    ['ff02::1', /Requests to multicast addresses are not allowed/],
    ['255.255.255.255', /Requests to the limited broadcast address are not allowed/],
    ['::ffff:127.0.0.1', /Requests to (localhost|loopback addresses) are not allowed/],
    ['::ffff:169.254.169.254', /Requests to the link local network are not allowed/],
  ])('a host resolving to %s is refused and nothing is dialled', async (address, message) => {
    const server = await startServer();
    const { lookup, calls } = scriptedLookup({ 'hook.example.test': [address] });
    const { dial, targets } = recordingDial(server);
    const error = await failure(outboundRequest('http://hook.example.test/hook', { method: 'POST' }, { lookup, dial }));
    expect(error).toBeInstanceOf(OutboundBlockedError);
    expect(error.message).toMatch(message);
    expect(calls).toEqual(['hook.example.test']);
    expect(targets).toEqual([]);
    expect(server.connections).toBe(0);
  });

  it.each([
    'http://2130706433:{port}/',
    'http://0x7f.1:{port}/',
    'http://0177.0.0.1:{port}/',
    'http://127.1:{port}/',
    'http://[::ffff:127.0.0.1]:{port}/',
    'http://user@127.0.0.1:{port}/',
  ])('the loopback server behind %s is not reached', async (template) => {
    const server = await startServer();
    const error = await failure(outboundRequest(template.replace('{port}', String(server.port))));
    expect(error).toBeInstanceOf(OutboundBlockedError);
    expect(server.connections).toBe(0);
  });

  it('refuses a resolution that mixes a public and a private address', async () => {
    const server = await startServer();
    const { lookup } = scriptedLookup({ 'hook.example.test': ['203.0.113.10', '192.168.0.10'] });
    const { dial, targets } = recordingDial(server);
    const error = await failure(outboundRequest('http://hook.example.test/', {}, { lookup, dial }));
    expect(error).toBeInstanceOf(OutboundBlockedError);
    expect(error.message).toBe('Requests to the local network are not allowed');
    expect(targets).toEqual([]);
    expect(server.connections).toBe(0);
  });
});

describe('outboundRequest: connecting to the checked address', () => {
  it('connects to the pinned address with the Host header of the URL', async () => {
    const server = await startServer((_req, res) => res.end('hello'));
    const { lookup } = scriptedLookup({ 'hook.example.test': ['127.0.0.1'] });
    const response = await outboundRequest(
      `http://hook.example.test:${server.port}/path?a=1#frag`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'X-Gitlab-Event': 'Push Hook' }, body: '{}' },
      { lookup, allowLocal: true },
    );
    expect(response.status).toBe(200);
    expect(response.body.toString()).toBe('hello');
    expect(response.url).toBe(`http://hook.example.test:${server.port}/path?a=1#frag`);
    expect(server.seen).toEqual([
      {
        method: 'POST',
        url: '/path?a=1',
        host: `hook.example.test:${server.port}`,
        authorization: undefined,
        body: '{}',
        local: '127.0.0.1',
      },
    ]);
  });

  it('lets an allowlisted target through while local requests are refused', async () => {
    const server = await startServer();
    const { lookup } = scriptedLookup({ 'hook.internal': ['127.0.0.1'], 'other.internal': ['127.0.0.1'] });
    const hostEntry = await outboundRequest(
      `http://hook.internal:${server.port}/`,
      {},
      { lookup, allowlist: ['hook.internal'] },
    );
    expect(hostEntry.status).toBe(200);
    const hostPort = await outboundRequest(
      `http://hook.internal:${server.port}/`,
      {},
      { lookup, allowlist: [`hook.internal:${server.port}`] },
    );
    expect(hostPort.status).toBe(200);
    const ipEntry = await outboundRequest(
      `http://other.internal:${server.port}/`,
      {},
      { lookup, allowlist: ['127.0.0.1'] },
    );
    expect(ipEntry.status).toBe(200);
    const range = await outboundRequest(`http://127.0.0.1:${server.port}/`, {}, { allowlist: ['127.0.0.0/8'] });
    expect(range.status).toBe(200);
    const ipPort = await outboundRequest(
      `http://127.0.0.1:${server.port}/`,
      {},
      { allowlist: [`127.0.0.1:${server.port}`] },
    );
    expect(ipPort.status).toBe(200);
    expect(server.seen).toHaveLength(5);

    const wrongPort = await failure(
      outboundRequest(
        `http://hook.internal:${server.port}/`,
        {},
        { lookup, allowlist: [`hook.internal:${server.port + 1}`] },
      ),
    );
    expect(wrongPort).toBeInstanceOf(OutboundBlockedError);
    const wildcard = await failure(
      outboundRequest(`http://hook.internal:${server.port}/`, {}, { lookup, allowlist: ['*.internal'] }),
    );
    expect(wildcard).toBeInstanceOf(OutboundBlockedError);
    expect(server.seen).toHaveLength(5);
  });

  it('allows an IPv6 loopback target by [address]:port', async () => {
    const server = await startServer(undefined, '::1');
    const response = await outboundRequest(
      `http://[::1]:${server.port}/v6`,
      {},
      { allowlist: [`[::1]:${server.port}`] },
    );
    expect(response.status).toBe(200);
    expect(server.seen[0]!.host).toBe(`[::1]:${server.port}`);
  });

  it('DNS rebinding: resolves once and connects only to the address it checked', async () => {
    // The attacker's name answers a public address to the check and loopback to any later lookup.
    const server = await startServer();
    const { lookup, calls } = scriptedLookup({ 'rebind.example.test': [['203.0.113.10'], ['127.0.0.1']] });
    const { dial, targets } = recordingDial(server);
    const response = await outboundRequest(`http://rebind.example.test:${server.port}/`, {}, { lookup, dial });
    expect(response.status).toBe(200);
    expect(calls).toEqual(['rebind.example.test']);
    expect(targets).toEqual([{ host: '203.0.113.10', port: server.port }]);
    expect(server.seen[0]!.host).toBe(`rebind.example.test:${server.port}`);
  });

  it('DNS rebinding on real sockets: an allowlisted first answer is used, the later loopback one never', async () => {
    const allowed = await startServer((_req, res) => res.end('allowed'), '127.0.0.1');
    // The same port on the other loopback address, so a second resolution would land there.
    const forbidden = await startServer((_req, res) => res.end('forbidden'), '127.0.0.2', undefined, allowed.port);
    const { lookup, calls } = scriptedLookup({ 'rebind.example.test': [['127.0.0.1'], ['127.0.0.2']] });
    const response = await outboundRequest(
      `http://rebind.example.test:${allowed.port}/`,
      {},
      { lookup, allowlist: ['127.0.0.1'] },
    );
    expect(response.body.toString()).toBe('allowed');
    expect(calls).toEqual(['rebind.example.test']);
    expect(forbidden.connections).toBe(0);
  });

  it('without DNS rebinding protection the connection resolves the name again (GitLab setting off)', async () => {
    const server = await startServer();
    const { lookup, calls } = scriptedLookup({ 'hook.example.test': ['203.0.113.10'] });
    const { dial, targets } = recordingDial(server);
    await outboundRequest(
      `http://hook.example.test:${server.port}/`,
      {},
      { lookup, dial, dnsRebindingProtection: false },
    );
    expect(calls).toEqual(['hook.example.test']);
    expect(targets).toEqual([{ host: 'hook.example.test', port: server.port }]);
  });

  it('sends the URL user and password as basic authentication', async () => {
    const server = await startServer();
    await outboundRequest(`http://us%40er:p%3Ass@127.0.0.1:${server.port}/`, {}, { allowLocal: true });
    expect(server.seen[0]!.authorization).toBe(`Basic ${Buffer.from('us@er:p:ss').toString('base64')}`);
  });

  it('refuses header values that would split the request, sending nothing', async () => {
    const server = await startServer();
    const error = await failure(
      outboundRequest(
        `http://127.0.0.1:${server.port}/`,
        { headers: { 'X-Gitlab-Token': 'a\r\nHost: evil' } },
        { allowLocal: true },
      ),
    );
    expect(error).toBeInstanceOf(OutboundConnectionError);
    expect(server.seen).toHaveLength(0);
  });

  it('answers a refused connection with OutboundConnectionError', async () => {
    const server = await startServer();
    const port = server.port;
    await server.close();
    servers.splice(servers.indexOf(server), 1);
    const error = await failure(outboundRequest(`http://127.0.0.1:${port}/`, {}, { allowLocal: true }));
    expect(error).toBeInstanceOf(OutboundConnectionError);
  });
});

describe('outboundRequest: redirects', () => {
  it('follows redirects, re-checking each hop', async () => {
    const target = await startServer((_req, res) => res.end('final'));
    const hop = await startServer((_req, res) => {
      res.writeHead(302, { location: `http://final.internal:${target.port}/done` }).end();
    });
    const { lookup } = scriptedLookup({ 'hop.internal': ['127.0.0.1'], 'final.internal': ['127.0.0.1'] });
    const response = await outboundRequest(
      `http://hop.internal:${hop.port}/start`,
      {},
      { lookup, allowlist: ['hop.internal', 'final.internal'] },
    );
    expect(response.body.toString()).toBe('final');
    expect(response.url).toBe(`http://final.internal:${target.port}/done`);
    expect(response.redirects).toEqual([`http://final.internal:${target.port}/done`]);
    expect(target.seen[0]!.host).toBe(`final.internal:${target.port}`);
  });

  it.each([
    ['a name resolving to loopback', (port: number) => `http://internal.test:${port}/admin`],
    ['a loopback literal', (port: number) => `http://127.0.0.1:${port}/admin`],
    ['a decimal loopback', (port: number) => `http://2130706433:${port}/admin`],
    ['the metadata address', () => 'http://169.254.169.254/latest/meta-data/'],
  ])('refuses a redirect to %s without connecting to it', async (_what, location) => {
    const internal = await startServer();
    const hop = await startServer((_req, res) => res.writeHead(301, { location: location(internal.port) }).end());
    const { lookup } = scriptedLookup({ 'hop.example.test': ['127.0.0.1'], 'internal.test': ['127.0.0.1'] });
    const error = await failure(
      outboundRequest(`http://hop.example.test:${hop.port}/`, {}, { lookup, allowlist: ['hop.example.test'] }),
    );
    expect(error).toBeInstanceOf(OutboundBlockedError);
    expect(hop.seen).toHaveLength(1);
    expect(internal.connections).toBe(0);
  });

  it('stops after the redirect limit', async () => {
    const loop = await startServer((req, res) => {
      const n = Number(req.url!.slice(1));
      res.writeHead(302, { location: `/${n + 1}` }).end();
    });
    const error = await failure(
      outboundRequest(`http://127.0.0.1:${loop.port}/0`, {}, { allowLocal: true, maxRedirects: 3 }),
    );
    expect(error).toBeInstanceOf(OutboundRedirectLimitError);
    expect(loop.seen.map((s) => s.url)).toEqual(['/0', '/1', '/2', '/3']);

    const within = await startServer((req, res) => {
      const n = Number(req.url!.slice(1));
      if (n < 3) res.writeHead(307, { location: `/${n + 1}` }).end();
      else res.end(`arrived at ${n}`);
    });
    const response = await outboundRequest(
      `http://127.0.0.1:${within.port}/0`,
      {},
      { allowLocal: true, maxRedirects: 3 },
    );
    expect(response.body.toString()).toBe('arrived at 3');
    expect(response.redirects).toHaveLength(3);
  });

  it('returns the redirect itself when following is off', async () => {
    const hop = await startServer((_req, res) => res.writeHead(302, { location: 'http://169.254.169.254/' }).end());
    const response = await outboundRequest(
      `http://127.0.0.1:${hop.port}/`,
      {},
      { allowLocal: true, followRedirects: false },
    );
    expect(response.status).toBe(302);
    expect(response.headers.location).toBe('http://169.254.169.254/');
  });

  it('keeps the method on 307, turns a POST into a GET on 303, drops credentials across origins', async () => {
    const other = await startServer();
    const hop = await startServer((req, res) => {
      if (req.url === '/307') res.writeHead(307, { location: '/echo' }).end();
      else if (req.url === '/303') res.writeHead(303, { location: '/echo' }).end();
      else if (req.url === '/away') res.writeHead(302, { location: `http://other.internal:${other.port}/` }).end();
      else res.end();
    });
    const opts: Partial<OutboundOptions> = {
      lookup: scriptedLookup({ 'other.internal': ['127.0.0.1'] }).lookup,
      allowLocal: true,
    };
    const base = `http://127.0.0.1:${hop.port}`;
    await outboundRequest(`${base}/307`, { method: 'POST', body: 'payload' }, opts);
    await outboundRequest(`${base}/303`, { method: 'POST', body: 'payload' }, opts);
    await outboundRequest(
      `${base}/away`,
      { headers: { Authorization: 'Bearer secret', Host: 'spoofed.test', 'X-Gitlab-Token': 't' } },
      opts,
    );
    expect(hop.seen.map((s) => [s.method, s.url, s.body])).toEqual([
      ['POST', '/307', 'payload'],
      ['POST', '/echo', 'payload'],
      ['POST', '/303', 'payload'],
      ['GET', '/echo', ''],
      ['GET', '/away', ''],
    ]);
    expect(hop.seen[4]!.authorization).toBe('Bearer secret');
    expect(hop.seen[4]!.host).toBe(`127.0.0.1:${hop.port}`);
    expect(other.seen[0]!.authorization).toBeUndefined();
    expect(other.seen[0]!.host).toBe(`other.internal:${other.port}`);
  });
});

describe('outboundRequest: limits', () => {
  it('times out a server that never answers', async () => {
    const silent = await startServer(() => {});
    const started = Date.now();
    const error = await failure(
      outboundRequest(`http://127.0.0.1:${silent.port}/`, {}, { allowLocal: true, timeoutMs: 300 }),
    );
    expect(error).toBeInstanceOf(OutboundTimeoutError);
    expect((error as OutboundTimeoutError).phase).toBe('total');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('times out a body that trickles past the total limit', async () => {
    const slow = await startServer((_req, res) => {
      res.writeHead(200);
      const timer = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(timer));
    });
    const error = await failure(
      outboundRequest(`http://127.0.0.1:${slow.port}/`, {}, { allowLocal: true, timeoutMs: 400 }),
    );
    expect(error).toBeInstanceOf(OutboundTimeoutError);
  });

  it('times out a connection that does not open', async () => {
    // A stream that never connects stands in for an unreachable host.
    const dial: Dial = () => new Duplex({ read() {}, write: (_c, _e, cb) => cb() }) as unknown as Socket;
    const { lookup } = scriptedLookup({ 'hook.example.test': ['203.0.113.10'] });
    const error = await failure(
      outboundRequest('http://hook.example.test/', {}, { lookup, dial, connectTimeoutMs: 200, timeoutMs: 5000 }),
    );
    expect(error).toBeInstanceOf(OutboundTimeoutError);
    expect((error as OutboundTimeoutError).phase).toBe('connect');
  });

  it('refuses a body declared larger than the limit', async () => {
    const big = await startServer((_req, res) => res.end('x'.repeat(2000)));
    const error = await failure(
      outboundRequest(`http://127.0.0.1:${big.port}/`, {}, { allowLocal: true, maxBytes: 1000 }),
    );
    expect(error).toBeInstanceOf(OutboundTooLargeError);
    const fits = await outboundRequest(`http://127.0.0.1:${big.port}/`, {}, { allowLocal: true, maxBytes: 2000 });
    expect(fits.body.length).toBe(2000);
  });

  it('aborts an endless chunked body at the limit', async () => {
    let closed = false;
    const endless = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const timer = setInterval(() => res.write('y'.repeat(4096)), 5);
      res.on('close', () => {
        closed = true;
        clearInterval(timer);
      });
    });
    const error = await failure(
      outboundRequest(`http://127.0.0.1:${endless.port}/`, {}, { allowLocal: true, maxBytes: 64 * 1024 }),
    );
    expect(error).toBeInstanceOf(OutboundTooLargeError);
    await expect.poll(() => closed).toBe(true);
  });
});

describe.skipIf(lacks(OPENSSL))('outboundRequest: https', () => {
  let tlsOptions: { key: Buffer; cert: Buffer };
  beforeAll(() => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-outbound-'));
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '2',
        '-subj',
        '/CN=hook.example.test',
        '-addext',
        'subjectAltName=DNS:hook.example.test',
      ],
      { stdio: 'ignore' },
    );
    tlsOptions = { key: fs.readFileSync(key), cert: fs.readFileSync(cert) };
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('connects to the pinned address with the original name for SNI and the certificate check', async () => {
    let servername: string | false | null | undefined;
    const server = await startServer(
      (req, res) => {
        servername = (req.socket as TLSSocket).servername;
        res.end('secure');
      },
      '127.0.0.1',
      (listener) => https.createServer(tlsOptions, listener),
    );
    const { lookup } = scriptedLookup({ 'hook.example.test': ['127.0.0.1'], 'wrong.example.test': ['127.0.0.1'] });
    const response = await outboundRequest(
      `https://hook.example.test:${server.port}/`,
      {},
      { lookup, allowLocal: true, ca: tlsOptions.cert },
    );
    expect(response.body.toString()).toBe('secure');
    expect(servername).toBe('hook.example.test');
    expect(server.seen[0]!.host).toBe(`hook.example.test:${server.port}`);

    // The certificate is checked against the URL's host, not the address connected to.
    const mismatch = await failure(
      outboundRequest(
        `https://wrong.example.test:${server.port}/`,
        {},
        { lookup, allowLocal: true, ca: tlsOptions.cert },
      ),
    );
    expect(mismatch).toBeInstanceOf(OutboundConnectionError);
    expect(mismatch.message).toMatch(/wrong\.example\.test/);
    // And an untrusted certificate is refused.
    const untrusted = await failure(
      outboundRequest(`https://hook.example.test:${server.port}/`, {}, { lookup, allowLocal: true }),
    );
    expect(untrusted).toBeInstanceOf(OutboundConnectionError);
  });
});
