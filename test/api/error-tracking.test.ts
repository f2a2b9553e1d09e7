import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { parseEnvelope } from '../../src/services/error-tracking.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makePersonas, makeProject, makeToken, type Persona } from '../support/factories.js';

/**
 * Error tracking (GitLab's lib/api/error_tracking/): settings and client keys for maintainers,
 * and the collector error SDKs post to, driven here with raw HTTP as SDKs send it (the real SDK
 * runs in test/e2e/error-tracking.test.ts).
 */
let app: TestApp;
let admin: User;
let adminToken: string;
let project: Project;
let personas: Persona[];
let maintainer: string;

beforeAll(async () => {
  app = await startTestApp();
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
  project = await makeProject(app, admin, { visibility: 'private' });
  personas = await makePersonas(app, { type: 'project', id: project.id });
  maintainer = personas.find((p) => p.name === 'maintainer')?.token as string;
});
afterAll(async () => {
  await app?.close();
});

const settings = (id = project.id) => `/projects/${id}/error_tracking/settings`;
const keys = (id = project.id) => `/projects/${id}/error_tracking/client_keys`;

const event = (overrides: Record<string, unknown> = {}) => ({
  event_id: 'a'.repeat(32),
  platform: 'node',
  level: 'error',
  environment: 'production',
  timestamp: 1764147600.5,
  exception: {
    values: [
      {
        type: 'TypeError',
        value: 'x is not a function',
        stacktrace: {
          frames: [
            { function: 'outer', module: 'app' },
            { function: 'inner', module: 'lib', lineno: 3 },
          ],
        },
      },
    ],
  },
  ...overrides,
});

const envelope = (items: [Record<string, unknown>, unknown][]) =>
  [
    JSON.stringify({ event_id: 'a'.repeat(32), sent_at: new Date().toISOString() }),
    ...items.flatMap(([h, p]) => [JSON.stringify(h), JSON.stringify(p)]),
  ].join('\n');

const collect = (
  path: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
  id: number | string = project.id,
) =>
  fetch(`${app.baseUrl}/api/v4/error_tracking/collector/api/${id}/${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-sentry-envelope', ...headers },
    body,
  });

describe('settings', () => {
  it('404s before they exist; PUT sets them up, PATCH changes them, GET reads them', async () => {
    const missing = await app.request(settings(), { token: maintainer });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ message: '404 Error Tracking Setting Not Found' });
    expect((await app.request(settings(), { method: 'PATCH', token: maintainer, body: { active: true } })).status).toBe(
      404,
    );
    const put = await app.request(settings(), {
      method: 'PUT',
      token: maintainer,
      body: { active: true, integrated: true },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toEqual({
      active: true,
      project_name: null,
      sentry_external_url: null,
      error_monitor_external_url: null,
      api_url: null,
      integrated: true,
    });
    const patched = await app.request(settings(), { method: 'PATCH', token: maintainer, body: { active: false } });
    expect(patched.body).toMatchObject({ active: false, integrated: true });
    expect((await app.request(settings(), { token: maintainer })).body).toMatchObject({ active: false });
  });

  it('checks its parameters: active is required and boolean', async () => {
    const none = await app.request(settings(), { method: 'PATCH', token: maintainer, body: {} });
    expect(none.status).toBe(400);
    expect(none.body).toEqual({ error: 'active is missing' });
    const bad = await app.request(settings(), { method: 'PATCH', token: maintainer, body: { active: 'maybe' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'active is invalid' });
    const put = await app.request(settings(), { method: 'PUT', token: maintainer, body: { active: true } });
    expect(put.body).toEqual({ error: 'integrated is missing' });
  });
});

describe('client keys', () => {
  it('makes keys with a glet_ public key and a DSN pointing at Depot, lists and removes them', async () => {
    const made = await app.request(keys(), { method: 'POST', token: maintainer });
    expect(made.status).toBe(201);
    const key = made.body as Record<string, any>;
    expect(key.public_key).toMatch(/^glet_[0-9a-f]{32}$/);
    const host = new URL(app.baseUrl).host;
    expect(key.sentry_dsn).toBe(`http://${key.public_key}@${host}/api/v4/error_tracking/collector/${project.id}`);
    expect(key.error_monitor_dsn).toBe(key.sentry_dsn);
    expect(key.active).toBe(true);
    const list = await app.request(keys(), { token: maintainer });
    expect((list.body as any[]).map((k) => k.id)).toContain(key.id);
    expect(list.headers.get('x-total')).toBe('1');
    const removed = await app.request(`${keys()}/${key.id}`, { method: 'DELETE', token: maintainer });
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual(key);
    const again = await app.request(`${keys()}/${key.id}`, { method: 'DELETE', token: maintainer });
    expect(again.status).toBe(404);
    expect((await app.request(`${keys()}/abc`, { method: 'DELETE', token: maintainer })).status).toBe(400);
  });
});

describe('permissions: maintainers only (admin_operations)', () => {
  const expected: Record<string, number> = {
    anonymous: 401,
    'non-member': 404,
    guest: 403,
    reporter: 403,
    developer: 403,
    maintainer: 200,
    admin: 200,
  };
  it('every route answers each role as GitLab does', async () => {
    for (const persona of personas) {
      const want = expected[persona.name] as number;
      const token = persona.token;
      expect((await app.request(settings(), { token })).status, `${persona.name} GET settings`).toBe(want);
      expect(
        (await app.request(settings(), { method: 'PATCH', token, body: { active: false } })).status,
        `${persona.name} PATCH settings`,
      ).toBe(want);
      expect((await app.request(keys(), { token })).status, `${persona.name} GET keys`).toBe(want);
      const post = await app.request(keys(), { method: 'POST', token });
      expect(post.status, `${persona.name} POST keys`).toBe(want === 200 ? 201 : want);
      const id = want === 200 ? (post.body as any).id : 1;
      expect(
        (await app.request(`${keys()}/${id}`, { method: 'DELETE', token })).status,
        `${persona.name} DELETE key`,
      ).toBe(want === 200 ? 200 : want);
    }
  });
});

describe('the collector', () => {
  let publicKey: string;
  beforeAll(async () => {
    await app.request(settings(), { method: 'PUT', token: adminToken, body: { active: true, integrated: true } });
    publicKey = ((await app.request(keys(), { method: 'POST', token: adminToken })).body as any).public_key;
  });

  const errors = () =>
    app.deps.db
      .selectFrom('error_tracking_errors')
      .selectAll()
      .where('project_id', '=', project.id)
      .orderBy('id')
      .execute();

  it('stores an envelope event as an error, grouped with the next of its kind; transactions are taken and dropped', async () => {
    const body = envelope([[{ type: 'event' }, event()]]);
    const res = await collect(`envelope/?sentry_key=${publicKey}&sentry_version=7`, body);
    expect(res.status, await res.clone().text()).toBe(200);
    const again = await collect('envelope/', body, {
      'X-Sentry-Auth': `Sentry sentry_version=7, sentry_key=${publicKey}, sentry_client=raw/1.0`,
    });
    expect(again.status).toBe(200);
    const tx = await collect(
      `envelope?sentry_key=${publicKey}`,
      envelope([[{ type: 'transaction' }, { type: 'transaction' }]]),
    );
    expect(tx.status).toBe(200);
    const [error] = await errors();
    expect(error).toMatchObject({
      name: 'TypeError',
      description: 'x is not a function',
      actor: 'inner(lib)',
      platform: 'node',
      events_count: 2,
      status: 'unresolved',
    });
    expect(error?.first_seen_at.toISOString()).toBe('2025-11-26T09:00:00.500Z');
    const events = await app.deps.db
      .selectFrom('error_tracking_error_events')
      .selectAll()
      .where('error_id', '=', error?.id as number)
      .execute();
    expect(events).toHaveLength(2);
    expect(events[0]).toMatchObject({ environment: 'production', level: 'error', description: 'x is not a function' });
  });

  it('takes /store with a gzip body, and a transaction name as the actor', async () => {
    const body = gzipSync(
      JSON.stringify(
        event({ transaction: 'GET /checkout', exception: { values: [{ type: 'RangeError', value: 'too far' }] } }),
      ),
    );
    const res = await collect(`store?sentry_key=${publicKey}`, body, {
      'Content-Type': 'application/json',
      'Content-Encoding': 'gzip',
    });
    expect(res.status).toBe(200);
    expect((await errors()).find((e) => e.name === 'RangeError')).toMatchObject({
      actor: 'GET /checkout',
      events_count: 1,
    });
  });

  it('refuses what GitLab refuses and stores nothing', async () => {
    const before = (await errors()).length;
    const auth = `?sentry_key=${publicKey}`;
    const cases: [string, Promise<Response>, number, unknown][] = [
      ['unknown project', collect(`envelope${auth}`, '{}', {}, 999999), 404, { message: '404 Project Not Found' }],
      ['no key', collect('envelope', envelope([[{ type: 'event' }, event()]])), 404, { message: '404 Not Found' }],
      [
        'unknown key',
        collect('envelope?sentry_key=glet_nope', envelope([[{ type: 'event' }, event()]])),
        404,
        { message: '404 Not Found' },
      ],
      [
        'unreadable auth header',
        collect('envelope', '{}', { 'X-Sentry-Auth': 'garbage' }),
        400,
        { message: 'Failed to parse sentry request' },
      ],
      ['broken envelope', collect(`envelope${auth}`, 'not json'), 400, { message: 'Failed to parse sentry request' }],
      [
        'a session item',
        collect(`envelope${auth}`, envelope([[{ type: 'session' }, {}]])),
        400,
        { message: '400 Bad Request' },
      ],
      [
        'an event without an exception',
        collect(`envelope${auth}`, envelope([[{ type: 'event' }, { message: 'hi' }]])),
        400,
        { message: 'Unsupported sentry payload' },
      ],
      [
        'store: not JSON',
        collect(`store${auth}`, '{', { 'Content-Type': 'application/json' }),
        400,
        { message: 'Failed to parse sentry request' },
      ],
      [
        'store: bad gzip',
        collect(`store${auth}`, 'xx', { 'Content-Encoding': 'gzip' }),
        400,
        { message: 'Failed to parse sentry request' },
      ],
    ];
    for (const [name, pending, status, body] of cases) {
      const res = await pending;
      expect(res.status, name).toBe(status);
      expect(await res.json(), name).toEqual(body);
    }
    expect((await errors()).length).toBe(before);
  });

  it('stops taking events when the setting is off or the key is removed', async () => {
    const body = envelope([[{ type: 'event' }, event()]]);
    await app.request(settings(), { method: 'PATCH', token: adminToken, body: { active: true, integrated: false } });
    expect((await collect(`envelope?sentry_key=${publicKey}`, body)).status).toBe(404);
    await app.request(settings(), { method: 'PATCH', token: adminToken, body: { active: true, integrated: true } });
    expect((await collect(`envelope?sentry_key=${publicKey}`, body)).status).toBe(200);
  });
});

describe('envelope parsing', () => {
  it('reads items with and without a length, payloads with newlines included', () => {
    const payload = '{"a":\n1}';
    const body = Buffer.from(
      `{"event_id":"x"}\n{"type":"attachment","length":${Buffer.byteLength(payload)}}\n${payload}\n{"type":"event"}\n{"b":2}\n`,
    );
    const items = parseEnvelope(body);
    expect(items.map((i) => i.type)).toEqual(['attachment', 'event']);
    expect(items[0]?.payload.toString()).toBe(payload);
    expect(JSON.parse(items[1]?.payload.toString() ?? '')).toEqual({ b: 2 });
    expect(() => parseEnvelope(Buffer.from('{}\n{"type":"event","length":99}\n{}'))).toThrow();
  });
});
