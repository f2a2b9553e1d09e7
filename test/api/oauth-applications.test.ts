import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { digestToken } from '../../src/lib/crypto.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
let admin: User;
let adminToken: string;
beforeAll(async () => {
  app = await startTestApp();
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
});
afterAll(async () => {
  await app?.close();
});

const create = (body: Record<string, unknown>, token = adminToken) =>
  app.request('/applications', { method: 'POST', token, body });

describe('the admin Applications API', () => {
  it('creates an application and shows its gloas- secret once, storing only its digest', async () => {
    const res = await create({ name: 'CI bot', redirect_uri: 'https://ci.example/cb', scopes: 'api read_user' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(Number),
      application_id: expect.stringMatching(/^[0-9a-f]{64}$/),
      application_name: 'CI bot',
      callback_url: 'https://ci.example/cb',
      confidential: true,
      secret: expect.stringMatching(/^gloas-[A-Za-z0-9_-]{43}$/),
    });
    const row = await app.deps.db
      .selectFrom('oauth_applications')
      .selectAll()
      .where('id', '=', res.body.id)
      .executeTakeFirstOrThrow();
    expect(row.secret_digest).toBe(digestToken(res.body.secret));
    expect(JSON.stringify(row)).not.toContain(res.body.secret);
    expect(row.scopes).toEqual(['api', 'read_user']);

    const list = await app.request('/applications', { token: adminToken });
    expect(list.status).toBe(200);
    const listed = list.body.find((a: { id: number }) => a.id === res.body.id);
    expect(listed).toEqual({
      id: res.body.id,
      application_id: res.body.application_id,
      application_name: 'CI bot',
      callback_url: 'https://ci.example/cb',
      confidential: true,
    });
    expect(list.text).not.toContain(res.body.secret);
  });

  it('defaults to confidential and can register a public application', async () => {
    const res = await create({
      name: 'SPA',
      redirect_uri: 'http://127.0.0.1:3000/cb',
      scopes: 'read_user',
      confidential: false,
    });
    expect(res.status).toBe(201);
    expect(res.body.confidential).toBe(false);
  });

  it('deletes an application, then answers 404', async () => {
    const res = await create({ name: 'Temp', redirect_uri: 'https://t.example/cb', scopes: 'api' });
    const del = await app.request(`/applications/${res.body.id}`, { method: 'DELETE', token: adminToken });
    expect(del.status).toBe(204);
    const again = await app.request(`/applications/${res.body.id}`, { method: 'DELETE', token: adminToken });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ message: '404 Application Not Found' });
  });

  it('is for administrators only: 401 anonymous, 403 other users', async () => {
    const { token } = await makeUserWithToken(app);
    const body = { name: 'x', redirect_uri: 'https://x.example/cb', scopes: 'api' };
    expect((await app.request('/applications', { method: 'POST', body })).status).toBe(401);
    expect((await create(body, token)).status).toBe(403);
    expect((await app.request('/applications', { token })).status).toBe(403);
    expect((await app.request('/applications')).status).toBe(401);
    const count = await app.deps.db.selectFrom('oauth_applications').select('id').where('name', '=', 'x').execute();
    expect(count).toHaveLength(0);
  });

  it('refuses javascript:, data: and vbscript: redirect URIs in any case', async () => {
    for (const uri of [
      'javascript:alert(1)',
      'JavaScript://alert()',
      'data:text/html,hi',
      'DATA:x',
      'vbscript:msgbox',
      'VBScript:x',
    ]) {
      const res = await create({ name: 'evil', redirect_uri: uri, scopes: 'api' });
      expect(res.status, uri).toBe(400);
      expect(res.body).toEqual({ message: { redirect_uri: ['is forbidden by the server.'] } });
    }
  });

  it('refuses malformed redirect URIs with Doorkeeper messages', async () => {
    const cases: [string, string][] = [
      ['http://', 'must be a valid URI.'],
      ['/relative/cb', 'must be an absolute URI.'],
      ['https://client.example/cb#frag', 'cannot contain a fragment.'],
      ['localhost:3000/cb', 'must be a valid URI.'],
    ];
    for (const [uri, message] of cases) {
      const res = await create({ name: 'bad', redirect_uri: uri, scopes: 'api' });
      expect(res.status, uri).toBe(400);
      expect(res.body).toEqual({ message: { redirect_uri: [message] } });
    }
    const native = await create({ name: 'native', redirect_uri: 'com.example.app:/oauth/cb', scopes: 'api' });
    expect(native.status).toBe(201);
  });

  it('refuses unknown or blank scopes and missing parameters', async () => {
    const unknown = await create({ name: 'n', redirect_uri: 'https://n.example/cb', scopes: 'api sudo' });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ message: { scopes: ["doesn't match configured on the server."] } });
    const blank = await create({ name: 'n', redirect_uri: 'https://n.example/cb', scopes: '' });
    expect(blank.status).toBe(400);
    expect(blank.body).toEqual({ error: 'scopes is empty' });
    const missing = await create({ redirect_uri: 'https://n.example/cb', scopes: 'api' });
    expect(missing.body).toEqual({ error: 'name is missing' });
  });
});
