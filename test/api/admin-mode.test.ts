import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeProject, makeToken, makeUser } from '../support/factories.js';
import { WebClient } from '../support/web-client.js';

// GitLab's admin mode (application setting `admin_mode`): while on, an administrator's token acts
// as administrator only with the `admin_mode` scope; without it the administrator is a regular
// user for that request.

const PASSWORD = 'correct horse battery staple';
let app: TestApp;
let admin: User;
let other: User;
let plainToken: string;
let modeToken: string;
let sudoToken: string;
let sudoModeToken: string;

beforeAll(async () => {
  app = await startTestApp();
  admin = await makeAdmin(app, { password: PASSWORD });
  other = await makeUser(app);
  plainToken = await makeToken(app, admin, ['api']);
  modeToken = await makeToken(app, admin, ['api', 'admin_mode']);
  sudoToken = await makeToken(app, admin, ['api', 'sudo']);
  sudoModeToken = await makeToken(app, admin, ['api', 'sudo', 'admin_mode']);
});
afterAll(async () => {
  await app?.close();
});
beforeEach(async () => {
  await app.deps.db.deleteFrom('application_settings').where('key', '<>', 'instance').execute();
});

async function setAdminMode(on: boolean) {
  const res = await app.request('/application/settings', { method: 'PUT', token: modeToken, body: { admin_mode: on } });
  expect(res.status, res.text).toBe(200);
}

describe('admin_mode', () => {
  it('off (the default): every administrator token acts as administrator', async () => {
    expect((await app.request('/application/settings', { token: plainToken })).status).toBe(200);
    expect((await app.request('/user', { token: plainToken })).body.is_admin).toBe(true);
  });

  it('on: a token without the admin_mode scope is a regular user; with it, an administrator', async () => {
    await setAdminMode(true);
    expect(await app.request('/application/settings', { token: plainToken })).toMatchObject({
      status: 403,
      body: { message: '403 Forbidden' },
    });
    const me = await app.request('/user', { token: plainToken });
    expect(me.status).toBe(200);
    expect(me.body.id).toBe(admin.id);
    expect(me.body.is_admin).toBeUndefined();
    expect((await app.request('/application/settings', { token: modeToken })).status).toBe(200);
    expect((await app.request('/user', { token: modeToken })).body.is_admin).toBe(true);
  });

  it("on: another user's private project is invisible without the scope", async () => {
    const project = await makeProject(app, other, { visibility: 'private' });
    expect((await app.request(`/projects/${project.id}`, { token: plainToken })).status).toBe(200);
    await setAdminMode(true);
    expect((await app.request(`/projects/${project.id}`, { token: plainToken })).status).toBe(404);
    expect((await app.request(`/projects/${project.id}`, { token: modeToken })).status).toBe(200);
  });

  it('on: sudo needs admin mode too', async () => {
    await setAdminMode(true);
    expect(await app.request('/user', { token: sudoToken, headers: { Sudo: other.username } })).toMatchObject({
      status: 403,
      body: { message: '403 Forbidden - Must be admin to use sudo' },
    });
    const as = await app.request('/user', { token: sudoModeToken, headers: { Sudo: other.username } });
    expect(as.status).toBe(200);
    expect(as.body.id).toBe(other.id);
  });

  it('takes effect at once in both directions', async () => {
    await setAdminMode(true);
    expect((await app.request('/application/settings', { token: plainToken })).status).toBe(403);
    await setAdminMode(false);
    expect((await app.request('/application/settings', { token: plainToken })).status).toBe(200);
  });

  it('on: the web pages treat administrators as regular users (Depot offers no admin-mode sign-in yet)', async () => {
    const browser = new WebClient(app);
    expect((await browser.signIn(admin.username, PASSWORD)).status).toBe(303);
    const res = await app.request('/application/settings', {
      method: 'PUT',
      token: modeToken,
      body: { admin_mode: true, user_oauth_applications: false },
    });
    expect(res.status).toBe(200);
    const page = await browser.get('/profile/applications');
    expect(page.text).toContain('Registering OAuth applications is turned off by your administrator.');
  });
});
