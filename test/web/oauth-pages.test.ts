import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { digestToken } from '../../src/lib/crypto.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeUser } from '../support/factories.js';
import { WebClient } from '../support/web-client.js';

const PASSWORD = 'correct horse battery staple';
let app: TestApp;
let user: User;

beforeAll(async () => {
  app = await startTestApp();
  user = await makeUser(app, { password: PASSWORD });
});
afterAll(async () => {
  await app?.close();
});

const sessionCount = async (userId: number) =>
  (await app.deps.db.selectFrom('web_sessions').select('id').where('user_id', '=', userId).execute()).length;

describe('sign-in', () => {
  it('renders an accessible form with a CSRF token and a session cookie', async () => {
    const browser = new WebClient(app);
    const page = await browser.get('/users/sign_in');
    expect(page.status).toBe(200);
    expect(page.text).toContain('<label for="user_login">Username or primary email</label>');
    expect(page.text).toContain('<label for="user_password">Password</label>');
    expect(page.text).toMatch(/<input type="password" id="user_password" name="user\[password\]"/);
    expect(WebClient.csrf(page.text)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const cookie = page.headers.getSetCookie()[0] ?? '';
    expect(cookie).toMatch(/^depot_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=3600; HttpOnly; SameSite=Lax$/);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
  });

  it('signs in with username or email, rotating the session id; stores only its digest', async () => {
    for (const login of [user.username, user.email]) {
      const browser = new WebClient(app);
      const page = await browser.get('/users/sign_in');
      const anonymous = browser.cookie;
      const res = await browser.post('/users/sign_in', {
        authenticity_token: WebClient.csrf(page.text),
        'user[login]': login,
        'user[password]': PASSWORD,
      });
      expect(res.status).toBe(303);
      expect(res.location).toBe('/profile/applications');
      expect(browser.cookie).toBeTruthy();
      expect(browser.cookie).not.toBe(anonymous);
      const value = (browser.cookie as string).split('=')[1] as string;
      const row = await app.deps.db
        .selectFrom('web_sessions')
        .selectAll()
        .where('session_digest', '=', digestToken(value))
        .executeTakeFirstOrThrow();
      expect(row.user_id).toBe(user.id);
      const set = res.headers.getSetCookie()[0] ?? '';
      expect(set).toContain('HttpOnly');
      expect(set).toContain('SameSite=Lax');
      // session_expire_delay: a week by default, as GitLab.
      expect(set).toContain(`Max-Age=${7 * 24 * 3600}`);
      // The anonymous session is gone: its cookie no longer means anything.
      const old = await app.deps.db
        .selectFrom('web_sessions')
        .select('id')
        .where('session_digest', '=', digestToken((anonymous as string).split('=')[1] as string))
        .execute();
      expect(old).toHaveLength(0);
    }
  });

  it('refuses a wrong password, a missing CSRF token and two-factor users', async () => {
    const browser = new WebClient(app);
    const page = await browser.get('/users/sign_in');
    const csrf = WebClient.csrf(page.text);
    const wrong = await browser.post('/users/sign_in', {
      authenticity_token: csrf,
      'user[login]': user.username,
      'user[password]': 'nope',
    });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('Invalid login or password.');
    expect(wrong.text).toContain('role="alert"');
    const noCsrf = await browser.post('/users/sign_in', { 'user[login]': user.username, 'user[password]': PASSWORD });
    expect(noCsrf.status).toBe(422);
    expect(noCsrf.location).toBeNull();
    const twoFactor = await makeUser(app, { password: PASSWORD });
    await app.deps.db.updateTable('users').set({ two_factor_enabled: true }).where('id', '=', twoFactor.id).execute();
    const tf = await browser.post('/users/sign_in', {
      authenticity_token: csrf,
      'user[login]': twoFactor.username,
      'user[password]': PASSWORD,
    });
    expect(tf.status).toBe(401);
    expect(tf.text).toContain('two-factor authentication');
    expect(await sessionCount(twoFactor.id)).toBe(0);
  });

  it('limits password attempts per login name', async () => {
    const target = await makeUser(app, { password: PASSWORD });
    const browser = new WebClient(app);
    const csrf = WebClient.csrf((await browser.get('/users/sign_in')).text);
    for (let i = 0; i < 10; i++) {
      const res = await browser.post('/users/sign_in', {
        authenticity_token: csrf,
        'user[login]': target.username,
        'user[password]': `guess${i}`,
      });
      expect(res.status).toBe(401);
    }
    const limited = await browser.post('/users/sign_in', {
      authenticity_token: csrf,
      'user[login]': target.username,
      'user[password]': PASSWORD,
    });
    expect(limited.status).toBe(429);
    expect(limited.text).toContain('Too many sign-in attempts');
    expect(await sessionCount(target.id)).toBe(0);
  });

  it('signs out with a POST carrying the CSRF token, and the old cookie stops working', async () => {
    const browser = new WebClient(app);
    await browser.signIn(user.username, PASSWORD);
    const signedInCookie = browser.cookie;
    const csrf = await browser.csrfToken();
    const forged = await browser.post('/users/sign_out', { authenticity_token: 'forged' });
    expect(forged.status).toBe(422);
    expect((await browser.get('/profile/applications')).status).toBe(200);
    const out = await browser.post('/users/sign_out', { authenticity_token: csrf });
    expect(out.status).toBe(303);
    expect(out.location).toBe('/users/sign_in');
    expect(out.headers.getSetCookie()[0]).toMatch(/^depot_session=; .*Max-Age=0/);
    const replay = new WebClient(app);
    replay.cookie = signedInCookie;
    const res = await replay.get('/profile/applications');
    expect(res.status).toBe(302);
    expect(res.location).toBe('/users/sign_in');
  });
});

describe('over https', () => {
  it('names the cookie __Host-depot_session and marks it Secure', async () => {
    const secure = await startTestApp({ env: { BASE_URL: 'https://depot.example' } });
    try {
      // BASE_URL is only the external name: talk to the listening port directly.
      const res = await fetch(`http://127.0.0.1:${secure.deps.config.port}/users/sign_in`);
      expect(res.status).toBe(200);
      expect(res.headers.getSetCookie()[0]).toMatch(
        /^__Host-depot_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=3600; HttpOnly; SameSite=Lax; Secure$/,
      );
    } finally {
      await secure.close();
    }
  });
});

describe('/profile/applications', () => {
  it('sends anonymous browsers to sign in and back', async () => {
    const browser = new WebClient(app);
    const res = await browser.get('/profile/applications');
    expect(res.status).toBe(302);
    expect(res.location).toBe('/users/sign_in');
    const signedIn = await browser.signIn(user.username, PASSWORD);
    expect(signedIn.location).toBe('/profile/applications');
  });

  it('registers an application, shows its secret once, lists and deletes it', async () => {
    const browser = new WebClient(app);
    await browser.signIn(user.username, PASSWORD);
    const page = await browser.get('/profile/applications');
    expect(page.text).toContain('<legend>Scopes</legend>');
    for (const scope of [
      'api',
      'read_api',
      'read_user',
      'read_repository',
      'write_repository',
      'profile',
      'openid',
      'email',
    ]) {
      expect(page.text).toContain(`name="scopes" value="${scope}"`);
    }
    const csrf = WebClient.csrf(page.text);
    const created = await browser.post('/profile/applications', {
      authenticity_token: csrf,
      name: 'My tool',
      redirect_uri: 'https://tool.example/cb\r\nhttp://127.0.0.1:8000/cb',
      scopes: ['read_user', 'read_api'],
      confidential: ['0', '1'],
    });
    expect(created.status).toBe(201);
    const secret = /id="created_secret">(gloas-[A-Za-z0-9_-]+)</.exec(created.text)?.[1];
    const uid = /id="created_uid">([0-9a-f]{64})</.exec(created.text)?.[1];
    expect(secret).toBeTruthy();
    expect(uid).toBeTruthy();
    expect(created.text).toContain('this is the only time Depot shows it');
    const row = await app.deps.db
      .selectFrom('oauth_applications')
      .selectAll()
      .where('uid', '=', uid as string)
      .executeTakeFirstOrThrow();
    expect(row.owner_id).toBe(user.id);
    expect(row.scopes).toEqual(['read_user', 'read_api']);
    expect(row.redirect_uri).toBe('https://tool.example/cb\nhttp://127.0.0.1:8000/cb');
    expect(row.confidential).toBe(true);
    expect(row.secret_digest).toBe(digestToken(secret as string));

    const list = await browser.get('/profile/applications');
    expect(list.text).toContain('My tool');
    expect(list.text).toContain(uid as string);
    expect(list.text).not.toContain(secret as string);

    // Someone else can neither see nor delete it.
    const stranger = await makeUser(app, { password: PASSWORD });
    const strangerBrowser = new WebClient(app);
    await strangerBrowser.signIn(stranger.username, PASSWORD);
    expect((await strangerBrowser.get('/profile/applications')).text).not.toContain(uid as string);
    const theirs = await strangerBrowser.post(`/profile/applications/${row.id}/delete`, {
      authenticity_token: await strangerBrowser.csrfToken(),
    });
    expect(theirs.status).toBe(404);
    expect(
      (await browser.post(`/profile/applications/${row.id}/delete`, { authenticity_token: 'forged' })).status,
    ).toBe(422);

    const deleted = await browser.post(`/profile/applications/${row.id}/delete`, { authenticity_token: csrf });
    expect(deleted.status).toBe(303);
    expect(deleted.location).toBe('/profile/applications');
    const gone = await app.deps.db.selectFrom('oauth_applications').select('id').where('id', '=', row.id).execute();
    expect(gone).toHaveLength(0);
  });

  it('refuses forbidden redirect URIs, unknown scopes and forms without the CSRF token', async () => {
    const browser = new WebClient(app);
    await browser.signIn(user.username, PASSWORD);
    const csrf = await browser.csrfToken();
    const before = (await app.deps.db.selectFrom('oauth_applications').select('id').execute()).length;
    const evil = await browser.post('/profile/applications', {
      authenticity_token: csrf,
      name: 'Evil',
      redirect_uri: 'javascript:alert(document.cookie)',
      scopes: 'api',
    });
    expect(evil.status).toBe(400);
    expect(evil.text).toContain('Redirect URI is forbidden by the server.');
    expect(evil.text).toContain('value="Evil"');
    const badScope = await browser.post('/profile/applications', {
      authenticity_token: csrf,
      name: 'Odd',
      redirect_uri: 'https://odd.example/cb',
      scopes: 'sudo',
    });
    expect(badScope.status).toBe(400);
    expect(badScope.text).toContain('Scopes doesn&#39;t match configured on the server.');
    const forged = await browser.post('/profile/applications', {
      name: 'Forged',
      redirect_uri: 'https://forged.example/cb',
      scopes: 'api',
    });
    expect(forged.status).toBe(422);
    expect((await app.deps.db.selectFrom('oauth_applications').select('id').execute()).length).toBe(before);
  });
});
