import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { emailDomainMatches } from '../../src/services/sign-up.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, putSettings, resetSettings } from '../support/factories.js';
import { WebClient } from '../support/web-client.js';

// Self sign-up at /users/sign_up, governed by signup_enabled, the domain allowlist and denylist,
// and require_admin_approval_after_user_signup.

const PASSWORD = 'correct horse battery staple';
let app: TestApp;
let adminToken: string;
let counter = 0;

beforeAll(async () => {
  app = await startTestApp();
  adminToken = await makeToken(app, await makeAdmin(app));
});
afterAll(async () => {
  await app?.close();
});
beforeEach(async () => {
  await resetSettings(app);
});

const put = (body: Record<string, unknown>) => putSettings(app, adminToken, body);

/** Fills in and sends the sign-up form as a browser does. */
async function register(fields: { email?: string; username?: string; password?: string; first?: string } = {}) {
  counter += 1;
  const username = fields.username ?? `signup${process.pid}x${counter}`;
  const browser = new WebClient(app);
  const page = await browser.get('/users/sign_up');
  expect(page.status).toBe(200);
  const res = await browser.post('/users/sign_up', {
    authenticity_token: WebClient.csrf(page.text),
    'new_user[first_name]': fields.first ?? 'Grace',
    'new_user[last_name]': 'Hopper',
    'new_user[username]': username,
    'new_user[email]': fields.email ?? `${username}@example.com`,
    'new_user[password]': fields.password ?? PASSWORD,
  });
  const user = await app.deps.db.selectFrom('users').selectAll().where('username', '=', username).executeTakeFirst();
  return { browser, res, user, username };
}

describe('sign-up', () => {
  it('creates an active user, signs them in, and the sign-in page links to it', async () => {
    expect((await new WebClient(app).get('/users/sign_in')).text).toContain('href="/users/sign_up"');
    const { browser, res, user } = await register();
    expect(res.status).toBe(303);
    expect(res.location).toBe('/profile/applications');
    expect(user).toMatchObject({ name: 'Grace Hopper', state: 'active', admin: false });
    expect((await browser.get('/profile/applications')).status).toBe(200);
    // The new account signs in with its password.
    expect((await new WebClient(app).signIn(user!.username, PASSWORD)).status).toBe(303);
  });

  it('needs the CSRF token of the session', async () => {
    const browser = new WebClient(app);
    await browser.get('/users/sign_up');
    const res = await browser.post('/users/sign_up', {
      authenticity_token: 'forged',
      'new_user[first_name]': 'Eve',
      'new_user[last_name]': 'Forger',
      'new_user[username]': 'eveforger',
      'new_user[email]': 'eve@example.com',
      'new_user[password]': PASSWORD,
    });
    expect(res.status).toBe(422);
    expect(await app.deps.db.selectFrom('users').select('id').where('username', '=', 'eveforger').execute()).toEqual(
      [],
    );
  });

  it("answers GitLab's validation messages and keeps what was typed", async () => {
    const { res, user } = await register({ password: 'short', first: '' });
    expect(res.status).toBe(422);
    expect(user).toBeUndefined();
    expect(res.text).toContain('First name can&#39;t be blank');
    const second = await register({ password: 'short' });
    expect(second.res.text).toContain('Password is too short (minimum is 8 characters)');
    expect(second.res.text).toContain(`value="${second.username}"`);
    const taken = await register();
    const again = await register({ username: taken.username, email: `other${counter}@example.com` });
    expect(again.res.status).toBe(422);
    expect(again.res.text).toContain('Username has already been taken');
  });

  it('signup_enabled=false: the page and the form lead to sign-in, and nothing is created', async () => {
    const browser = new WebClient(app);
    const page = await browser.get('/users/sign_up');
    await put({ signup_enabled: false });
    expect((await browser.get('/users/sign_up')).location).toBe('/users/sign_in');
    expect((await browser.get('/users/sign_in')).text).not.toContain('/users/sign_up');
    const res = await browser.post('/users/sign_up', {
      authenticity_token: WebClient.csrf(page.text),
      'new_user[first_name]': 'Off',
      'new_user[last_name]': 'Line',
      'new_user[username]': 'offline',
      'new_user[email]': 'offline@example.com',
      'new_user[password]': PASSWORD,
    });
    expect(res.status).toBe(303);
    expect(res.location).toBe('/users/sign_in');
    expect(await app.deps.db.selectFrom('users').select('id').where('username', '=', 'offline').execute()).toEqual([]);
  });

  it('is off too while password authentication for the web is off (allow_signup?)', async () => {
    await put({ password_authentication_enabled_for_web: false });
    expect((await new WebClient(app).get('/users/sign_up')).location).toBe('/users/sign_in');
  });

  it('domain_allowlist admits only matching domains, with wildcards', async () => {
    await put({ domain_allowlist: ['example.com', '*.corp.example'] });
    expect((await register({ email: `a${counter}@Example.COM` })).user).toBeDefined();
    expect((await register({ email: `b${counter}@dev.corp.example` })).user).toBeDefined();
    const refused = await register({ email: `c${counter}@corp.example` });
    expect(refused.res.status).toBe(422);
    expect(refused.user).toBeUndefined();
    expect(refused.res.text).toContain('Email domain is not authorized for sign-up.');
    expect((await register({ email: `d${counter}@example.com.evil.test` })).user).toBeUndefined();
  });

  it('domain_denylist refuses matching domains only while enabled', async () => {
    await put({ domain_denylist_enabled: true, domain_denylist: ['spam.test', '*.throwaway.test'] });
    const refused = await register({ email: `e${counter}@mail.throwaway.test` });
    expect(refused.res.status).toBe(422);
    expect(refused.res.text).toContain('Email is not from an allowed domain.');
    expect((await register({ email: `f${counter}@spam.test` })).user).toBeUndefined();
    expect((await register({ email: `g${counter}@fine.test` })).user).toBeDefined();
    await put({ domain_denylist_enabled: false });
    expect((await register({ email: `h${counter}@spam.test` })).user).toBeDefined();
  });

  it('require_admin_approval_after_user_signup: the user waits, blocked_pending_approval, and cannot sign in', async () => {
    await put({ require_admin_approval_after_user_signup: true });
    const { res, user, browser } = await register();
    expect(res.status).toBe(200);
    expect(res.text).toContain('your account is awaiting approval from your GitLab administrator');
    expect(user?.state).toBe('blocked_pending_approval');
    expect((await browser.get('/profile/applications')).status).toBe(302);
    expect((await new WebClient(app).signIn(user!.username, PASSWORD)).status).toBe(401);
    const listed = await app.request(`/users/${user!.id}`, { token: adminToken });
    expect(listed.body.state).toBe('blocked_pending_approval');
  });
});

describe('emailDomainMatches', () => {
  it("matches whole domains, case-insensitively, with * as GitLab's wildcard", () => {
    expect(emailDomainMatches(['example.com'], 'a@EXAMPLE.com')).toBe(true);
    expect(emailDomainMatches(['example.com'], 'a@sub.example.com')).toBe(false);
    expect(emailDomainMatches(['*.example.com'], 'a@sub.example.com')).toBe(true);
    expect(emailDomainMatches(['ex*.com'], 'a@exabc.com')).toBe(true);
    expect(emailDomainMatches(['example.com'], 'a@exampleXcom')).toBe(false);
    expect(emailDomainMatches(['example.com'], '"x@example.com"@evil.test')).toBe(false);
  });
});
