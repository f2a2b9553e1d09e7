import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { addMember, makeAdmin, makeProject, makeToken, makeUser, ROLES } from '../support/factories.js';
import { CHROMIUM, CHROMIUM_PATH, lacks } from '../support/programs.js';

const run = promisify(execFile);
const PASSWORD = 'correct horse battery staple';

/**
 * Depot as the error tracking backend, end to end: a program using the real error SDK
 * (@sentry/node) reports an exception to the DSN of a client key, and a reporter of the project
 * sees it on the project's errors page in Chromium.
 */
const skipBrowser = lacks(CHROMIUM);

let app: TestApp;
let admin: User;
let adminToken: string;
let project: Project;
let reporter: User;
let dsn: string;
let userDataDir: string;
let context: BrowserContext | undefined;

beforeAll(async () => {
  app = await startTestApp();
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
  project = await makeProject(app, admin, { visibility: 'private', path: 'shop' });
  reporter = await makeUser(app, { password: PASSWORD });
  await addMember(app, { type: 'project', id: project.id }, reporter, ROLES.reporter);
  await app.request(`/projects/${project.id}/error_tracking/settings`, {
    method: 'PUT',
    token: adminToken,
    body: { active: true, integrated: true },
  });
  const key = await app.request(`/projects/${project.id}/error_tracking/client_keys`, {
    method: 'POST',
    token: adminToken,
  });
  dsn = (key.body as { sentry_dsn: string }).sentry_dsn;
  userDataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-chromium-'));
}, 60_000);

afterAll(async () => {
  await context?.close();
  await app?.close();
  if (userDataDir) await fs.rm(userDataDir, { recursive: true, force: true });
});

/** A small program that uses the error SDK as an application would. */
const SDK_PROGRAM = `
import * as Sentry from '@sentry/node';
Sentry.init({ dsn: process.env.DSN, environment: 'staging', release: 'shop@1.2.3', tracesSampleRate: 0 });
function checkoutCart(cart) {
  if (cart.length === 0) throw new TypeError('cart is empty');
}
// Two call sites: the SDK drops an event identical to the one before (its Dedupe integration).
try { checkoutCart([]); } catch (error) { Sentry.captureException(error); }
function retry() { checkoutCart([]); }
try { retry(); } catch (error) { Sentry.captureException(error); }
if (!(await Sentry.flush(15000))) process.exit(3);
`;

describe('an error SDK reporting to Depot', () => {
  it('@sentry/node sends an exception to the DSN; Depot groups both events into one error', async () => {
    await run(process.execPath, ['--input-type=module', '-e', SDK_PROGRAM], {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env: { ...process.env, DSN: dsn },
      timeout: 60_000,
    });
    const errors = await app.deps.db
      .selectFrom('error_tracking_errors')
      .selectAll()
      .where('project_id', '=', project.id)
      .execute();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({
      name: 'TypeError',
      description: 'cart is empty',
      platform: 'node',
      events_count: 2,
    });
    const [latest] = await app.deps.db
      .selectFrom('error_tracking_error_events')
      .selectAll()
      .where('error_id', '=', errors[0]?.id as number)
      .execute();
    expect(latest).toMatchObject({ environment: 'staging', level: 'error' });
    expect(JSON.stringify(latest?.payload)).toContain('checkoutCart');
  }, 90_000);

  it.skipIf(skipBrowser)(
    'the project’s errors page shows it to a reporter signed in with Chromium',
    async () => {
      context = await chromium.launchPersistentContext(userDataDir, {
        executablePath: CHROMIUM_PATH,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
        headless: true,
        javaScriptEnabled: false,
      });
      const page = await context.newPage();
      const errorsUrl = `${app.baseUrl}/${admin.username}/shop/-/error_tracking`;
      await page.goto(errorsUrl);
      expect(new URL(page.url()).pathname).toBe('/users/sign_in');
      await page.getByLabel('Username or primary email').fill(reporter.username);
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(errorsUrl);
      expect(await page.locator('.error-name').allTextContents()).toEqual(['TypeError']);
      expect(await page.locator('.error-description').allTextContents()).toEqual(['cart is empty']);
      expect(await page.locator('.error-count').allTextContents()).toEqual(['2']);
      const stack = await page.locator('ol.stack li').allTextContents();
      expect(stack[0]).toContain('checkoutCart');

      // Anonymous callers are sent to sign in; a signed-in user who is not a member gets a 404.
      const anonymous = await fetch(errorsUrl, { redirect: 'manual' });
      expect(anonymous.status).toBe(302);
      expect(anonymous.headers.get('location')).toMatch(/\/users\/sign_in$/);
      const outsider = await makeUser(app, { password: PASSWORD });
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.goto(`${app.baseUrl}/users/sign_in`);
      await page.getByLabel('Username or primary email').fill(outsider.username);
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      const denied = await page.goto(errorsUrl);
      expect(denied?.status()).toBe(404);
    },
    120_000,
  );
});
