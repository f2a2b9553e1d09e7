import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertPersonalAccessToken } from '../../src/db/queries/tokens.js';
import type { User } from '../../src/db/schema.js';
import { addDays, utcDate } from '../../src/lib/clock.js';
import { digestToken, generateToken } from '../../src/lib/crypto.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeToken, makeUser, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

// GitLab's PersonalAccessToken entity, in the widely deployed order.
const TOKEN_KEYS = [
  'id',
  'name',
  'revoked',
  'created_at',
  'description',
  'scopes',
  'user_id',
  'last_used_at',
  'active',
  'expires_at',
];
const REVOKED = {
  error: 'invalid_token',
  error_description: 'Token was revoked. You have to re-authorize from the user.',
};

const today = () => utcDate(app.clock.now());

/** A token row written straight to the database (for impersonation and rotation families). */
async function insertToken(
  user: User,
  values: { name?: string; revoked?: boolean; impersonation?: boolean; previous?: number; expiresAt?: string } = {},
) {
  const plaintext = generateToken('glpat-');
  const now = app.clock.now();
  const row = await insertPersonalAccessToken(app.deps.db, {
    user_id: user.id,
    name: values.name ?? 'inserted',
    description: null,
    token_digest: digestToken(plaintext),
    scopes: JSON.stringify(['api']),
    expires_at: values.expiresAt ?? addDays(today(), 30),
    revoked: values.revoked ?? false,
    impersonation: values.impersonation ?? false,
    previous_personal_access_token_id: values.previous ?? null,
    created_at: now,
    updated_at: now,
  });
  return { row, plaintext };
}

async function tokenId(plaintext: string): Promise<number> {
  const row = await app.deps.db
    .selectFrom('personal_access_tokens')
    .select('id')
    .where('token_digest', '=', digestToken(plaintext))
    .executeTakeFirstOrThrow();
  return row.id;
}

const ids = (body: { id: number }[]) => body.map((t) => t.id);

describe('GET /personal_access_tokens', () => {
  it('answers anonymous callers 401', async () => {
    const res = await app.request('/personal_access_tokens');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: '401 Unauthorized' });
  });

  it("lists a user's own tokens (not impersonation ones), never someone else's", async () => {
    const { user, token } = await makeUserWithToken(app);
    const second = await makeToken(app, user, ['read_user'], { name: 'second' });
    const impersonation = await insertToken(user, { impersonation: true });
    const other = await makeUser(app);
    await makeToken(app, other);
    const res = await app.request('/personal_access_tokens', { token });
    expect(res.status).toBe(200);
    expect(ids(res.body)).toEqual([await tokenId(token), await tokenId(second)]);
    expect(ids(res.body)).not.toContain(impersonation.row.id);
    expect(Object.keys(res.body[0])).toEqual(TOKEN_KEYS);
    expect(res.body[1]).toMatchObject({
      name: 'second',
      revoked: false,
      description: null,
      scopes: ['read_user'],
      user_id: user.id,
      last_used_at: null,
      active: true,
      expires_at: addDays(today(), 365),
    });
    expect(res.body[0].last_used_at).toMatch(/Z$/);
    expect(res.headers.get('x-total')).toBe('2');
  });

  it('lets users name themselves in user_id, and answers 401 for anyone else', async () => {
    const { user, token } = await makeUserWithToken(app);
    const other = await makeUser(app);
    await makeToken(app, other);
    const own = await app.request(`/personal_access_tokens?user_id=${user.id}`, { token });
    expect(own.status).toBe(200);
    expect(ids(own.body)).toEqual([await tokenId(token)]);
    for (const id of [other.id, 99999999]) {
      const res = await app.request(`/personal_access_tokens?user_id=${id}`, { token });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ message: '401 Unauthorized' });
    }
    const bad = await app.request('/personal_access_tokens?user_id=me', { token });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'user_id is invalid' });
  });

  it("shows administrators everyone's tokens, by user_id, and 404 for an unknown user", async () => {
    const { token: admin } = await makeUserWithToken(app, { admin: true });
    const owner = await makeUser(app);
    const a = await makeToken(app, owner);
    const impersonation = await insertToken(owner, { impersonation: true });
    const res = await app.request(`/personal_access_tokens?user_id=${owner.id}`, { token: admin });
    expect(res.status).toBe(200);
    expect(ids(res.body)).toEqual([await tokenId(a), impersonation.row.id]);
    const all = await app.request('/personal_access_tokens?per_page=100', { token: admin });
    expect(ids(all.body)).toEqual(expect.arrayContaining([await tokenId(a), await tokenId(admin)]));
    for (const id of ['99999999', '99999999999']) {
      const missing = await app.request(`/personal_access_tokens?user_id=${id}`, { token: admin });
      expect(missing.status, id).toBe(404);
      expect(missing.body).toEqual({ message: '404 Not Found' });
    }
  });

  it('filters by state, revoked, search and dates, and sorts', async () => {
    const { user, token } = await makeUserWithToken(app);
    const alpha = await makeToken(app, user, ['api'], { name: 'alpha deploy', expiresAt: addDays(today(), 10) });
    const revoked = await insertToken(user, { name: 'beta deploy', revoked: true });
    const expired = await insertToken(user, { name: 'gamma', expiresAt: addDays(today(), -1) });
    const mine = await tokenId(token);
    const list = async (q: string) => {
      const res = await app.request(`/personal_access_tokens?${q}`, { token });
      expect(res.status, q).toBe(200);
      return ids(res.body);
    };
    expect(await list('state=active')).toEqual([mine, await tokenId(alpha)]);
    expect(await list('state=inactive')).toEqual([revoked.row.id, expired.row.id]);
    expect(await list('revoked=true')).toEqual([revoked.row.id]);
    expect(await list('revoked=false')).toEqual([mine, await tokenId(alpha), expired.row.id]);
    expect(await list('search=DEPLOY')).toEqual([await tokenId(alpha), revoked.row.id]);
    expect(await list(`expires_before=${addDays(today(), 11)}`)).toEqual([await tokenId(alpha), expired.row.id]);
    expect(await list(`expires_after=${addDays(today(), 30)}`)).toEqual([mine, revoked.row.id]);
    expect(await list('sort=name_desc')).toEqual([mine, expired.row.id, revoked.row.id, await tokenId(alpha)]);
    const bad = await app.request('/personal_access_tokens?state=dead', { token });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'state does not have a valid value' });
    const listed = await app.request('/personal_access_tokens?revoked=true', { token });
    expect(listed.body[0]).toMatchObject({ revoked: true, active: false });
    const old = await app.request('/personal_access_tokens?search=gamma', { token });
    expect(old.body[0]).toMatchObject({ revoked: false, active: false, expires_at: addDays(today(), -1) });
  });
});

describe('GET /personal_access_tokens/:id', () => {
  it('shows users their own token; another user’s is 401, even when it does not exist', async () => {
    const { user, token } = await makeUserWithToken(app);
    const id = await tokenId(token);
    const own = await app.request(`/personal_access_tokens/${id}`, { token });
    expect(own.status).toBe(200);
    expect(Object.keys(own.body)).toEqual(TOKEN_KEYS);
    expect(own.body).toMatchObject({ id, user_id: user.id, scopes: ['api'] });
    const other = await makeUser(app);
    const otherId = await tokenId(await makeToken(app, other));
    for (const target of [otherId, 99999999, 'abc']) {
      const res = await app.request(`/personal_access_tokens/${target}`, { token });
      expect(res.status, String(target)).toBe(401);
      expect(res.body).toEqual({ message: '401 Unauthorized' });
    }
  });

  it('shows administrators any token, and 404 for missing ones', async () => {
    const { token: admin } = await makeUserWithToken(app, { admin: true });
    const other = await makeUser(app);
    const otherId = await tokenId(await makeToken(app, other));
    const res = await app.request(`/personal_access_tokens/${otherId}`, { token: admin });
    expect(res.status).toBe(200);
    expect(res.body.user_id).toBe(other.id);
    for (const target of ['99999999', '99999999999', 'abc']) {
      const missing = await app.request(`/personal_access_tokens/${target}`, { token: admin });
      expect(missing.status, target).toBe(404);
      expect(missing.body).toEqual({ message: '404 Not Found' });
    }
  });
});

describe('DELETE /personal_access_tokens/:id', () => {
  it('revokes a user’s own token, which then answers 401 revoked', async () => {
    const { user, token } = await makeUserWithToken(app);
    const spare = await makeToken(app, user);
    const id = await tokenId(spare);
    const res = await app.request(`/personal_access_tokens/${id}`, { method: 'DELETE', token });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    const used = await app.request('/user', { token: spare });
    expect(used.status).toBe(401);
    expect(used.body).toEqual(REVOKED);
    const listed = await app.request(`/personal_access_tokens/${id}`, { token });
    expect(listed.body).toMatchObject({ revoked: true, active: false });
    const again = await app.request(`/personal_access_tokens/${id}`, { method: 'DELETE', token });
    expect(again.status).toBe(204);
  });

  it('answers 400 for another user’s token and 404 Not found for a missing one', async () => {
    const { token } = await makeUserWithToken(app);
    const other = await makeUser(app);
    const otherToken = await makeToken(app, other);
    const res = await app.request(`/personal_access_tokens/${await tokenId(otherToken)}`, {
      method: 'DELETE',
      token,
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: '400 Bad request' });
    expect((await app.request('/user', { token: otherToken })).status).toBe(200);
    for (const target of ['99999999', '99999999999', 'abc']) {
      const missing = await app.request(`/personal_access_tokens/${target}`, { method: 'DELETE', token });
      expect(missing.status, target).toBe(404);
      expect(missing.body).toEqual({ message: '404 Not found' });
    }
  });

  it('lets administrators revoke anyone’s token', async () => {
    const { token: admin } = await makeUserWithToken(app, { admin: true });
    const other = await makeUser(app);
    const otherToken = await makeToken(app, other);
    const res = await app.request(`/personal_access_tokens/${await tokenId(otherToken)}`, {
      method: 'DELETE',
      token: admin,
    });
    expect(res.status).toBe(204);
    expect((await app.request('/user', { token: otherToken })).body).toEqual(REVOKED);
  });

  it('needs a write scope', async () => {
    const user = await makeUser(app);
    const readOnly = await makeToken(app, user, ['read_api']);
    const victim = await makeToken(app, user);
    const res = await app.request(`/personal_access_tokens/${await tokenId(victim)}`, {
      method: 'DELETE',
      token: readOnly,
    });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: 'insufficient_scope', scope: 'api read_api' });
  });
});

describe('/personal_access_tokens/self', () => {
  it('shows the token used, whatever its scopes', async () => {
    const user = await makeUser(app);
    for (const scopes of [['read_user'], ['read_repository'], ['api']]) {
      const token = await makeToken(app, user, scopes);
      const res = await app.request('/personal_access_tokens/self', { token });
      expect(res.status, scopes.join()).toBe(200);
      expect(Object.keys(res.body)).toEqual(TOKEN_KEYS);
      expect(res.body).toMatchObject({ id: await tokenId(token), user_id: user.id, scopes });
      expect(res.body.last_used_at).toBe(app.clock.now().toISOString());
    }
    expect((await app.request('/personal_access_tokens/self')).status).toBe(401);
  });

  it('revokes the token used, whatever its scopes', async () => {
    const user = await makeUser(app);
    const token = await makeToken(app, user, ['read_repository']);
    const res = await app.request('/personal_access_tokens/self', { method: 'DELETE', token });
    expect(res.status).toBe(204);
    const after = await app.request('/personal_access_tokens/self', { token });
    expect(after.status).toBe(401);
    expect(after.body).toEqual(REVOKED);
  });
});
