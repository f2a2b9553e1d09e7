import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as oauth from 'oauth4webapi';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUser } from '../support/factories.js';
import { CHROMIUM, CHROMIUM_PATH, lacks } from '../support/programs.js';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const PASSWORD = 'correct horse battery staple';

let app: TestApp;
let user: User;
let adminToken: string;
let callbackServer: http.Server;
let callbackBase: string;
let userDataDir: string;
let context: BrowserContext;

beforeAll(async () => {
  app = await startTestApp();
  user = await makeUser(app, { password: PASSWORD, name: 'Ada Lovelace' });
  adminToken = await makeToken(app, await makeAdmin(app));
  // The client's redirect target: a page of its own that just says the sign-in went through.
  callbackServer = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>Client</title><p id="done">Signed in through Depot</p>');
  });
  await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
  callbackBase = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}`;
  userDataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-chromium-'));
  // A fresh profile, and no JavaScript at all: the pages must work as plain HTML forms.
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM_PATH,
    args: CHROMIUM_ARGS,
    headless: true,
    javaScriptEnabled: false,
    viewport: { width: 900, height: 760 },
  });
}, 120_000);

afterAll(async () => {
  await context?.close();
  await new Promise<void>((resolve) => (callbackServer ? callbackServer.close(() => resolve()) : resolve()));
  await app?.close();
  if (userDataDir) await fs.rm(userDataDir, { recursive: true, force: true });
});

describe.skipIf(lacks(CHROMIUM))('a real browser and a standard OAuth client library', () => {
  it('sign in, approve, follow the redirect; oauth4webapi exchanges the code (PKCE S256) and reads /api/v4/user', async () => {
    const redirectUri = `${callbackBase}/callback`;
    const registered = await app.request('/applications', {
      method: 'POST',
      token: adminToken,
      body: { name: 'Release Notes Bot', redirect_uri: redirectUri, scopes: 'read_user read_api' },
    });
    expect(registered.status).toBe(201);
    const client: oauth.Client = { client_id: registered.body.application_id };
    const clientAuth = oauth.ClientSecretBasic(registered.body.secret);
    const insecure = { [oauth.allowInsecureRequests]: true };

    // Discovery through RFC 8414 metadata.
    const issuer = new URL(app.baseUrl);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
    );
    expect(as.code_challenge_methods_supported).toEqual(['S256']);

    const verifier = oauth.generateRandomCodeVerifier();
    const challenge = await oauth.calculatePKCECodeChallenge(verifier);
    const state = oauth.generateRandomState();
    const authorizeUrl = new URL(as.authorization_endpoint as string);
    authorizeUrl.search = new URLSearchParams({
      client_id: client.client_id,
      redirect_uri: redirectUri,
      response_type: 'code',
      scope: 'read_user read_api',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state,
    }).toString();

    const page = await context.newPage();
    await page.goto(authorizeUrl.href);
    // Not signed in: the sign-in page, which returns to the authorization request.
    expect(new URL(page.url()).pathname).toBe('/users/sign_in');
    await page.getByLabel('Username or primary email').fill(user.username);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((url) => url.pathname === '/oauth/authorize');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe(
      'Authorize Release Notes Bot to use your account?',
    );
    expect(await page.locator('.scopes li').allInnerTexts()).toEqual([
      expect.stringContaining('read_user'),
      expect.stringContaining('read_api'),
    ]);
    if (process.env.OAUTH_SCREENSHOT) await page.screenshot({ path: process.env.OAUTH_SCREENSHOT, fullPage: true });

    await page.getByRole('button', { name: 'Authorize Release Notes Bot' }).click();
    await page.waitForURL((url) => url.href.startsWith(redirectUri));
    expect(await page.locator('#done').textContent()).toBe('Signed in through Depot');
    const callback = new URL(page.url());
    expect(callback.searchParams.get('state')).toBe(state);

    const params = oauth.validateAuthResponse(as, client, callback, state);
    const response = await oauth.authorizationCodeGrantRequest(
      as,
      client,
      clientAuth,
      params,
      redirectUri,
      verifier,
      insecure,
    );
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, response);
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.expires_in).toBe(7200);
    expect(tokens.scope).toBe('read_user read_api');

    const me = await oauth.protectedResourceRequest(
      tokens.access_token,
      'GET',
      new URL('/api/v4/user', app.baseUrl),
      undefined,
      undefined,
      insecure,
    );
    expect(me.status).toBe(200);
    const body = (await me.json()) as { username: string; name: string };
    expect(body.username).toBe(user.username);
    expect(body.name).toBe('Ada Lovelace');

    // The same library refreshes; the old access token stops working.
    const refreshed = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, clientAuth, tokens.refresh_token as string, insecure),
    );
    expect(refreshed.access_token).not.toBe(tokens.access_token);
    const old = await app.request('/user', { headers: { Authorization: `Bearer ${tokens.access_token}` } });
    expect(old.status).toBe(401);
    const fresh = await app.request('/user', { headers: { Authorization: `Bearer ${refreshed.access_token}` } });
    expect(fresh.body.username).toBe(user.username);

    // The same code a second time is refused by the library's error processing.
    const replay = await oauth.authorizationCodeGrantRequest(
      as,
      client,
      clientAuth,
      params,
      redirectUri,
      verifier,
      insecure,
    );
    await expect(oauth.processAuthorizationCodeResponse(as, client, replay)).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    await page.close();
  });

  it('Deny sends the browser back with access_denied and the state', async () => {
    const redirectUri = `${callbackBase}/denied`;
    const registered = await app.request('/applications', {
      method: 'POST',
      token: adminToken,
      body: { name: 'Curious App', redirect_uri: redirectUri, scopes: 'api' },
    });
    const page = await context.newPage();
    const query = new URLSearchParams({
      client_id: registered.body.application_id,
      redirect_uri: redirectUri,
      response_type: 'code',
      scope: 'api',
      state: 'deny-me',
    });
    await page.goto(`${app.baseUrl}/oauth/authorize?${query}`);
    // Still signed in from the first test: straight to the consent page.
    await page.getByRole('button', { name: 'Deny' }).click();
    await page.waitForURL((url) => url.href.startsWith(redirectUri));
    const back = new URL(page.url());
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('state')).toBe('deny-me');
    expect(back.searchParams.get('code')).toBeNull();
    await page.close();
  });
});
