import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findUserNamespace } from '../../src/db/queries/namespaces.js';
import type { User } from '../../src/db/schema.js';
import { addDays, utcDate } from '../../src/lib/clock.js';
import { digestToken } from '../../src/lib/crypto.js';
import { PATH_FORMAT_MESSAGE } from '../../src/services/paths.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { addMember, makeGroup, makeProject, makeToken, makeUser, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

// Field lists in GitLab's exposure order (lib/api/entities/user_*.rb).
const USER_BASIC = ['id', 'username', 'name', 'state', 'locked', 'avatar_url', 'web_url'];
const USER = [
  ...USER_BASIC,
  'created_at',
  'bio',
  'location',
  'public_email',
  'skype',
  'linkedin',
  'twitter',
  'discord',
  'website_url',
  'organization',
  'job_title',
  'pronouns',
  'bot',
  'work_information',
  'followers',
  'following',
  'is_followed',
  'local_time',
];
const PROFILE_ONLY = ['created_at', 'followers', 'following', 'is_followed'];
const USER_PUBLIC = [
  ...USER,
  'last_sign_in_at',
  'confirmed_at',
  'last_activity_on',
  'email',
  'theme_id',
  'color_scheme_id',
  'projects_limit',
  'current_sign_in_at',
  'identities',
  'can_create_group',
  'can_create_project',
  'two_factor_enabled',
  'external',
  'private_profile',
  'commit_email',
  'preferred_language',
];
const USER_WITH_ADMIN = [...USER_PUBLIC, 'is_admin', 'note', 'namespace_id', 'created_by'];
const USER_DETAILS_WITH_ADMIN = [
  ...USER_WITH_ADMIN,
  'highest_role',
  'current_sign_in_ip',
  'last_sign_in_ip',
  'sign_in_count',
];
const TOKEN_WITH_TOKEN = [
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
  'token',
];

let counter = 0;
/** A fresh prefix so lists can be narrowed to the users one test made. */
const unique = (label: string) => {
  counter += 1;
  return `${label}${process.pid.toString(36)}x${counter}`;
};

async function adminToken(scopes = ['api']): Promise<{ admin: User; token: string }> {
  const { user, token } = await makeUserWithToken(app, { admin: true }, scopes);
  return { admin: user, token };
}

async function setState(user: User, state: 'active' | 'blocked' | 'deactivated') {
  await app.deps.db.updateTable('users').set({ state }).where('id', '=', user.id).execute();
}

const ids = (body: { id: number }[]) => body.map((u) => u.id);

describe('GET /user', () => {
  it('answers anonymous callers 401', async () => {
    const res = await app.request('/user');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: '401 Unauthorized' });
  });

  it('shows a user themselves as UserPublic, in GitLab order', async () => {
    const { user, token } = await makeUserWithToken(app, { bio: 'Hello', job_title: 'Dev', organization: 'Acme' });
    const res = await app.request('/user', { token });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(USER_PUBLIC);
    expect(res.body).toMatchObject({
      id: user.id,
      username: user.username,
      name: user.name,
      state: 'active',
      locked: false,
      web_url: `${app.baseUrl}/${user.username}`,
      created_at: user.created_at.toISOString(),
      bio: 'Hello',
      work_information: 'Dev at Acme',
      bot: false,
      is_followed: false,
      email: user.email,
      commit_email: user.email,
      identities: [],
      can_create_project: true,
      projects_limit: 100000,
      external: false,
      private_profile: false,
      two_factor_enabled: false,
    });
    expect(res.body.avatar_url).toMatch(/^https:\/\/www\.gravatar\.com\/avatar\/[0-9a-f]{64}\?s=80&d=identicon$/);
    expect(res.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('shows an administrator UserWithAdmin with namespace and creator', async () => {
    const { admin, token } = await adminToken();
    const res = await app.request('/user', { token });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(USER_WITH_ADMIN);
    const ns = await findUserNamespace(app.deps.db, admin.id);
    expect(res.body).toMatchObject({
      id: admin.id,
      is_admin: true,
      note: null,
      namespace_id: ns?.id,
      created_by: null,
    });

    const created = await app.request('/users', {
      method: 'POST',
      token,
      body: {
        email: `${unique('made')}@example.com`,
        name: 'Made',
        username: unique('made'),
        admin: true,
        force_random_password: true,
      },
    });
    expect(created.status).toBe(201);
    const madeToken = await app.request(`/users/${created.body.id}/personal_access_tokens`, {
      method: 'POST',
      token,
      body: { name: 'cli', scopes: ['read_user'] },
    });
    const me = await app.request('/user', { token: madeToken.body.token });
    expect(me.status).toBe(200);
    expect(me.body.created_by).toEqual({
      id: admin.id,
      username: admin.username,
      name: admin.name,
      state: 'active',
      locked: false,
      avatar_url: expect.any(String),
      web_url: `${app.baseUrl}/${admin.username}`,
    });
  });

  it('accepts read_user and read_api tokens, and names read_user first when refusing', async () => {
    const user = await makeUser(app);
    for (const scopes of [['read_user'], ['read_api'], ['api']]) {
      const res = await app.request('/user', { token: await makeToken(app, user, scopes) });
      expect(res.status, scopes.join()).toBe(200);
      expect(res.body.id).toBe(user.id);
    }
    const res = await app.request('/user', { token: await makeToken(app, user, ['read_repository']) });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({
      error: 'insufficient_scope',
      error_description: 'The request requires higher privileges than provided by the access token.',
      scope: 'read_user api read_api',
    });
  });
});

describe('GET /users', () => {
  it('refuses anonymous callers who do not name a user', async () => {
    for (const path of ['/users', '/users?username=', '/users?search=a']) {
      const res = await app.request(path);
      expect(res.status, path).toBe(403);
      expect(res.body).toEqual({ message: '403 Forbidden - Not authorized to access /api/v4/users' });
    }
  });

  it('lets anonymous callers look one user up by username, case-insensitively, as UserBasic', async () => {
    const user = await makeUser(app, { username: unique('Anon') });
    const res = await app.request(`/users?username=${user.username.toUpperCase()}`);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
    expect(Object.keys(res.body[0])).toEqual(USER_BASIC);
    expect(res.body[0]).toMatchObject({ id: user.id, username: user.username, state: 'active', locked: false });
    const none = await app.request('/users?username=nobody-has-this-name');
    expect(none.status).toBe(200);
    expect(none.body).toEqual([]);
  });

  it('shows users UserBasic and administrators UserWithAdmin', async () => {
    const target = await makeUser(app);
    const { token } = await makeUserWithToken(app);
    const asUser = await app.request(`/users?username=${target.username}`, { token });
    expect(asUser.status).toBe(200);
    expect(Object.keys(asUser.body[0])).toEqual(USER_BASIC);
    const { token: admin } = await adminToken();
    const asAdmin = await app.request(`/users?username=${target.username}`, { token: admin });
    expect(asAdmin.status).toBe(200);
    expect(Object.keys(asAdmin.body[0])).toEqual(USER_WITH_ADMIN);
    const ns = await findUserNamespace(app.deps.db, target.id);
    expect(asAdmin.body[0]).toMatchObject({
      id: target.id,
      is_admin: false,
      namespace_id: ns?.id,
      email: target.email,
    });
  });

  it('accepts read_user and read_api tokens', async () => {
    const user = await makeUser(app);
    for (const scopes of [['read_user'], ['read_api']]) {
      const res = await app.request(`/users?username=${user.username}`, { token: await makeToken(app, user, scopes) });
      expect(res.status).toBe(200);
      expect(ids(res.body)).toEqual([user.id]);
    }
  });

  it('searches names and usernames; emails only for administrators, public emails for all', async () => {
    const tag = unique('srch');
    const byName = await makeUser(app, { name: `Ada ${tag} Lovelace` });
    const byUsername = await makeUser(app, { username: `${tag}-user` });
    const byEmail = await makeUser(app, { email: `${tag}@mail.example.com` });
    const byPublic = await makeUser(app, { public_email: `${tag}.pub@example.com` });
    const { token } = await makeUserWithToken(app);
    const { token: admin } = await adminToken();

    const asUser = await app.request(`/users?search=${tag}`, { token });
    expect(asUser.status).toBe(200);
    expect(ids(asUser.body).sort()).toEqual([byName.id, byUsername.id].sort());
    const upper = await app.request(`/users?search=${tag.toUpperCase()}`, { token });
    expect(ids(upper.body).sort()).toEqual([byName.id, byUsername.id].sort());

    const email = `${tag}@mail.example.com`;
    expect(ids((await app.request(`/users?search=${email}`, { token })).body)).toEqual([]);
    expect(ids((await app.request(`/users?search=${email.toUpperCase()}`, { token: admin })).body)).toEqual([
      byEmail.id,
    ]);
    // A part of an email matches nothing, even for administrators.
    expect(ids((await app.request(`/users?search=mail.example.com`, { token: admin })).body)).not.toContain(byEmail.id);
    const pub = await app.request(`/users?search=${tag}.pub@example.com`, { token });
    expect(ids(pub.body)).toEqual([byPublic.id]);
  });

  it('ranks exact matches first when searching, and strips a leading @', async () => {
    const tag = unique('rank');
    const partial = await makeUser(app, { username: `${tag}-longer`, name: 'Aaa first by name' });
    const exact = await makeUser(app, { username: tag, name: 'Zzz last by name' });
    const { token } = await makeUserWithToken(app);
    const res = await app.request(`/users?search=${tag}`, { token });
    expect(ids(res.body)).toEqual([exact.id, partial.id]);
    const at = await app.request(`/users?search=@${tag}`, { token });
    expect(ids(at.body)).toEqual([exact.id, partial.id]);
  });

  it('treats search words shorter than three characters as a whole-value match', async () => {
    const { token } = await makeUserWithToken(app);
    const user = await makeUser(app, { name: 'Qz' });
    const res = await app.request('/users?search=qz', { token });
    expect(ids(res.body)).toContain(user.id);
    const part = await app.request('/users?search=q', { token });
    expect(ids(part.body)).not.toContain(user.id);
  });

  it('filters active, blocked and external users', async () => {
    const tag = unique('flt');
    const active = await makeUser(app, { username: `${tag}-active` });
    const blocked = await makeUser(app, { username: `${tag}-blocked` });
    const external = await makeUser(app, { username: `${tag}-external`, external: true });
    await setState(blocked, 'blocked');
    const { token } = await makeUserWithToken(app);
    const list = async (q: string) => ids((await app.request(`/users?search=${tag}&${q}`, { token })).body).sort();
    expect(await list('active=true')).toEqual([active.id, external.id].sort());
    // Only administrators list blocked and banned users (GitLab's `without_forbidden_states`).
    expect(await list('blocked=true')).toEqual([]);
    expect(await list('external=true')).toEqual([external.id]);
    expect(await list('exclude_external=true')).toEqual([active.id]);
    expect(await list('active=false')).toEqual([active.id, external.id].sort());
    const { token: admin } = await adminToken();
    const asAdmin = async (q: string) =>
      ids((await app.request(`/users?search=${tag}&${q}`, { token: admin })).body).sort();
    expect(await asAdmin('blocked=true')).toEqual([blocked.id]);
    expect(await asAdmin('exclude_external=true')).toEqual([active.id, blocked.id].sort());
    expect(await asAdmin('active=false')).toEqual([active.id, blocked.id, external.id].sort());
    const bad = await app.request('/users?active=maybe', { token });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'active is invalid' });
  });

  it('filters administrators only for administrators', async () => {
    const tag = unique('adm');
    const plain = await makeUser(app, { username: `${tag}-plain` });
    const boss = await makeUser(app, { username: `${tag}-boss`, admin: true });
    const { token } = await makeUserWithToken(app);
    const { token: admin } = await adminToken();
    const asUser = await app.request(`/users?search=${tag}&admins=true`, { token });
    expect(ids(asUser.body).sort()).toEqual([plain.id, boss.id].sort());
    const asAdmin = await app.request(`/users?search=${tag}&admins=true`, { token: admin });
    expect(ids(asAdmin.body)).toEqual([boss.id]);
  });

  it('orders by id descending by default; order_by and sort only for administrators', async () => {
    const tag = unique('ord');
    const b = await makeUser(app, { username: `${tag}-b`, name: `${tag} b` });
    const a = await makeUser(app, { username: `${tag}-a`, name: `${tag} a` });
    const c = await makeUser(app, { username: `${tag}-c`, name: `${tag} c` });
    const { token } = await makeUserWithToken(app);
    const { token: admin } = await adminToken();
    // A search ranks results, so list everything and keep these three.
    const mine = (body: { id: number }[]) => ids(body).filter((id) => [a.id, b.id, c.id].includes(id));
    const all = await app.request('/users?per_page=100', { token });
    expect(mine(all.body)).toEqual([c.id, a.id, b.id]);
    const userSorted = await app.request('/users?per_page=100&order_by=username&sort=asc', { token });
    expect(mine(userSorted.body)).toEqual([c.id, a.id, b.id]);
    const adminSorted = await app.request('/users?per_page=100&order_by=username&sort=asc', { token: admin });
    expect(mine(adminSorted.body)).toEqual([a.id, b.id, c.id]);
    const byName = await app.request(`/users?search=${tag}&order_by=name&sort=desc`, { token: admin });
    expect(ids(byName.body)).toEqual([c.id, b.id, a.id]);
    const asc = await app.request(`/users?search=${tag}&order_by=created_at&sort=asc`, { token: admin });
    expect(ids(asc.body)).toEqual([b.id, a.id, c.id]);
    const bad = await app.request('/users?order_by=email', { token: admin });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'order_by does not have a valid value' });
    const badSort = await app.request('/users?sort=up', { token: admin });
    expect(badSort.body).toEqual({ error: 'sort does not have a valid value' });
  });

  it('paginates with every GitLab header and Link built from BASE_URL', async () => {
    const tag = unique('page');
    const made: User[] = [];
    for (let i = 0; i < 5; i++) made.push(await makeUser(app, { username: `${tag}-${i}` }));
    const { token } = await adminToken();
    const res = await app.request(`/users?search=${tag}&order_by=id&sort=asc&per_page=2&page=2`, { token });
    expect(res.status).toBe(200);
    expect(ids(res.body)).toEqual([made[2]?.id, made[3]?.id]);
    expect(res.headers.get('x-total')).toBe('5');
    expect(res.headers.get('x-total-pages')).toBe('3');
    expect(res.headers.get('x-page')).toBe('2');
    expect(res.headers.get('x-per-page')).toBe('2');
    expect(res.headers.get('x-next-page')).toBe('3');
    expect(res.headers.get('x-prev-page')).toBe('1');
    const links = (res.headers.get('link') ?? '').split(', ').map((part) => {
      const [, url, rel] = /^<([^>]+)>; rel="(\w+)"$/.exec(part) ?? [];
      return { rel, url: new URL(url as string) };
    });
    expect(links.map((l) => [l.rel, l.url.searchParams.get('page')])).toEqual([
      ['prev', '1'],
      ['next', '3'],
      ['first', '1'],
      ['last', '3'],
    ]);
    for (const { url } of links) {
      expect(`${url.origin}${url.pathname}`).toBe(`${app.baseUrl}/api/v4/users`);
      expect(url.searchParams.get('per_page')).toBe('2');
      expect(url.searchParams.get('search')).toBe(tag);
    }
    const last = await app.request(`/users?search=${tag}&order_by=id&sort=asc&per_page=2&page=3`, { token });
    expect(ids(last.body)).toEqual([made[4]?.id]);
    expect(last.headers.get('x-next-page')).toBe('');
    expect(last.headers.get('link')).not.toContain('rel="next"');
    const beyond = await app.request(`/users?search=${tag}&per_page=2&page=9`, { token });
    expect(beyond.status).toBe(200);
    expect(beyond.body).toEqual([]);
  });

  it('clamps per_page to 100 and rejects bad pagination values', async () => {
    const { token } = await makeUserWithToken(app);
    const big = await app.request('/users?per_page=500', { token });
    expect(big.status).toBe(200);
    expect(big.headers.get('x-per-page')).toBe('100');
    const zero = await app.request('/users?page=0', { token });
    expect(zero.status).toBe(400);
    expect(zero.body).toEqual({ error: 'page does not have a valid value' });
    const word = await app.request('/users?per_page=abc', { token });
    expect(word.status).toBe(400);
    expect(word.body).toEqual({ error: 'per_page is invalid' });
    const negative = await app.request('/users?per_page=-1', { token });
    expect(negative.status).toBe(400);
    expect(negative.body).toEqual({ error: 'per_page does not have a valid value' });
    const huge = await app.request('/users?page=99999999999999999999', { token });
    expect(huge.status).toBe(400);
  });
});

describe('GET /users/:id', () => {
  it('shows a user the User entity and an administrator UserDetailsWithAdmin', async () => {
    const target = await makeUser(app, { location: 'Lyon' });
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    await addMember(app, { type: 'group', id: group.id }, target, 30);
    const { token } = await makeUserWithToken(app);
    const asUser = await app.request(`/users/${target.id}`, { token });
    expect(asUser.status).toBe(200);
    expect(Object.keys(asUser.body)).toEqual(USER);
    expect(asUser.body).toMatchObject({ id: target.id, location: 'Lyon', followers: 0, following: 0 });
    expect(asUser.body).not.toHaveProperty('email');

    const { token: admin } = await adminToken();
    const asAdmin = await app.request(`/users/${target.id}`, { token: admin });
    expect(asAdmin.status).toBe(200);
    expect(Object.keys(asAdmin.body)).toEqual(USER_DETAILS_WITH_ADMIN);
    expect(asAdmin.body).toMatchObject({ id: target.id, email: target.email, highest_role: 30, is_admin: false });
    const loner = await makeUser(app);
    expect((await app.request(`/users/${loner.id}`, { token: admin })).body.highest_role).toBe(0);
  });

  it('answers anonymous callers 403', async () => {
    const target = await makeUser(app);
    const res = await app.request(`/users/${target.id}`);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: '403 Forbidden - Not authorized!' });
  });

  it('answers 404 User Not Found for missing and out-of-range ids', async () => {
    const { token } = await makeUserWithToken(app);
    const { token: admin } = await adminToken();
    for (const id of ['99999', '99999999999', '99999999999999999999999']) {
      for (const t of [token, admin]) {
        const res = await app.request(`/users/${id}`, { token: t });
        expect(res.status, id).toBe(404);
        expect(res.body).toEqual({ message: '404 User Not Found' });
      }
    }
  });

  it('takes only numeric ids, as GitLab routes /users/:id (a username falls to the catch-all 404)', async () => {
    const target = await makeUser(app);
    const { token } = await makeUserWithToken(app);
    for (const id of [target.username, '-1', '1.5', '%2e%2e']) {
      const res = await app.request(`/users/${id}`, { token });
      expect(res.status, id).toBe(404);
      expect(res.body).toEqual({ error: '404 Not Found' });
    }
  });

  it('hides profile-only fields of a private profile from other users, not from self or admins', async () => {
    const target = await makeUser(app, { private_profile: true, bio: 'secret life' });
    const targetToken = await makeToken(app, target);
    const { token } = await makeUserWithToken(app);
    const { token: admin } = await adminToken();
    const other = await app.request(`/users/${target.id}`, { token });
    expect(other.status).toBe(200);
    expect(Object.keys(other.body)).toEqual(USER.filter((k) => !PROFILE_ONLY.includes(k)));
    const self = await app.request(`/users/${target.id}`, { token: targetToken });
    expect(Object.keys(self.body)).toEqual(USER);
    const asAdmin = await app.request(`/users/${target.id}`, { token: admin });
    expect(Object.keys(asAdmin.body)).toEqual(USER_DETAILS_WITH_ADMIN);
    expect(asAdmin.body.private_profile).toBe(true);
  });
});

describe('POST /users', () => {
  const validBody = () => {
    const username = unique('new');
    return { email: `${username}@example.com`, name: `New ${username}`, username, password: 'correct-horse-1' };
  };

  it('is for administrators: 401 anonymous, 403 users, insufficient_scope for read-only tokens', async () => {
    const anonymous = await app.request('/users', { method: 'POST', body: validBody() });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toEqual({ message: '401 Unauthorized' });
    const { token } = await makeUserWithToken(app);
    const user = await app.request('/users', { method: 'POST', token, body: validBody() });
    expect(user.status).toBe(403);
    expect(user.body).toEqual({ message: '403 Forbidden' });
    const { admin } = await adminToken();
    const readOnly = await app.request('/users', {
      method: 'POST',
      token: await makeToken(app, admin, ['read_user', 'read_api']),
      body: validBody(),
    });
    expect(readOnly.status).toBe(403);
    expect(readOnly.body).toEqual({
      error: 'insufficient_scope',
      error_description: 'The request requires higher privileges than provided by the access token.',
      scope: 'read_user api read_api',
    });
  });

  it('reports missing parameters in the order Grape declares them', async () => {
    const { token } = await adminToken();
    const none = await app.request('/users', { method: 'POST', token, body: {} });
    expect(none.status).toBe(400);
    expect(none.body).toEqual({
      error:
        'email is missing, password, reset_password, force_random_password are missing, at least one parameter must be provided, name is missing, username is missing',
    });
    const { password: _password, ...noPassword } = validBody();
    const onlyPassword = await app.request('/users', { method: 'POST', token, body: noPassword });
    expect(onlyPassword.status).toBe(400);
    expect(onlyPassword.body).toEqual({
      error: 'password, reset_password, force_random_password are missing, at least one parameter must be provided',
    });
    const { name: _name, ...noName } = validBody();
    const missingName = await app.request('/users', { method: 'POST', token, body: noName });
    expect(missingName.body).toEqual({ error: 'name is missing' });
    const badBool = await app.request('/users', {
      method: 'POST',
      token,
      body: { ...validBody(), admin: 'perhaps' },
    });
    expect(badBool.status).toBe(400);
    expect(badBool.body).toEqual({ error: 'admin is invalid' });
  });

  it('creates a user with a personal namespace who can then use a token', async () => {
    const { admin, token } = await adminToken();
    const body = { ...validBody(), bio: 'Bio', skip_confirmation: true };
    const res = await app.request('/users', { method: 'POST', token, body });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body)).toEqual(USER_WITH_ADMIN);
    expect(res.body).toMatchObject({
      username: body.username,
      email: body.email,
      name: body.name,
      bio: 'Bio',
      state: 'active',
      is_admin: false,
      namespace_id: expect.any(Number),
      created_by: expect.objectContaining({ id: admin.id, username: admin.username }),
    });
    expect(res.body.confirmed_at).toMatch(/Z$/);
    const row = await app.deps.db
      .selectFrom('users')
      .selectAll()
      .where('id', '=', res.body.id)
      .executeTakeFirstOrThrow();
    expect(row.password_digest).toMatch(/^scrypt\$/);
    expect(row.password_digest).not.toContain(body.password);

    const pat = await app.request(`/users/${res.body.id}/personal_access_tokens`, {
      method: 'POST',
      token,
      body: { name: 'first', scopes: ['api'] },
    });
    expect(pat.status).toBe(201);
    const me = await app.request('/user', { token: pat.body.token });
    expect(me.status).toBe(200);
    expect(me.body.username).toBe(body.username);
    const namespaces = await app.request('/namespaces', { token: pat.body.token });
    expect(namespaces.status).toBe(200);
    expect(namespaces.body).toEqual([
      expect.objectContaining({
        id: res.body.namespace_id,
        kind: 'user',
        path: body.username,
        full_path: body.username,
      }),
    ]);
  });

  it('accepts force_random_password or reset_password instead of a password, and admin flags', async () => {
    const { token } = await adminToken();
    const { password: _p, ...base } = validBody();
    const random = await app.request('/users', {
      method: 'POST',
      token,
      body: { ...base, force_random_password: true, admin: true, external: true, projects_limit: 5 },
    });
    expect(random.status).toBe(201);
    expect(random.body).toMatchObject({ is_admin: true, external: true, projects_limit: 5 });
    const { password: _q, ...other } = validBody();
    const reset = await app.request('/users', { method: 'POST', token, body: { ...other, reset_password: true } });
    expect(reset.status).toBe(201);
  });

  it('answers 409 for a taken email (checked first, case-insensitively), then a taken username', async () => {
    const { token } = await adminToken();
    const existing = await makeUser(app);
    const sameEmail = await app.request('/users', {
      method: 'POST',
      token,
      body: { ...validBody(), email: existing.email.toUpperCase() },
    });
    expect(sameEmail.status).toBe(409);
    expect(sameEmail.body).toEqual({ message: 'Email has already been taken' });
    const sameUsername = await app.request('/users', {
      method: 'POST',
      token,
      body: { ...validBody(), username: existing.username.toUpperCase() },
    });
    expect(sameUsername.status).toBe(409);
    expect(sameUsername.body).toEqual({ message: 'Username has already been taken' });
    const both = await app.request('/users', {
      method: 'POST',
      token,
      body: { ...validBody(), email: existing.email, username: existing.username, password: 'short' },
    });
    expect(both.status).toBe(409);
    expect(both.body).toEqual({ message: 'Email has already been taken' });
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const groupPath = await app.request('/users', {
      method: 'POST',
      token,
      body: { ...validBody(), username: group.path },
    });
    expect(groupPath.status).toBe(409);
    expect(groupPath.body).toEqual({ message: 'Username has already been taken' });
  });

  it('validates password, username and email like the GitLab model', async () => {
    const { token } = await adminToken();
    const short = await app.request('/users', { method: 'POST', token, body: { ...validBody(), password: 'short' } });
    expect(short.status).toBe(400);
    expect(short.body).toEqual({ message: { password: ['is too short (minimum is 8 characters)'] } });
    for (const username of ['-leading-dash', 'has space', 'ends.git', 'x/y']) {
      const res = await app.request('/users', { method: 'POST', token, body: { ...validBody(), username } });
      expect(res.status, username).toBe(400);
      expect(res.body).toEqual({ message: { username: [PATH_FORMAT_MESSAGE] } });
    }
    const reserved = await app.request('/users', {
      method: 'POST',
      token,
      body: { ...validBody(), username: 'Admin' },
    });
    expect(reserved.status).toBe(400);
    expect(reserved.body).toEqual({ message: { username: ['Admin is a reserved name'] } });
    const email = await app.request('/users', {
      method: 'POST',
      token,
      body: { ...validBody(), email: 'not-an-email' },
    });
    expect(email.status).toBe(400);
    expect(email.body).toEqual({ message: { email: ['is invalid'] } });
    const blankName = await app.request('/users', { method: 'POST', token, body: { ...validBody(), name: '  ' } });
    expect(blankName.status).toBe(400);
    expect(blankName.body).toEqual({ message: { name: ["can't be blank"] } });
  });
});

describe('PUT /users/:id', () => {
  it('renames a user and moves their namespace and projects', async () => {
    const { token } = await adminToken();
    const user = await makeUser(app);
    const userToken = await makeToken(app, user);
    const project = await makeProject(app, user);
    const newName = unique('renamed');
    const res = await app.request(`/users/${user.id}`, {
      method: 'PUT',
      token,
      body: { username: newName, name: 'Renamed Person', bio: 'new bio' },
    });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(USER_WITH_ADMIN);
    expect(res.body).toMatchObject({ id: user.id, username: newName, name: 'Renamed Person', bio: 'new bio' });
    expect(res.body.web_url).toBe(`${app.baseUrl}/${newName}`);
    const namespaces = await app.request('/namespaces', { token: userToken });
    expect(namespaces.body).toEqual([
      expect.objectContaining({ kind: 'user', path: newName, full_path: newName, name: 'Renamed Person' }),
    ]);
    const moved = await app.request(`/projects/${project.id}`, { token: userToken });
    expect(moved.body.path_with_namespace).toBe(`${newName}/${project.path}`);
    const byNewPath = await app.request(`/projects/${encodeURIComponent(`${newName}/${project.path}`)}`, {
      token: userToken,
    });
    expect(byNewPath.status).toBe(200);
  });

  it('answers 409 for a username or email another user has, but not for their own', async () => {
    const { token } = await adminToken();
    const user = await makeUser(app);
    const other = await makeUser(app);
    const username = await app.request(`/users/${user.id}`, {
      method: 'PUT',
      token,
      body: { username: other.username.toUpperCase() },
    });
    expect(username.status).toBe(409);
    expect(username.body).toEqual({ message: 'Username has already been taken' });
    const email = await app.request(`/users/${user.id}`, { method: 'PUT', token, body: { email: other.email } });
    expect(email.status).toBe(409);
    expect(email.body).toEqual({ message: 'Email has already been taken' });
    const own = await app.request(`/users/${user.id}`, {
      method: 'PUT',
      token,
      body: { username: user.username.toUpperCase(), email: user.email },
    });
    expect(own.status).toBe(200);
    expect(own.body.username).toBe(user.username.toUpperCase());
  });

  it('is for administrators and finds users by numeric id only', async () => {
    const user = await makeUser(app);
    const anonymous = await app.request(`/users/${user.id}`, { method: 'PUT', body: { bio: 'x' } });
    expect(anonymous.status).toBe(401);
    const { token } = await makeUserWithToken(app);
    const forbidden = await app.request(`/users/${user.id}`, { method: 'PUT', token, body: { bio: 'x' } });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body).toEqual({ message: '403 Forbidden' });
    const self = await app.request(`/users/${(await app.request('/user', { token })).body.id}`, {
      method: 'PUT',
      token,
      body: { admin: true },
    });
    expect(self.status).toBe(403);
    const { token: admin } = await adminToken();
    const missing = await app.request('/users/99999999999', { method: 'PUT', token: admin, body: { bio: 'x' } });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ message: '404 User Not Found' });
    const byName = await app.request(`/users/${user.username}`, { method: 'PUT', token: admin, body: { bio: 'x' } });
    expect(byName.status).toBe(404);
    expect(byName.body).toEqual({ error: '404 Not Found' });
    const short = await app.request(`/users/${user.id}`, { method: 'PUT', token: admin, body: { password: 'short' } });
    expect(short.status).toBe(400);
    expect(short.body).toEqual({ message: { password: ['is too short (minimum is 8 characters)'] } });
  });
});

describe('POST /users/:user_id/personal_access_tokens', () => {
  it('creates a glpat- token, shown once, stored only as a SHA-256 digest', async () => {
    const { token } = await adminToken();
    const user = await makeUser(app);
    const res = await app.request(`/users/${user.id}/personal_access_tokens`, {
      method: 'POST',
      token,
      body: { name: 'automation', scopes: ['api', 'read_user'], description: 'for CI' },
    });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body)).toEqual(TOKEN_WITH_TOKEN);
    expect(res.body).toMatchObject({
      name: 'automation',
      revoked: false,
      description: 'for CI',
      scopes: ['api', 'read_user'],
      user_id: user.id,
      last_used_at: null,
      active: true,
      expires_at: addDays(utcDate(app.clock.now()), 365),
    });
    expect(res.body.token).toMatch(/^glpat-[A-Za-z0-9_-]{20,}$/);
    const row = await app.deps.db
      .selectFrom('personal_access_tokens')
      .selectAll()
      .where('id', '=', res.body.id)
      .executeTakeFirstOrThrow();
    expect(row.token_digest).toBe(digestToken(res.body.token));
    expect(row.token_digest).toMatch(/^[0-9a-f]{64}$/);
    const dump = JSON.stringify(await app.deps.db.selectFrom('personal_access_tokens').selectAll().execute());
    expect(dump).not.toContain(res.body.token);
    expect(dump).not.toContain(res.body.token.slice('glpat-'.length));
    // Listing never shows the plaintext again.
    const list = await app.request(`/personal_access_tokens/${res.body.id}`, { token });
    expect(list.body).not.toHaveProperty('token');
  });

  it('accepts scopes as a comma-separated string and an explicit expiry date', async () => {
    const { token } = await adminToken();
    const user = await makeUser(app);
    const expires = addDays(utcDate(app.clock.now()), 30);
    const res = await app.request(`/users/${user.id}/personal_access_tokens`, {
      method: 'POST',
      token,
      body: new URLSearchParams({ name: 'csv', scopes: 'read_api,read_repository', expires_at: expires }),
    });
    expect(res.status).toBe(201);
    expect(res.body.scopes).toEqual(['read_api', 'read_repository']);
    expect(res.body.expires_at).toBe(expires);
  });

  it('validates scopes, name and the expiry date', async () => {
    const { token } = await adminToken();
    const user = await makeUser(app);
    const post = (body: unknown) =>
      app.request(`/users/${user.id}/personal_access_tokens`, { method: 'POST', token, body });
    const badScope = await post({ name: 't', scopes: ['api', 'everything'] });
    expect(badScope.status).toBe(400);
    expect(badScope.body).toEqual({ error: 'scopes does not have a valid value' });
    expect((await post({ name: 't' })).body).toEqual({ error: 'scopes is missing' });
    expect((await post({ scopes: ['api'] })).body).toEqual({ error: 'name is missing' });
    const today = utcDate(app.clock.now());
    const past = await post({ name: 't', scopes: ['api'], expires_at: addDays(today, -1) });
    expect(past.status).toBe(400);
    expect(past.body).toEqual({ message: { expires_at: ['must be in the future'] } });
    const tooFar = await post({ name: 't', scopes: ['api'], expires_at: addDays(today, 366) });
    expect(tooFar.status).toBe(422);
    expect(tooFar.body).toEqual({ message: `Expiration date must be before ${addDays(today, 365)}` });
    const limit = await post({ name: 't', scopes: ['api'], expires_at: addDays(today, 365) });
    expect(limit.status).toBe(201);
    const invalid = await post({ name: 't', scopes: ['api'], expires_at: '2026-02-30' });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toEqual({ error: 'expires_at is invalid' });
    const blank = await post({ name: ' ', scopes: [] });
    expect(blank.status).toBe(422);
    expect(blank.body).toEqual({ message: "Name can't be blank and Scopes can't be blank" });
  });

  it('is for administrators; unknown users are 404', async () => {
    const user = await makeUser(app);
    const body = { name: 't', scopes: ['api'] };
    const anonymous = await app.request(`/users/${user.id}/personal_access_tokens`, { method: 'POST', body });
    expect(anonymous.status).toBe(401);
    const { token } = await makeUserWithToken(app);
    const own = await app.request(`/users/${user.id}/personal_access_tokens`, { method: 'POST', token, body });
    expect(own.status).toBe(403);
    expect(own.body).toEqual({ message: '403 Forbidden' });
    const { token: admin } = await adminToken();
    for (const id of ['99999', '99999999999']) {
      const res = await app.request(`/users/${id}/personal_access_tokens`, { method: 'POST', token: admin, body });
      expect(res.status, id).toBe(404);
      expect(res.body).toEqual({ message: '404 User Not Found' });
    }
    const word = await app.request(`/users/${user.username}/personal_access_tokens`, {
      method: 'POST',
      token: admin,
      body,
    });
    expect(word.status).toBe(400);
    expect(word.body).toEqual({ error: 'user_id is invalid' });
  });
});
