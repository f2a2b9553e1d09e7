import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import dnsPacket from 'dns-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import {
  PAGES_DOMAIN_VERIFICATION_SCHEDULE,
  pagesDomainsVerificationJob,
  pagesDomainVerifyJob,
} from '../../src/jobs/pages-domains.js';
import { Worker } from '../../src/jobs/worker.js';
import { hostnameErrors } from '../../src/services/pages-domains.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  makeAdmin,
  makePersonas,
  makeProject,
  makeToken,
  makeUserWithToken,
  type Persona,
  putSettings,
} from '../support/factories.js';
import { lacks, OPENSSL } from '../support/programs.js';

const run = promisify(execFile);
const DAY = 24 * 3600 * 1000;

/**
 * Pages domains (GitLab's lib/api/pages_domains.rb): certificates made here with `openssl`
 * (a root, an intermediate, leaves, a self-signed one), checked as GitLab's model checks them;
 * DNS verification against a real DNS server on loopback.
 */
const skip = lacks(OPENSSL);

interface Certs {
  root: string;
  intermediate: string;
  leaf: string;
  leafKey: string;
  selfSigned: string;
  selfSignedKey: string;
  otherKey: string;
  leafText: string;
}

async function openssl(dir: string, args: string[]): Promise<string> {
  return (await run('openssl', args, { cwd: dir })).stdout;
}

async function makeCertificates(dir: string): Promise<Certs> {
  await fs.writeFile(
    path.join(dir, 'ca.ext'),
    'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n',
  );
  await fs.writeFile(path.join(dir, 'leaf.ext'), 'basicConstraints=CA:FALSE\nsubjectAltName=DNS:www.example.test\n');
  const rsa = ['-newkey', 'rsa:2048', '-nodes'];
  await openssl(dir, [
    'req',
    '-x509',
    ...rsa,
    '-keyout',
    'root.key',
    '-out',
    'root.crt',
    '-subj',
    '/CN=Depot Test Root',
    '-days',
    '30',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  await openssl(dir, ['req', ...rsa, '-keyout', 'int.key', '-out', 'int.csr', '-subj', '/CN=Depot Test Intermediate']);
  await openssl(dir, [
    'x509',
    '-req',
    '-in',
    'int.csr',
    '-CA',
    'root.crt',
    '-CAkey',
    'root.key',
    '-CAcreateserial',
    '-out',
    'int.crt',
    '-days',
    '30',
    '-extfile',
    'ca.ext',
  ]);
  await openssl(dir, [
    'req',
    ...rsa,
    '-keyout',
    'leaf.key',
    '-out',
    'leaf.csr',
    '-subj',
    '/O=Depot Test/CN=www.example.test',
  ]);
  await openssl(dir, [
    'x509',
    '-req',
    '-in',
    'leaf.csr',
    '-CA',
    'int.crt',
    '-CAkey',
    'int.key',
    '-CAcreateserial',
    '-out',
    'leaf.crt',
    '-days',
    '30',
    '-extfile',
    'leaf.ext',
  ]);
  await openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    'self.key',
    '-out',
    'self.crt',
    '-subj',
    '/CN=self.example.test',
    '-days',
    '30',
  ]);
  await openssl(dir, ['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'other.key']);
  const read = (name: string) => fs.readFile(path.join(dir, name), 'utf8');
  return {
    root: await read('root.crt'),
    intermediate: await read('int.crt'),
    leaf: await read('leaf.crt'),
    leafKey: await read('leaf.key'),
    selfSigned: await read('self.crt'),
    selfSignedKey: await read('self.key'),
    otherKey: await read('other.key'),
    leafText: await openssl(dir, ['x509', '-noout', '-text', '-in', 'leaf.crt']),
  };
}

/** A DNS server on loopback answering TXT questions from `records` (NXDOMAIN otherwise). */
async function startDnsServer(records: Map<string, string[]>) {
  const socket = dgram.createSocket('udp4');
  socket.on('message', (message, remote) => {
    const query = dnsPacket.decode(message);
    const question = query.questions?.[0];
    const texts = question?.type === 'TXT' ? records.get(question.name.toLowerCase()) : undefined;
    const reply = dnsPacket.encode({
      type: 'response',
      id: query.id,
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | (texts ? 0 : 3),
      questions: query.questions,
      answers: (texts ?? []).map((text) => ({
        type: 'TXT',
        name: question?.name ?? '',
        ttl: 60,
        class: 'IN',
        data: text,
      })),
    });
    socket.send(reply, remote.port, remote.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return { port: socket.address().port, close: () => new Promise<void>((resolve) => socket.close(() => resolve())) };
}

let app: TestApp;
let admin: User;
let adminToken: string;
let project: Project;
let maintainerToken: string;
let personas: Persona[];
let certs: Certs;
let scratch: string;
let dns: Awaited<ReturnType<typeof startDnsServer>>;
const records = new Map<string, string[]>();
let domainCount = 0;
const nextDomain = () => `site${++domainCount}.example.test`;

beforeAll(async () => {
  if (skip) return;
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-pages-'));
  certs = await makeCertificates(scratch);
  dns = await startDnsServer(records);
  app = await startTestApp({ env: { DNS_SERVERS: `127.0.0.1:${dns.port}`, PAGES_HOST: 'pages.depot.test' } });
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
  project = await makeProject(app, admin, { visibility: 'private' });
  personas = await makePersonas(app, { type: 'project', id: project.id });
  maintainerToken = personas.find((p) => p.name === 'maintainer')?.token as string;
});
afterAll(async () => {
  await app?.close();
  await dns?.close();
  if (scratch) await fs.rm(scratch, { recursive: true, force: true });
});

const route = (id: number | string = project.id) => `/projects/${id}/pages/domains`;
const create = (body: Record<string, unknown>, token = maintainerToken, id: number | string = project.id) =>
  app.request(route(id), { method: 'POST', token, body });
const leafChain = () => `${certs.leaf}${certs.intermediate}${certs.root}`;

describe.skipIf(skip)('hostname rules (the validates_hostname messages)', () => {
  it('accepts host names, numeric labels included, and names what is wrong otherwise', () => {
    expect(hostnameErrors('www.example.com')).toEqual([]);
    expect(hostnameErrors('123.example.com')).toEqual([]);
    expect(hostnameErrors('')).toContain('must be between 1 and 255 characters long');
    expect(hostnameErrors('-bad.example.com')).toEqual(['begins or ends with hyphen']);
    expect(hostnameErrors('bad_label.example.com')).toEqual([
      'contains invalid characters (valid characters: [a-z0-9\\-])',
    ]);
    expect(hostnameErrors(`${'a'.repeat(64)}.com`)).toEqual(['must be between 1 and 63 characters long']);
    expect(hostnameErrors('a..b')).toContain('must not contain consecutive dots');
    expect(hostnameErrors('example.com.')).toContain('must not end with a dot');
  });
});

describe.skipIf(skip)('POST /projects/:id/pages/domains', () => {
  it('adds a domain without a certificate: http URL, unverified, a verification code', async () => {
    const domain = nextDomain();
    const res = await create({ domain });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      domain,
      url: `http://${domain}`,
      verified: false,
      verification_code: expect.stringMatching(/^[0-9a-f]{32}$/),
      enabled_until: null,
      auto_ssl_enabled: false,
    });
  });

  it('adds a domain with a full chain: https, subject, expiry, the PEM and openssl text; the key is never answered', async () => {
    const res = await create({ domain: 'www.example.test', certificate: leafChain(), key: certs.leafKey });
    expect(res.status, res.text).toBe(201);
    const body = res.body as Record<string, any>;
    expect(body.url).toBe('https://www.example.test');
    expect(body.certificate).toEqual({
      subject: '/O=Depot Test/CN=www.example.test',
      expired: false,
      certificate: leafChain(),
      certificate_text: certs.leafText,
    });
    expect(res.text).not.toContain('PRIVATE KEY');
    const row = await app.deps.db
      .selectFrom('pages_domains')
      .selectAll()
      .where('domain', '=', 'www.example.test')
      .executeTakeFirstOrThrow();
    expect(row.key_sealed).not.toContain('PRIVATE KEY');
    expect(row.key_sealed).not.toBeNull();
  });

  it('takes a self-signed certificate with an EC key as it stands', async () => {
    const res = await create({ domain: 'self.example.test', certificate: certs.selfSigned, key: certs.selfSignedKey });
    expect(res.status, res.text).toBe(201);
    expect((res.body as any).certificate.subject).toBe('/CN=self.example.test');
  });

  it('takes the certificate and key as uploaded files', async () => {
    const form = new FormData();
    form.set('domain', 'upload.example.test');
    form.set('certificate', new Blob([certs.selfSigned]), 'cert.pem');
    form.set('key', new Blob([certs.selfSignedKey]), 'key.pem');
    const res = await fetch(`${app.baseUrl}/api/v4${route()}`, {
      method: 'POST',
      headers: { 'PRIVATE-TOKEN': maintainerToken },
      body: form,
    });
    expect(res.status).toBe(201);
    expect(((await res.json()) as any).certificate.certificate).toBe(certs.selfSigned);
  });

  const refused: [string, () => Record<string, unknown>, Record<string, string[]>][] = [
    [
      'a broken PEM',
      () => ({
        certificate: '-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n',
        key: certs.leafKey,
      }),
      { certificate: ['must be a valid PEM certificate'], key: ["doesn't match the certificate"] },
    ],
    [
      'a key that is not one',
      () => ({ certificate: certs.selfSigned, key: 'garbage' }),
      { key: ['must be a valid PEM private key', "doesn't match the certificate"] },
    ],
    [
      'a key of another certificate',
      () => ({ certificate: leafChain(), key: certs.otherKey }),
      { key: ["doesn't match the certificate"] },
    ],
    [
      'a leaf without its intermediate',
      () => ({ certificate: certs.leaf, key: certs.leafKey }),
      { certificate: ['misses intermediates'] },
    ],
    [
      'a chain without its root',
      () => ({ certificate: `${certs.leaf}${certs.intermediate}`, key: certs.leafKey }),
      { certificate: ['misses intermediates'] },
    ],
    [
      'a chain out of order',
      () => ({ certificate: `${certs.leaf}${certs.root}${certs.intermediate}`, key: certs.leafKey }),
      { certificate: ['misses intermediates'] },
    ],
  ];
  it.each(refused)('refuses %s with GitLab’s messages and stores nothing', async (_name, material, errors) => {
    const domain = nextDomain();
    const res = await create({ domain, ...material() });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toEqual({ message: errors });
    expect((await app.request(`${route()}/${domain}`, { token: maintainerToken })).status).toBe(404);
  });

  it('refuses a certificate without a key (all or none)', async () => {
    const res = await create({ domain: nextDomain(), certificate: certs.selfSigned });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'certificate, key provide all or none of parameters' });
  });

  it('refuses bad names, names taken in any case, and the instance’s own Pages domain', async () => {
    expect((await create({})).body).toEqual({ error: 'domain is missing' });
    const bad = await create({ domain: 'bad_name.example.test' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ message: { domain: ['contains invalid characters (valid characters: [a-z0-9\\-])'] } });
    const taken = nextDomain();
    expect((await create({ domain: taken })).status).toBe(201);
    const again = await create({ domain: taken.toUpperCase() }, adminToken);
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ message: { domain: ['has already been taken'] } });
    const own = await create({ domain: 'me.pages.depot.test' });
    expect(own.body).toEqual({ message: { domain: ['*.pages.depot.test is restricted'] } });
  });
});

describe.skipIf(skip)('PUT, GET and DELETE /projects/:id/pages/domains/:domain', () => {
  it('attaches a certificate, keeps the key when only the certificate changes, removes both when both are empty', async () => {
    const domain = 'www.example.test';
    // The self-signed certificate does not go with the stored leaf key.
    const mismatch = await app.request(`${route()}/${domain}`, {
      method: 'PUT',
      token: maintainerToken,
      body: { certificate: certs.selfSigned },
    });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body).toEqual({ message: { key: ["doesn't match the certificate"] } });
    // The same chain again, without the key: the stored key still matches.
    const same = await app.request(`${route()}/${domain}`, {
      method: 'PUT',
      token: maintainerToken,
      body: { certificate: leafChain() },
    });
    expect(same.status, same.text).toBe(200);
    expect((same.body as any).certificate.subject).toBe('/O=Depot Test/CN=www.example.test');
    const removed = await app.request(`${route()}/${domain}`, {
      method: 'PUT',
      token: maintainerToken,
      body: { certificate: '', key: '' },
    });
    expect(removed.status).toBe(200);
    expect(removed.body).not.toHaveProperty('certificate');
    expect((removed.body as any).url).toBe(`http://${domain}`);
    const shown = await app.request(`${route()}/${domain}`, { token: maintainerToken });
    expect(shown.body).toEqual(removed.body);
    const back = await app.request(`${route()}/${domain}`, {
      method: 'PUT',
      token: maintainerToken,
      body: { certificate: leafChain(), key: certs.leafKey, auto_ssl_enabled: true },
    });
    expect(back.status).toBe(200);
    expect((back.body as any).auto_ssl_enabled).toBe(true);
  });

  it('reports a certificate expired once the clock passes its end', async () => {
    const res = await app.request(`${route()}/self.example.test`, { token: maintainerToken });
    expect((res.body as any).certificate.expired).toBe(false);
    const saved = app.clock.now();
    app.clock.set(new Date(saved.getTime() + 40 * DAY));
    try {
      const later = await app.request(`${route()}/self.example.test`, { token: maintainerToken });
      expect((later.body as any).certificate.expired).toBe(true);
      const list = await app.request('/pages/domains', { token: adminToken, query: { domain: 'SELF.example.test' } });
      expect(list.body).toEqual([
        expect.objectContaining({
          domain: 'self.example.test',
          project_id: project.id,
          certificate_expiration: { expired: true, expiration: expect.any(String) },
        }),
      ]);
    } finally {
      app.clock.set(saved);
    }
  });

  it('lists a project’s domains by name, with pagination headers, through @gitbeaker/rest', async () => {
    const client = new Gitlab({ host: app.baseUrl, token: maintainerToken });
    const domains = await client.PagesDomains.all({ projectId: project.id });
    const names = domains.map((d) => d.domain);
    expect(names).toEqual([...names].sort());
    expect(names).toContain('www.example.test');
    const one = await client.PagesDomains.show(project.id, 'self.example.test');
    expect(one.domain).toBe('self.example.test');
    const made = await client.PagesDomains.create(project.id, 'gitbeaker.example.test');
    expect(made.url).toBe('http://gitbeaker.example.test');
    const edited = await client.PagesDomains.edit(project.id, 'gitbeaker.example.test', { certificate: '', key: '' });
    expect(edited.domain).toBe('gitbeaker.example.test');
    await client.PagesDomains.remove(project.id, 'gitbeaker.example.test');
    const gone = await app.request(`${route()}/gitbeaker.example.test`, { token: maintainerToken });
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ message: '404 PagesDomain Not Found' });
    const page = await app.request(route(), { token: maintainerToken, query: { per_page: 1 } });
    expect(page.headers.get('x-per-page')).toBe('1');
    expect(Number(page.headers.get('x-total'))).toBeGreaterThan(1);
  });

  it('answers the administrators’ list with project ids (401 anonymous, 403 users)', async () => {
    const all = await app.request('/pages/domains', { token: adminToken });
    expect(all.status).toBe(200);
    for (const entry of all.body as any[]) {
      expect(entry.project_id).toBe(project.id);
      expect(entry).not.toHaveProperty('certificate');
    }
    expect((await app.request('/pages/domains')).status).toBe(401);
    expect((await app.request('/pages/domains', { token: maintainerToken })).status).toBe(403);
    expect((await app.request('/pages/domains', { token: adminToken, query: { domain: 'nowhere.test' } })).status).toBe(
      404,
    );
  });
});

describe.skipIf(skip)('permissions: maintainers and administrators only', () => {
  const expected: Record<string, number> = {
    anonymous: 401,
    'non-member': 404,
    guest: 403,
    reporter: 403,
    developer: 403,
    maintainer: 200,
    admin: 200,
  };
  it('reads, adds, changes and removes per GitLab’s read_pages and update_pages', async () => {
    for (const persona of personas) {
      const want = expected[persona.name] as number;
      const token = persona.token;
      const list = await app.request(route(), { token });
      expect(list.status, `${persona.name} list`).toBe(want);
      const show = await app.request(`${route()}/www.example.test`, { token });
      expect(show.status, `${persona.name} show`).toBe(want);
      const domain = nextDomain();
      const post = await app.request(route(), { method: 'POST', token, body: { domain } });
      expect(post.status, `${persona.name} create`).toBe(want === 200 ? 201 : want);
      const target = want === 200 ? domain : 'www.example.test';
      const put = await app.request(`${route()}/${target}`, {
        method: 'PUT',
        token,
        body: { auto_ssl_enabled: false },
      });
      expect(put.status, `${persona.name} update`).toBe(want);
      const del = await app.request(`${route()}/${target}`, { method: 'DELETE', token });
      expect(del.status, `${persona.name} delete`).toBe(want === 200 ? 204 : want);
    }
    expect((await app.request(`${route()}/www.example.test`, { token: adminToken })).status).toBe(200);
  });

  it('a non-member of a public project sees it but not its domains (403)', async () => {
    const open = await makeProject(app, admin, { visibility: 'public' });
    const outsider = await makeUserWithToken(app);
    expect((await app.request(route(open.id), { token: outsider.token })).status).toBe(403);
  });
});

describe.skipIf(skip)('DNS verification (a TXT record, GitLab’s VerifyPagesDomainService)', () => {
  it('verifies a new domain in the background once its TXT record exists, and the hourly job keeps it enabled', async () => {
    const domain = nextDomain();
    const made = await create({ domain });
    const code = (made.body as any).verification_code as string;
    const worker = new Worker(app.deps, [pagesDomainVerifyJob, pagesDomainsVerificationJob]);
    // No record yet: the queued check leaves it unverified.
    expect(await worker.drain()).toBeGreaterThanOrEqual(1);
    let shown = await app.request(`${route()}/${domain}`, { token: maintainerToken });
    expect((shown.body as any).verified).toBe(false);
    const verify = await app.request(`${route()}/${domain}/verify`, { method: 'PUT', token: maintainerToken });
    expect(verify.status).toBe(400);
    expect(verify.body).toEqual({ message: `Couldn't verify ${domain}` });

    records.set(`_gitlab-pages-verification-code.${domain}`, [`gitlab-pages-verification-code=${code}`]);
    const ok = await app.request(`${route()}/${domain}/verify`, { method: 'PUT', token: maintainerToken });
    expect(ok.status, ok.text).toBe(200);
    expect((ok.body as any).verified).toBe(true);
    const until = new Date((ok.body as any).enabled_until).getTime();
    expect(until - app.clock.now().getTime()).toBeGreaterThan(6 * DAY);

    // Five days on, the domain needs checking again; the record is gone, so it is unverified
    // but stays enabled through its grace period, then is disabled and removed a week later.
    records.delete(`_gitlab-pages-verification-code.${domain}`);
    const start = app.clock.now();
    try {
      app.clock.set(new Date(start.getTime() + 5 * DAY));
      await app.deps.db
        .insertInto('jobs')
        .values({ kind: PAGES_DOMAIN_VERIFICATION_SCHEDULE.kind, payload: '{}', max_attempts: 1 })
        .execute();
      await worker.drain();
      shown = await app.request(`${route()}/${domain}`, { token: maintainerToken });
      expect((shown.body as any).verified).toBe(false);
      expect((shown.body as any).enabled_until).not.toBeNull();
      app.clock.set(new Date(start.getTime() + 8 * DAY));
      const disabled = await app.request(`${route()}/${domain}/verify`, { method: 'PUT', token: maintainerToken });
      expect(disabled.body).toEqual({ message: `Couldn't verify ${domain}. It is now disabled.` });
      app.clock.set(new Date(start.getTime() + 16 * DAY));
      await app.deps.db
        .insertInto('jobs')
        .values({ kind: PAGES_DOMAIN_VERIFICATION_SCHEDULE.kind, payload: '{}', max_attempts: 1 })
        .execute();
      await worker.drain();
      expect((await app.request(`${route()}/${domain}`, { token: maintainerToken })).status).toBe(404);
    } finally {
      app.clock.set(start);
    }
  });

  it('a record on the domain itself counts too, and verification off enables every domain', async () => {
    const domain = nextDomain();
    const code = ((await create({ domain })).body as any).verification_code as string;
    records.set(domain, [`other=1 ${code}`]);
    const ok = await app.request(`${route()}/${domain}/verify`, { method: 'PUT', token: maintainerToken });
    expect((ok.body as any).verified).toBe(true);

    await putSettings(app, adminToken, { pages_domain_verification_enabled: false });
    try {
      const unlisted = nextDomain();
      await create({ domain: unlisted });
      const res = await app.request(`${route()}/${unlisted}/verify`, { method: 'PUT', token: maintainerToken });
      expect((res.body as any).verified).toBe(true);
    } finally {
      await putSettings(app, adminToken, { pages_domain_verification_enabled: true });
    }
  });
});
