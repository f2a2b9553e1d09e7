import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import net, { type Socket } from 'node:net';
import tls from 'node:tls';
import {
  OutboundConnectionError,
  OutboundError,
  OutboundRedirectLimitError,
  OutboundTimeoutError,
  OutboundTooLargeError,
} from './errors.js';
import { checkOutboundUrl, type OutboundTarget, systemLookup } from './guard.js';
import { DEFAULT_OUTBOUND_OPTIONS, type Dial, type Lookup, type OutboundOptions } from './options.js';

/** What to send. */
export interface OutboundRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/** What came back from the last hop. */
export interface OutboundResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The URL that answered (after redirects). */
  url: string;
  /** Each URL redirected to, in order. */
  redirects: string[];
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Headers that carry the caller's credentials: not sent on to another origin. */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];

/** net.connect's callback-style lookup, answering from our promise-style one. */
function callbackLookup(lookup: Lookup): net.LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname).then(
      (answers) => {
        if (options.all) (callback as any)(null, answers);
        else if (answers[0]) callback(null, answers[0].address, answers[0].family);
        else callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 4);
      },
      (error: NodeJS.ErrnoException) => callback(error, '', 4),
    );
  };
}

const defaultDial: Dial = ({ host, port, lookup }) =>
  net.connect({ host, port, ...(lookup ? { lookup: callbackLookup(lookup) } : {}) });

/**
 * Makes a request to a user-given URL through the guard: every hop's URL and addresses are
 * checked, the connection goes to the checked address (with the original Host header and TLS
 * server name), redirects are followed up to the limit, and time and body size are bounded.
 * Throws an OutboundError subclass for each way it can fail; any HTTP status is a response.
 */
export async function outboundRequest(
  url: string | URL,
  request: OutboundRequest = {},
  options: Partial<OutboundOptions> = {},
): Promise<OutboundResponse> {
  const opts: OutboundOptions = { ...DEFAULT_OUTBOUND_OPTIONS, ...options };
  const deadline = new Deadline(opts.timeoutMs);
  try {
    let current = typeof url === 'string' ? url : url.href;
    let method = (request.method ?? 'GET').toUpperCase();
    let body = request.body;
    let headers = { ...request.headers };
    const redirects: string[] = [];
    for (;;) {
      const target = await deadline.race(checkOutboundUrl(current, opts));
      const response = await exchange(target, method, headers, body, opts, deadline);
      const location = response.headers.location;
      if (!opts.followRedirects || !REDIRECT_STATUSES.has(response.status) || !location) {
        return { ...response, url: target.url.href, redirects };
      }
      if (redirects.length >= opts.maxRedirects) throw new OutboundRedirectLimitError(opts.maxRedirects);
      let next: URL;
      try {
        next = new URL(location, target.url);
      } catch {
        throw new OutboundConnectionError(`Invalid redirect location: ${location}`);
      }
      // As browsers do: 303 always, and 301/302 after a POST, continue as a GET without the body.
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === 'POST')) {
        if (method !== 'HEAD') method = 'GET';
        body = undefined;
        headers = withoutHeaders(headers, ['content-type', 'content-length']);
      }
      if (next.origin !== target.url.origin) headers = withoutHeaders(headers, CREDENTIAL_HEADERS);
      redirects.push(next.href);
      current = next.href;
    }
  } finally {
    deadline.clear();
  }
}

function withoutHeaders(headers: Record<string, string>, names: string[]): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !names.includes(name.toLowerCase())));
}

/** One request and response on one connection to the checked target. */
function exchange(
  target: OutboundTarget,
  method: string,
  headers: Record<string, string>,
  body: string | Buffer | undefined,
  opts: OutboundOptions,
  deadline: Deadline,
): Promise<Omit<OutboundResponse, 'url' | 'redirects'>> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let socket: Socket | undefined;
    let connectTimer: NodeJS.Timeout | undefined;
    // http.request opens the connection synchronously, so a failure can come before it returns.
    let req: http.ClientRequest | undefined;
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      deadline.onExpire(undefined);
      req?.destroy();
      socket?.destroy();
      reject(error instanceof OutboundError ? error : new OutboundConnectionError(error.message));
    };
    const succeed = (value: Omit<OutboundResponse, 'url' | 'redirects'>) => {
      if (settled) return;
      settled = true;
      deadline.onExpire(undefined);
      resolve(value);
    };

    const { url, hostname, port, pinned } = target;
    const tlsOn = url.protocol === 'https:';
    const createConnection = () => {
      const raw = (opts.dial ?? defaultDial)(
        pinned ? { host: pinned.address, port } : { host: hostname, port, lookup: opts.lookup ?? systemLookup },
      );
      const ready = tlsOn
        ? tls.connect({
            socket: raw,
            // SNI carries a name, never an address; the certificate is checked against the URL's host.
            ...(net.isIP(hostname) ? {} : { servername: hostname }),
            ...(opts.verifyTls === false
              ? { rejectUnauthorized: false, checkServerIdentity: () => undefined }
              : {
                  checkServerIdentity: (_host: string, cert: tls.PeerCertificate) =>
                    tls.checkServerIdentity(hostname, cert),
                }),
            ...(opts.ca ? { ca: [...tls.rootCertificates, ...[opts.ca].flat()] } : {}),
          })
        : raw;
      socket = ready;
      connectTimer = setTimeout(
        () => fail(new OutboundTimeoutError('connect', opts.connectTimeoutMs)),
        opts.connectTimeoutMs,
      );
      ready.once(tlsOn ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer));
      raw.once('error', (error) => fail(error));
      return ready;
    };

    const auth = url.username ? `${safeDecode(url.username)}:${safeDecode(url.password)}` : undefined;
    // Host always names the URL's host, so a hop never carries the previous one's.
    const outgoing = withoutHeaders(headers, ['host', 'content-length']);
    outgoing.host = url.host;
    if (body !== undefined) outgoing['content-length'] = String(Buffer.byteLength(body));
    try {
      req = http.request({
        method,
        path: `${url.pathname}${url.search}`,
        headers: outgoing,
        setHost: false,
        createConnection,
        ...(auth ? { auth } : {}),
      });
    } catch (error) {
      // Invalid header values, or a dialer that throws.
      fail(error as Error);
      return;
    }
    deadline.onExpire(() => fail(new OutboundTimeoutError('total', opts.timeoutMs)));
    req.on('error', fail);
    req.on('response', (res: IncomingMessage) => {
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > opts.maxBytes) {
        fail(new OutboundTooLargeError(opts.maxBytes));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > opts.maxBytes) {
          fail(new OutboundTooLargeError(opts.maxBytes));
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', fail);
      res.on('aborted', () => fail(new OutboundConnectionError('Connection closed before the response ended')));
      res.on('end', () => {
        succeed({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
        // The exchange is over: no keep-alive, so nothing lingers.
        socket?.destroy();
      });
    });
    req.end(body);
  });
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** The time limit of the whole exchange, shared by every hop. */
class Deadline {
  private readonly timer: NodeJS.Timeout;
  private expired = false;
  private listener: (() => void) | undefined;
  private readonly waiters = new Set<(error: Error) => void>();

  constructor(readonly limitMs: number) {
    this.timer = setTimeout(() => {
      this.expired = true;
      this.listener?.();
      for (const reject of this.waiters) reject(new OutboundTimeoutError('total', limitMs));
    }, limitMs);
  }

  /** Calls `listener` when time runs out (replacing the previous one; undefined removes it). */
  onExpire(listener: (() => void) | undefined): void {
    this.listener = listener;
    if (listener && this.expired) listener();
  }

  /** Settles with `work`, or rejects with a timeout when time runs out first. */
  race<T>(work: Promise<T>): Promise<T> {
    if (this.expired) return Promise.reject(new OutboundTimeoutError('total', this.limitMs));
    return new Promise<T>((resolve, reject) => {
      this.waiters.add(reject);
      work.then(resolve, reject).finally(() => this.waiters.delete(reject));
    });
  }

  clear(): void {
    clearTimeout(this.timer);
  }
}
