import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_MODULES, API_PREFIX } from '../../src/app.js';
import { buildOpenApi } from '../../src/http/openapi.js';
import { ApiRouter } from '../../src/http/route.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  addMember,
  makeAdmin,
  makeGroup,
  makeSampleProject,
  makeToken,
  makeUser,
  ROLES,
} from '../support/factories.js';

/**
 * Fuzzed input generated from the OpenAPI document (issue 23): for every route and parameter,
 * values of the wrong type, empty, huge, negative, unicode, control characters, traversal,
 * option-looking values, duplicated and array-shaped parameters, and broken bodies of each content
 * type. Every answer must be below 500 and, when an error, in GitLab's shape; nothing may be
 * written outside the storage; the server must still answer at the end.
 *
 * Seeded and bounded: FUZZ_SEED (default 23) and FUZZ_ROUNDS (default 1: each route meets each
 * of its parameters once and each broken body once). `npm run fuzz` runs a longer pass.
 */

const SEED = Number(process.env.FUZZ_SEED ?? 23);
const ROUNDS = Number(process.env.FUZZ_ROUNDS ?? 1);
/** A name no legitimate file has: whatever a traversal or an injected option writes carries it. */
const MARK = `depot-fuzzmark-${process.pid}`;

/** mulberry32: a small seeded generator, so a failure can be replayed with its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HOSTILE: unknown[] = [
  // wrong types
  'abc',
  '1.5',
  '1e999',
  '0x10',
  'true',
  'null',
  '[object Object]',
  2 ** 64,
  -1,
  0,
  true,
  [],
  {},
  [1, 2],
  { a: { b: { c: { d: 1 } } } },
  // empty and blank
  '',
  ' ',
  '\t\n',
  // negative and huge numbers
  '-1',
  '-2147483649',
  '9223372036854775808',
  '99999999999999999999999999',
  // unicode
  'ünïcödé ☃ 𝄞 日本語',
  '\u202egnp.exe',
  '\u200b\ufeff',
  '\ud800',
  '🙂'.repeat(300),
  // control characters (a NUL is GitLab's 400)
  '\x00',
  'a\x00b',
  '\x01\x1b[31mred\x7f',
  'line\r\nInjected: header',
  // traversal
  `../../../../../../tmp/${MARK}`,
  `..%2F..%2F..%2Ftmp%2F${MARK}`,
  '/etc/passwd',
  `/tmp/${MARK}`,
  '....//....//etc/passwd',
  'a/../../b',
  '.git/config',
  'refs/heads/../../HEAD',
  '~',
  // option-looking values
  `--upload-pack=touch /tmp/${MARK}`,
  `--output=/tmp/${MARK}`,
  `-c core.sshCommand=touch /tmp/${MARK}`,
  '--exec=id',
  '-',
  '--',
  '-h',
  // formats and injections
  "' OR 1=1 --",
  `\${7*7}{{7*7}}`,
  '<script>alert(1)</script>',
  'http://169.254.169.254/latest/meta-data/',
  'file:///etc/passwd',
  '%00',
  '%',
  '*',
  '?',
  'HEAD~99999',
  'main^{tree}',
  '@{-1}',
];

/** A huge value, made when used (100 kB). */
const huge = () => 'x'.repeat(100_000);

interface Route {
  method: string;
  path: string;
  query: string[];
  body: string[];
  pathParams: string[];
}

let app: TestApp;
let adminToken: string;
const values: Record<string, string> = {};

beforeAll(async () => {
  app = await startTestApp({ storages: ['second'] });
  const admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin, ['api', 'sudo', 'admin_mode']);
  const group = await makeGroup(app, admin, { visibility: 'public' });
  const { project } = await makeSampleProject(app, admin, { namespace: group });
  const member = await makeUser(app, { randomPassword: false });
  await addMember(app, { type: 'project', id: project.id }, member, ROLES.developer);
  await makeToken(app, member);
  const tokens = await app.request('/personal_access_tokens', { token: adminToken, query: { user_id: member.id } });
  const tree = await app.request(`/projects/${project.id}/repository/tree`, { token: adminToken });
  const blob = tree.body.find((entry: { type: string }) => entry.type === 'blob');
  const commit = await app.request(`/projects/${project.id}/repository/commits/main`, { token: adminToken });
  const mr = await app.request(`/projects/${project.id}/merge_requests`, {
    method: 'POST',
    token: adminToken,
    body: { source_branch: 'stable', target_branch: 'main', title: 'fuzz' },
  });
  Object.assign(values, {
    project: String(project.id),
    group: String(group.id),
    user: String(member.id),
    namespace: String(project.namespace_id),
    token: String(tokens.body[0].id),
    blob: blob.id,
    commit: commit.body.id,
    file_path: blob.path,
    branch: 'stable',
    tag_name: 'v1.0.0',
    format: 'zip',
    merge_request_iid: String(mr.body?.iid ?? 1),
  });
}, 120_000);

afterAll(async () => {
  await app?.close();
});

/** A valid value for a path parameter, so the fuzzed one is what the route meets. */
function pathValue(route: Route, name: string): string {
  const resource = route.path.split('/')[1] ?? '';
  if (name === 'id') {
    const byResource: Record<string, string | undefined> = {
      projects: values.project,
      groups: values.group,
      users: values.user,
      namespaces: values.namespace,
      personal_access_tokens: values.token,
    };
    return byResource[resource] ?? '1';
  }
  if (name === 'user_id') return values.user as string;
  if (name === 'sha') return (route.path.includes('/blobs/') ? values.blob : values.commit) as string;
  return values[name] ?? '1';
}

/** Routes with their parameters, from the OpenAPI document (the same source as the route table). */
function routes(): Route[] {
  const api = new ApiRouter(API_PREFIX);
  for (const register of API_MODULES) register(api);
  const doc = buildOpenApi(api.operations, { version: 'fuzz', baseUrl: app.baseUrl }) as {
    paths: Record<string, Record<string, any>>;
  };
  const list: Route[] = [];
  for (const op of api.operations) {
    const openApiPath = op.path.replace(/\{([^}]*)\}/g, '$1').replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
    const spec = doc.paths[openApiPath]?.[op.method];
    const parameters = (spec?.parameters ?? []) as { name: string; in: string }[];
    const bodyProps = Object.keys(spec?.requestBody?.content?.['application/json']?.schema?.properties ?? {});
    list.push({
      method: op.method.toUpperCase(),
      path: op.path.slice(API_PREFIX.length),
      pathParams: parameters.filter((p) => p.in === 'path').map((p) => p.name),
      query: parameters.filter((p) => p.in === 'query').map((p) => p.name),
      body: bodyProps,
    });
  }
  // Deletions last, so the other routes meet existing records.
  return list.sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'));
}

/** Appends `name` = `value` to a query or form, in the shapes Rack reads (arrays, hashes). */
function appendParam(target: URLSearchParams, name: string, value: unknown): void {
  if (Array.isArray(value)) {
    for (const item of value) target.append(`${name}[]`, String(item));
    if (value.length === 0) target.append(`${name}[]`, '');
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) target.append(`${name}[${key}]`, JSON.stringify(item));
  } else {
    target.append(name, String(value));
  }
}

interface Attempt {
  what: string;
  path: string;
  method: string;
  headers: Record<string, string>;
  body?: string | URLSearchParams | FormData | undefined;
}

/** Broken bodies of each content type. */
const BROKEN_BODIES: { type: string; body: string }[] = [
  { type: 'application/json', body: '{"a":' },
  { type: 'application/json', body: '[1,2,3]' },
  { type: 'application/json', body: '"just a string"' },
  { type: 'application/json', body: 'null' },
  { type: 'application/json', body: '{"__proto__": {"admin": true}, "constructor": {"prototype": {"x": 1}}}' },
  { type: 'application/json; charset=latin-99', body: '{}' },
  { type: 'application/x-www-form-urlencoded', body: '%%%&a[=1&b]]=2&c[][][][][][][][][][][][]=3' },
  { type: 'application/x-www-form-urlencoded', body: 'a=1&a=2&a[]=3&a[b]=4' },
  { type: 'multipart/form-data', body: '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--' },
  { type: 'multipart/form-data; boundary=zz', body: '--zz\r\nContent-Disposition: form-data; name="a"\r\n\r\n1' },
  {
    type: 'multipart/form-data; boundary=zz',
    body: '--zz\r\nContent-Disposition: form-data; name="file"; filename="../../../tmp/MARK"\r\n\r\nx\r\n--zz--\r\n',
  },
  { type: 'text/xml', body: '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY e SYSTEM "file:///etc/passwd">]><a>&e;</a>' },
  { type: 'application/octet-stream', body: '\x00\x01\x02\xff' },
  { type: 'application/json', body: `{"a":"${'x'.repeat(2_000_000)}"}` },
];

function attempts(route: Route, rand: () => number): Attempt[] {
  const pick = <T>(list: T[]): T => list[Math.floor(rand() * list.length)] as T;
  const fillPath = (fuzz?: { name: string; value: string }) =>
    route.path.replace(/:([a-z_]+)/g, (_, name: string) =>
      encode(fuzz?.name === name ? fuzz.value : pathValue(route, name)),
    );
  const hostile = () => {
    const value = pick(HOSTILE);
    return rand() < 0.05 ? huge() : value;
  };
  const list: Attempt[] = [];
  const send = (what: string, params: Record<string, unknown>, extra: Partial<Attempt> = {}): void => {
    const query = new URLSearchParams();
    let body: Attempt['body'];
    const headers: Record<string, string> = {};
    const inBody = route.method !== 'GET' && route.method !== 'DELETE' && rand() < 0.8;
    if (inBody) {
      const shape = pick(['json', 'form', 'multipart'] as const);
      if (shape === 'json') {
        body = JSON.stringify(params);
        headers['Content-Type'] = 'application/json';
      } else {
        const form = new URLSearchParams();
        for (const [name, value] of Object.entries(params)) appendParam(form, name, value);
        if (shape === 'form') body = form;
        else {
          // fetch writes the multipart body and its boundary.
          const data = new FormData();
          for (const [name, value] of form) data.append(name, value);
          body = data;
        }
      }
    } else {
      for (const [name, value] of Object.entries(params)) appendParam(query, name, value);
    }
    const qs = query.toString();
    list.push({ what, path: fillPath() + (qs ? `?${qs}` : ''), method: route.method, headers, body, ...extra });
  };
  // Each parameter once with a hostile value, the others left out.
  for (const name of [...route.query, ...route.body]) {
    const value = hostile();
    send(`${name}=${show(value)}`, { [name]: value });
  }
  // Duplicated and array-shaped: every parameter twice, as a list and as a hash.
  if (route.query.length + route.body.length > 0) {
    const all = [...route.query, ...route.body];
    const name = pick(all);
    const dup = new URLSearchParams();
    dup.append(name, String(pick(HOSTILE)));
    dup.append(name, String(pick(HOSTILE)));
    dup.append(`${name}[]`, 'x');
    dup.append(`${name}[a][b]`, 'y');
    list.push({
      what: `${name} duplicated`,
      path: `${fillPath()}?${dup}`,
      method: route.method,
      headers: {},
    });
  }
  // Each path parameter with a hostile value.
  for (const name of route.pathParams) {
    const value = String(pick(HOSTILE.filter((v) => typeof v === 'string')));
    list.push({ what: `:${name}=${show(value)}`, path: fillPath({ name, value }), method: route.method, headers: {} });
  }
  // Broken bodies.
  if (route.method !== 'GET') {
    const broken = pick(BROKEN_BODIES);
    list.push({
      what: `broken ${broken.type}`,
      path: fillPath(),
      method: route.method,
      headers: { 'Content-Type': broken.type },
      body: broken.body.replace('MARK', MARK),
    });
  }
  return list;
}

/** Percent-encodes a path segment; a lone surrogate goes as the invalid UTF-8 bytes it would be. */
function encode(value: string): string {
  try {
    return encodeURIComponent(value);
  } catch {
    return value
      .split('')
      .map((c) => (/[\ud800-\udfff]/.test(c) ? '%ED%A0%80' : encodeURIComponent(c)))
      .join('');
  }
}

function show(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…(${text.length})` : text);
}

/** Files carrying the mark anywhere under the temporary directory or the working directory. */
async function markedFiles(): Promise<string[]> {
  const found: string[] = [];
  const walk = async (dir: string, depth: number): Promise<void> => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (entry.name.includes(MARK)) found.push(full);
      if (entry.isDirectory() && depth > 0 && entry.name !== 'node_modules' && entry.name !== '.git') {
        await walk(full, depth - 1);
      }
    }
  };
  await walk(os.tmpdir(), 1);
  await walk('/tmp', 1);
  await walk(process.cwd(), 2);
  return found;
}

describe('fuzzed input from the OpenAPI document', () => {
  it('never answers 5xx, errors are in GitLab’s shape, nothing lands outside storage, the server stays up', async () => {
    const failures: string[] = [];
    let sent = 0;
    const byClass: Record<string, number> = {};
    const rand = random(SEED);
    const list = routes();
    for (let round = 0; round < ROUNDS; round++) {
      for (const route of list) {
        for (const attempt of attempts(route, rand)) {
          // Revoking "self" would revoke the fuzzer's token: those calls use a token of their own.
          const token = route.path.endsWith('/self')
            ? await makeToken(app, await makeUser(app, { randomPassword: false }))
            : adminToken;
          let res: Response;
          try {
            res = await fetch(`${app.baseUrl}/api/v4${attempt.path}`, {
              method: attempt.method,
              headers: { 'PRIVATE-TOKEN': token, ...attempt.headers },
              body: attempt.body,
              redirect: 'manual',
            });
          } catch (error) {
            failures.push(`${attempt.method} ${route.path} ${attempt.what}: no answer (${String(error)})`);
            continue;
          }
          const text = await res.text();
          sent += 1;
          const klass = `${Math.floor(res.status / 100)}xx`;
          byClass[klass] = (byClass[klass] ?? 0) + 1;
          const where = `${attempt.method} ${route.path} ${attempt.what} → ${res.status} ${text.slice(0, 150)}`;
          if (res.status >= 500) failures.push(where);
          else if (res.status >= 400 && ![413, 414, 431].includes(res.status) && attempt.method !== 'HEAD') {
            let parsed: unknown;
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = undefined;
            }
            const shaped =
              parsed !== null &&
              typeof parsed === 'object' &&
              ('message' in (parsed as object) || 'error' in (parsed as object));
            if (!shaped) failures.push(`${where} (not GitLab's error shape)`);
          }
        }
      }
    }
    expect(failures, failures.join('\n')).toEqual([]);
    expect(sent).toBeGreaterThan(list.length * 2);
    // The inputs reached the handlers: some were taken, most refused with a 4xx.
    expect(byClass['2xx']).toBeGreaterThan(50);
    expect(byClass['4xx']).toBeGreaterThan(sent / 2);
    console.info(`fuzz: seed ${SEED}, ${ROUNDS} round(s), ${list.length} routes, ${sent} requests`, byClass);
    expect(await markedFiles()).toEqual([]);
    const health = await fetch(`${app.baseUrl}/-/health`);
    expect(health.status).toBe(200);
    const version = await app.request('/version', { token: adminToken });
    expect(version.status).toBe(200);
  }, 600_000);
});

describe('what the long fuzz runs found', () => {
  it('answers 400 and changes nothing for a lone surrogate or a number out of its column’s range', async () => {
    const before = await app.request('/application/settings', { token: adminToken });
    const surrogate = await app.request('/application/settings', {
      method: 'PUT',
      token: adminToken,
      body: { after_sign_up_text: '\ud800' },
    });
    expect(surrogate.status).toBe(400);
    expect(surrogate.body).toEqual({ message: '400 Bad request' });
    const after = await app.request('/application/settings', { token: adminToken });
    expect(after.body.after_sign_up_text).toBe(before.body.after_sign_up_text);
    // A user of its own: the fuzz pass may have deleted the shared one.
    const target = await makeUser(app, { randomPassword: false });
    const theme = await app.request(`/users/${target.id}`, {
      method: 'PUT',
      token: adminToken,
      body: { theme_id: '-2147483649' },
    });
    expect(theme.status).toBe(400);
    expect(theme.body).toEqual({ message: '400 Bad request' });
    const user = await app.request(`/users/${target.id}`, { token: adminToken });
    expect(user.status).toBe(200);
    expect(user.body.theme_id).not.toBe(-2147483649);
  });
});
