import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUser, putSettings, resetSettings } from '../support/factories.js';
import { WebClient } from '../support/web-client.js';

// The application settings that govern the web pages, each changed by an administrator's PUT and
// seen by the next request.

const PASSWORD = 'correct horse battery staple';
let app: TestApp;
let user: User;
let admin: User;
let adminToken: string;

beforeAll(async () => {
  app = await startTestApp();
  user = await makeUser(app, { password: PASSWORD });
  admin = await makeAdmin(app, { password: PASSWORD });
  adminToken = await makeToken(app, admin);
});
afterAll(async () => {
  await app?.close();
});
beforeEach(async () => {
  await resetSettings(app);
});

const put = (body: Record<string, unknown>) => putSettings(app, adminToken, body);

async function signedIn(who: User): Promise<WebClient> {
  const browser = new WebClient(app);
  expect((await browser.signIn(who.username, PASSWORD)).status).toBe(303);
  return browser;
}

describe('password_authentication_enabled_for_web', () => {
  it('off: the sign-in page has no password form and a password sign-in is 403', async () => {
    const browser = new WebClient(app);
    const csrf = WebClient.csrf((await browser.get('/users/sign_in')).text);
    await put({ password_authentication_enabled_for_web: false });
    const page = await browser.get('/users/sign_in');
    expect(page.status).toBe(200);
    expect(page.text).not.toContain('name="user[password]"');
    expect(page.text).toContain('No authentication methods configured.');
    expect(page.text).not.toContain('/users/sign_up');
    const res = await browser.post('/users/sign_in', {
      authenticity_token: csrf,
      'user[login]': user.username,
      'user[password]': PASSWORD,
    });
    expect(res.status).toBe(403);
    expect(res.text).toContain('Password sign-in is turned off on this instance.');
    expect((await browser.get('/profile/applications')).status).toBe(302);

    await put({ password_authentication_enabled_for_web: true });
    expect((await browser.signIn(user.username, PASSWORD)).status).toBe(303);
  });
});

describe('user_oauth_applications', () => {
  const form = (csrf: string) => ({
    authenticity_token: csrf,
    name: 'Tool',
    redirect_uri: 'https://tool.example.com/cb',
    scopes: 'read_user',
    confidential: '1',
  });

  it('off: users see their list without the form and cannot add or delete; admins still can', async () => {
    const browser = await signedIn(user);
    const csrf = await browser.csrfToken();
    expect((await browser.post('/profile/applications', form(csrf))).status).toBe(201);
    const [own] = await app.deps.db
      .selectFrom('oauth_applications')
      .select('id')
      .where('owner_id', '=', user.id)
      .execute();

    await put({ user_oauth_applications: false });
    const page = await browser.get('/profile/applications');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Tool');
    expect(page.text).toContain('Registering OAuth applications is turned off by your administrator.');
    expect(page.text).not.toContain('Add a new application');
    expect((await browser.post('/profile/applications', form(csrf))).status).toBe(403);
    expect((await browser.post(`/profile/applications/${own!.id}/delete`, { authenticity_token: csrf })).status).toBe(
      403,
    );
    const count = await app.deps.db
      .selectFrom('oauth_applications')
      .select('id')
      .where('owner_id', '=', user.id)
      .execute();
    expect(count).toHaveLength(1);

    const adminBrowser = await signedIn(admin);
    const adminPage = await adminBrowser.get('/profile/applications');
    expect(adminPage.text).toContain('Add a new application');
    expect((await adminBrowser.post('/profile/applications', form(await adminBrowser.csrfToken()))).status).toBe(201);
  });
});

describe('session_expire_delay', () => {
  it('sets the cookie lifetime and ends sessions older than the delay, also after a change', async () => {
    await put({ session_expire_delay: 30 });
    const browser = new WebClient(app);
    const page = await browser.get('/users/sign_in');
    const res = await browser.post('/users/sign_in', {
      authenticity_token: WebClient.csrf(page.text),
      'user[login]': user.username,
      'user[password]': PASSWORD,
    });
    expect(res.headers.getSetCookie()[0]).toContain(`Max-Age=${30 * 60}`);
    app.clock.advance(29 * 60 * 1000);
    expect((await browser.get('/profile/applications')).status).toBe(200);
    app.clock.advance(2 * 60 * 1000);
    expect((await browser.get('/profile/applications')).status).toBe(302);

    // A session signed in under a long delay ends when an administrator shortens it.
    await put({ session_expire_delay: 10080 });
    const later = await signedIn(user);
    app.clock.advance(60 * 60 * 1000);
    expect((await later.get('/profile/applications')).status).toBe(200);
    await put({ session_expire_delay: 30 });
    expect((await later.get('/profile/applications')).status).toBe(302);
  });

  it("defaults to GitLab's week", async () => {
    const browser = new WebClient(app);
    const page = await browser.get('/users/sign_in');
    const res = await browser.post('/users/sign_in', {
      authenticity_token: WebClient.csrf(page.text),
      'user[login]': user.username,
      'user[password]': PASSWORD,
    });
    expect(res.headers.getSetCookie()[0]).toContain(`Max-Age=${10080 * 60}`);
  });
});

describe('home_page_url, after_sign_out_path and sign_in_text', () => {
  it('sends signed-out visitors of / to home_page_url, else to sign-in; signed-in ones to their page', async () => {
    const anonymous = new WebClient(app);
    expect((await anonymous.get('/')).location).toBe('/users/sign_in');
    await put({ home_page_url: 'https://www.example.com/welcome' });
    const res = await anonymous.get('/');
    expect(res.status).toBe(302);
    expect(res.location).toBe('https://www.example.com/welcome');
    expect((await (await signedIn(user)).get('/')).location).toBe('/profile/applications');
  });

  it('redirects to after_sign_out_path after signing out', async () => {
    const browser = await signedIn(user);
    await put({ after_sign_out_path: 'https://www.example.com/bye' });
    const out = await browser.post('/users/sign_out', { authenticity_token: await browser.csrfToken() });
    expect(out.status).toBe(303);
    expect(out.location).toBe('https://www.example.com/bye');
    await put({ after_sign_out_path: '' });
    const again = await signedIn(user);
    expect((await again.post('/users/sign_out', { authenticity_token: await again.csrfToken() })).location).toBe(
      '/users/sign_in',
    );
  });

  it('shows sign_in_text on the sign-in page, escaped', async () => {
    await put({ sign_in_text: 'Welcome to <b>Depot</b>.\n\nAsk IT for an account.' });
    const page = await new WebClient(app).get('/users/sign_in');
    expect(page.text).toContain('<p>Welcome to &#60;b&#62;Depot&#60;/b&#62;.</p>');
    expect(page.text).toContain('<p>Ask IT for an account.</p>');
  });
});
