import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { insertPersonalAccessToken } from '../../src/db/queries/tokens.js';
import type { User } from '../../src/db/schema.js';
import { addDays, utcDate } from '../../src/lib/clock.js';
import { digestToken, generateToken } from '../../src/lib/crypto.js';
import { type RequestOptions, startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeProject, makeToken, makeUser, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
let started: Date;
beforeAll(async () => {
  app = await startTestApp();
  started = app.clock.now();
});
afterEach(() => {
  // Tests that move time put it back, so every test starts from the same day.
  app.clock.set(started);
});
afterAll(async () => {
  await app?.close();
});

const UNAUTHORIZED = { message: '401 Unauthorized' };
const EXPIRED = {
  error: 'invalid_token',
  error_description: 'Token is expired. You can either do re-authorization or token refresh.',
};
const REVOKED = {
  error: 'invalid_token',
  error_description: 'Token was revoked. You have to re-authorize from the user.',
};
const insufficientScope = (scope: string) => ({
  error: 'insufficient_scope',
  error_description: 'The request requires higher privileges than provided by the access token.',
  scope,
});

const today = () => utcDate(app.clock.now());

async function tokenRow(plaintext: string) {
  return app.deps.db
    .selectFrom('personal_access_tokens')
    .selectAll()
    .where('token_digest', '=', digestToken(plaintext))
    .executeTakeFirstOrThrow();
}

async function setState(user: User, state: 'active' | 'blocked' | 'deactivated') {
  await app.deps.db.updateTable('users').set({ state }).where('id', '=', user.id).execute();
}

/** GET /user as whoever the headers and query name; the body's username, or the error. */
async function whoAmI(options: { headers?: Record<string, string>; query?: Record<string, string> }) {
  return app.request('/user', options);
}

describe('where a personal access token may be given', () => {
  it('reads the PRIVATE-TOKEN header whatever the case of its name', async () => {
    const { user, token } = await makeUserWithToken(app);
    for (const name of ['PRIVATE-TOKEN', 'Private-Token', 'private-token']) {
      const res = await whoAmI({ headers: { [name]: token } });
      expect(res.status, name).toBe(200);
      expect(res.body.username).toBe(user.username);
    }
  });

  it('reads the private_token parameter from the query and from a form body', async () => {
    const { user, token } = await makeUserWithToken(app);
    const res = await whoAmI({ query: { private_token: token } });
    expect(res.status).toBe(200);
    expect(res.body.username).toBe(user.username);
    const created = await app.request('/projects', {
      method: 'POST',
      body: new URLSearchParams({ name: `form-${user.id}`, private_token: token }),
    });
    expect(created.status).toBe(201);
    expect(created.body.namespace.path).toBe(user.username);
  });

  it('reads Authorization: Bearer and the access_token and bearer_token parameters', async () => {
    const { user, token } = await makeUserWithToken(app);
    for (const authorization of [`Bearer ${token}`, `bearer ${token}`, `Bearer   ${token}  `]) {
      const res = await whoAmI({ headers: { Authorization: authorization } });
      expect(res.status, authorization).toBe(200);
      expect(res.body.username).toBe(user.username);
    }
    for (const name of ['access_token', 'bearer_token']) {
      const param = await whoAmI({ query: { [name]: token } });
      expect(param.status, name).toBe(200);
      expect(param.body.username).toBe(user.username);
    }
    // Doorkeeper's order: the access_token parameter wins over the header, the header over bearer_token.
    const first = await whoAmI({ query: { access_token: token }, headers: { Authorization: 'Bearer nope' } });
    expect(first.status).toBe(200);
    const second = await whoAmI({ query: { bearer_token: 'nope' }, headers: { Authorization: `Bearer ${token}` } });
    expect(second.status).toBe(200);
  });

  it('prefers the private_token parameter, then PRIVATE-TOKEN, then Bearer', async () => {
    const a = await makeUserWithToken(app);
    const b = await makeUserWithToken(app);
    const c = await makeUserWithToken(app);
    const all = await whoAmI({
      query: { private_token: a.token },
      headers: { 'PRIVATE-TOKEN': b.token, Authorization: `Bearer ${c.token}` },
    });
    expect(all.body.username).toBe(a.user.username);
    const two = await whoAmI({ headers: { 'PRIVATE-TOKEN': b.token, Authorization: `Bearer ${c.token}` } });
    expect(two.body.username).toBe(b.user.username);
  });

  it('ignores empty credentials and other authorization schemes', async () => {
    const variants: Record<string, string>[] = [
      { 'PRIVATE-TOKEN': '' },
      { 'PRIVATE-TOKEN': '   ' },
      { Authorization: 'Bearer' },
      { Authorization: 'Basic dXNlcjpwYXNz' },
    ];
    for (const headers of variants) {
      const projects = await app.request('/projects', { headers });
      expect(projects.status, JSON.stringify(headers)).toBe(200);
      const me = await app.request('/user', { headers });
      expect(me.status).toBe(401);
      expect(me.body).toEqual(UNAUTHORIZED);
    }
  });
});

describe('unknown tokens', () => {
  it('answer 401 even on endpoints anonymous callers may use', async () => {
    const bogus = generateToken('glpat-');
    const transports: RequestOptions[] = [
      { headers: { 'PRIVATE-TOKEN': bogus } },
      { headers: { Authorization: `Bearer ${bogus}` } },
      { query: { private_token: bogus } },
      { query: { access_token: bogus } },
    ];
    for (const options of transports) {
      const res = await app.request('/projects', options);
      expect(res.status, JSON.stringify(options)).toBe(401);
      expect(res.body).toEqual(UNAUTHORIZED);
      const users = await app.request('/users?username=root', options);
      expect(users.status).toBe(401);
    }
  });

  it('answer 401 for a token one character off, with inner spaces or a trailing newline', async () => {
    const { token } = await makeUserWithToken(app);
    const last = token.at(-1) === 'A' ? 'B' : 'A';
    for (const wrong of [`${token.slice(0, -1)}${last}`, `${token}\n`, ` ${token}`, token.toUpperCase()]) {
      const res = await app.request('/projects', { query: { private_token: wrong } });
      expect(res.status, JSON.stringify(wrong)).toBe(401);
      expect(res.body).toEqual(UNAUTHORIZED);
    }
    const inner = await app.request('/projects', { headers: { Authorization: `Bearer ${token} extra` } });
    expect(inner.status).toBe(401);
    expect(inner.body).toEqual(UNAUTHORIZED);
  });

  it('accept surrounding spaces in a header, which HTTP strips', async () => {
    const { user, token } = await makeUserWithToken(app);
    const res = await whoAmI({ headers: { 'PRIVATE-TOKEN': `  ${token}\t ` } });
    expect(res.status).toBe(200);
    expect(res.body.username).toBe(user.username);
  });

  it('answer 401, not 500, for a 10 kB token', async () => {
    const huge = `glpat-${'x'.repeat(10 * 1024)}`;
    const header = await app.request('/projects', { headers: { 'PRIVATE-TOKEN': huge } });
    expect(header.status).toBe(401);
    expect(header.body).toEqual(UNAUTHORIZED);
    const bearer = await app.request('/projects', { headers: { Authorization: `Bearer ${huge}` } });
    expect(bearer.status).toBe(401);
    const query = await app.request('/projects', { query: { private_token: huge } });
    expect(query.status).toBe(401);
  });
});

describe('expiry', () => {
  it('keeps a token working until 00:00 UTC of its expires_at date', async () => {
    app.clock.set(`${today()}T12:00:00.000Z`);
    const user = await makeUser(app);
    const tomorrow = addDays(today(), 1);
    const token = await makeToken(app, user, ['api'], { expiresAt: tomorrow });
    expect((await app.request('/user', { token })).status).toBe(200);
    app.clock.set(`${today()}T23:59:59.999Z`);
    expect((await app.request('/user', { token })).status).toBe(200);
    app.clock.set(`${tomorrow}T00:00:00.000Z`);
    const res = await app.request('/user', { token });
    expect(res.status).toBe(401);
    expect(res.body).toEqual(EXPIRED);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm="The API", error="invalid_token"/);
    // Expired is reported even on public endpoints and for any transport.
    const projects = await app.request('/projects', { headers: { Authorization: `Bearer ${token}` } });
    expect(projects.status).toBe(401);
    expect(projects.body).toEqual(EXPIRED);
  });

  it('reports expired before revoked', async () => {
    const user = await makeUser(app);
    const token = await makeToken(app, user, ['api'], { expiresAt: addDays(today(), 1) });
    await app.deps.db
      .updateTable('personal_access_tokens')
      .set({ revoked: true })
      .where('user_id', '=', user.id)
      .execute();
    app.clock.advance(2 * 24 * 3600 * 1000);
    const res = await app.request('/user', { token });
    expect(res.body).toEqual(EXPIRED);
  });
});

describe('revocation', () => {
  it('answers 401 revoked with a WWW-Authenticate header', async () => {
    const { token } = await makeUserWithToken(app);
    expect((await app.request('/personal_access_tokens/self', { method: 'DELETE', token })).status).toBe(204);
    const res = await app.request('/projects', { token });
    expect(res.status).toBe(401);
    expect(res.body).toEqual(REVOKED);
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('revokes the whole rotation family when a revoked token is used', async () => {
    const user = await makeUser(app);
    const now = app.clock.now();
    const chain: { id: number; plaintext: string }[] = [];
    for (let i = 0; i < 3; i++) {
      const plaintext = generateToken('glpat-');
      const row = await insertPersonalAccessToken(app.deps.db, {
        user_id: user.id,
        name: `generation ${i}`,
        description: null,
        token_digest: digestToken(plaintext),
        scopes: JSON.stringify(['api']),
        expires_at: addDays(today(), 30),
        revoked: i === 0,
        previous_personal_access_token_id: chain[i - 1]?.id ?? null,
        created_at: now,
        updated_at: now,
      });
      chain.push({ id: row.id, plaintext });
    }
    const unrelated = await makeToken(app, user);
    const [first, , last] = chain as [(typeof chain)[0], (typeof chain)[0], (typeof chain)[0]];
    expect((await app.request('/user', { token: last.plaintext })).status).toBe(200);
    const reused = await app.request('/user', { token: first.plaintext });
    expect(reused.status).toBe(401);
    expect(reused.body).toEqual(REVOKED);
    for (const member of chain) expect((await tokenRow(member.plaintext)).revoked).toBe(true);
    const afterwards = await app.request('/user', { token: last.plaintext });
    expect(afterwards.status).toBe(401);
    expect(afterwards.body).toEqual(REVOKED);
    expect((await app.request('/user', { token: unrelated })).status).toBe(200);
  });
});

describe('scopes', () => {
  it('lets read_api read but not write', async () => {
    const user = await makeUser(app);
    const token = await makeToken(app, user, ['read_api']);
    expect((await app.request('/projects', { token })).status).toBe(200);
    const project = await makeProject(app, user);
    expect((await app.request(`/projects/${project.id}`, { token })).status).toBe(200);
    const res = await app.request('/projects', { method: 'POST', token, body: { name: 'nope' } });
    expect(res.status).toBe(403);
    expect(res.body).toEqual(insufficientScope('api read_api'));
    expect(res.headers.get('www-authenticate')).toBeNull();
  });

  it('names read_user first on the users endpoints', async () => {
    const admin = await makeAdmin(app);
    const token = await makeToken(app, admin, ['read_api']);
    const res = await app.request('/users', {
      method: 'POST',
      token,
      body: { email: 'scope@example.com', name: 'S', username: 'scope-user', password: 'long-enough-1' },
    });
    expect(res.status).toBe(403);
    expect(res.body).toEqual(insufficientScope('read_user api read_api'));
  });

  it('keeps read_user and repository tokens off the rest of the API', async () => {
    const user = await makeUser(app);
    for (const scopes of [['read_user'], ['read_repository'], ['write_repository'], ['sudo']]) {
      const res = await app.request('/projects', { token: await makeToken(app, user, scopes) });
      expect(res.status, scopes.join()).toBe(403);
      expect(res.body).toEqual(insufficientScope('api read_api'));
    }
    const readUser = await makeToken(app, user, ['read_user']);
    expect((await app.request('/user', { token: readUser })).status).toBe(200);
    expect((await app.request(`/users/${user.id}`, { token: readUser })).status).toBe(200);
  });
});

describe('sudo', () => {
  it('lets an administrator with the sudo scope act as a user by username or id', async () => {
    const admin = await makeAdmin(app);
    const token = await makeToken(app, admin, ['api', 'sudo']);
    const target = await makeUser(app);
    const ways: RequestOptions[] = [
      { headers: { Sudo: target.username } },
      { headers: { Sudo: target.username.toUpperCase() } },
      { headers: { Sudo: String(target.id) } },
      { query: { sudo: target.username } },
      { query: { sudo: String(target.id) }, headers: { Sudo: admin.username } },
    ];
    for (const options of ways) {
      const res = await app.request('/user', { token, ...options });
      expect(res.status, JSON.stringify(options)).toBe(200);
      expect(res.body.id).toBe(target.id);
      expect(res.body).not.toHaveProperty('is_admin');
    }
    const created = await app.request('/projects', {
      method: 'POST',
      token,
      headers: { Sudo: target.username },
      body: { name: `sudo-${target.id}` },
    });
    expect(created.status).toBe(201);
    expect(created.body.namespace.path).toBe(target.username);
    expect(created.body.creator_id).toBe(target.id);
  });

  it('needs only the sudo scope once acting as someone else', async () => {
    const admin = await makeAdmin(app);
    const token = await makeToken(app, admin, ['sudo']);
    const target = await makeUser(app);
    const res = await app.request('/user', { token, headers: { Sudo: target.username } });
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(target.id);
    const self = await app.request('/user', { token, headers: { Sudo: admin.username } });
    expect(self.status).toBe(403);
    expect(self.body).toEqual(insufficientScope('read_user api read_api'));
  });

  it('refuses a token without the sudo scope', async () => {
    const admin = await makeAdmin(app);
    const target = await makeUser(app);
    const res = await app.request('/user', {
      token: await makeToken(app, admin, ['api']),
      headers: { Sudo: target.username },
    });
    expect(res.status).toBe(403);
    expect(res.body).toEqual(insufficientScope('sudo'));
  });

  it('refuses users who are not administrators, and anonymous callers', async () => {
    const user = await makeUser(app);
    const target = await makeUser(app);
    const res = await app.request('/user', {
      token: await makeToken(app, user, ['api', 'sudo']),
      headers: { Sudo: target.username },
    });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: '403 Forbidden - Must be admin to use sudo' });
    const anonymous = await app.request('/projects', { headers: { Sudo: target.username } });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toEqual(UNAUTHORIZED);
  });

  it('answers 404 naming an unknown target, never 500', async () => {
    const admin = await makeAdmin(app);
    const token = await makeToken(app, admin, ['api', 'sudo']);
    for (const who of ['nobody-here', '99999999', '99999999999', '123456789012345678901234567890']) {
      const res = await app.request('/user', { token, headers: { Sudo: who } });
      expect(res.status, who).toBe(404);
      expect(res.body).toEqual({ message: `404 User with ID or username '${who}' Not Found` });
    }
  });
});

describe('account state', () => {
  it('forbids blocked and deactivated users, even on public endpoints', async () => {
    const { user, token } = await makeUserWithToken(app);
    await setState(user, 'blocked');
    for (const path of ['/user', '/projects']) {
      const res = await app.request(path, { token });
      expect(res.status, path).toBe(403);
      expect(res.body).toEqual({ message: '403 Forbidden - Your account has been blocked.' });
    }
    await setState(user, 'deactivated');
    const res = await app.request('/user', { token });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({
      message:
        '403 Forbidden - Your account has been deactivated by your administrator. ' +
        `Please log back in from a web browser to reactivate your account at ${app.baseUrl}`,
    });
    await setState(user, 'active');
    expect((await app.request('/user', { token })).status).toBe(200);
  });

  it('does not let an administrator act as a blocked administrator', async () => {
    const admin = await makeAdmin(app);
    const token = await makeToken(app, admin, ['api', 'sudo']);
    await setState(admin, 'blocked');
    const res = await app.request('/user', { token, headers: { Sudo: (await makeUser(app)).username } });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: '403 Forbidden - Your account has been blocked.' });
  });
});

describe('last_used_at', () => {
  it('records use, at most every ten minutes', async () => {
    const user = await makeUser(app);
    const token = await makeToken(app, user, ['read_user']);
    expect((await tokenRow(token)).last_used_at).toBeNull();
    const first = app.clock.now();
    await app.request('/user', { token });
    expect((await tokenRow(token)).last_used_at?.toISOString()).toBe(first.toISOString());
    app.clock.advance(5 * 60 * 1000);
    await app.request('/user', { token });
    expect((await tokenRow(token)).last_used_at?.toISOString()).toBe(first.toISOString());
    app.clock.advance(6 * 60 * 1000);
    await app.request('/user', { token });
    expect((await tokenRow(token)).last_used_at?.toISOString()).toBe(app.clock.now().toISOString());
    // A request refused for its scope still counts as a use, as in GitLab.
    app.clock.advance(11 * 60 * 1000);
    expect((await app.request('/projects', { token })).status).toBe(403);
    expect((await tokenRow(token)).last_used_at?.toISOString()).toBe(app.clock.now().toISOString());
  });
});
