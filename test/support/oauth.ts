import { expect } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { s256CodeChallenge } from '../../src/lib/pkce.js';
import { startTestApp, type TestApp } from './app.js';
import { makeAdmin, makeToken, makeUser } from './factories.js';
import { WebClient, type WebResponse } from './web-client.js';

export const REDIRECT_URI = 'https://client.example/cb';
/** RFC 7636 Appendix B. */
export const RFC7636_VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
export const RFC7636_CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

export interface RegisteredApp {
  id: number;
  clientId: string;
  secret: string;
  redirectUri: string;
}

/** Registers an application through the admin API. */
export async function registerApp(
  app: TestApp,
  adminToken: string,
  options: { confidential?: boolean; scopes?: string; redirectUri?: string; name?: string } = {},
): Promise<RegisteredApp> {
  const redirectUri = options.redirectUri ?? REDIRECT_URI;
  const res = await app.request('/applications', {
    method: 'POST',
    token: adminToken,
    body: {
      name: options.name ?? 'Test client',
      redirect_uri: redirectUri,
      scopes: options.scopes ?? 'api read_user',
      confidential: options.confidential ?? true,
    },
  });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id, clientId: res.body.application_id, secret: res.body.secret, redirectUri };
}

/** The query of an authorization request; `extra` values of `undefined` drop a parameter. */
export function authorizeParams(
  client: RegisteredApp,
  extra: Record<string, string | undefined> = {},
): Record<string, string> {
  const all: Record<string, string | undefined> = {
    client_id: client.clientId,
    redirect_uri: client.redirectUri,
    response_type: 'code',
    scope: 'api',
    state: 'xyz-state',
    ...extra,
  };
  return Object.fromEntries(Object.entries(all).filter((e): e is [string, string] => e[1] !== undefined));
}

export const authorizePath = (params: Record<string, string>) => `/oauth/authorize?${new URLSearchParams(params)}`;

/** Posts the consent form (as the page's Authorize or Deny button does). */
export async function decide(
  browser: WebClient,
  params: Record<string, string>,
  decision: 'approve' | 'deny' = 'approve',
): Promise<WebResponse> {
  const csrf = await browser.csrfToken();
  return browser.post('/oauth/authorize', { ...params, authenticity_token: csrf, decision });
}

/** Approves a request and returns the code from the redirect. */
export async function codeFor(
  browser: WebClient,
  client: RegisteredApp,
  options: { verifier?: string; scope?: string; redirectUri?: string } = {},
): Promise<string> {
  const params = authorizeParams(client, {
    scope: options.scope ?? 'api',
    redirect_uri: options.redirectUri ?? client.redirectUri,
    ...(options.verifier ? { code_challenge: s256CodeChallenge(options.verifier), code_challenge_method: 'S256' } : {}),
  });
  const res = await decide(browser, params);
  expect(res.status, res.text).toBe(302);
  const code = new URL(res.location as string).searchParams.get('code');
  expect(code).toBeTruthy();
  return code as string;
}

export interface TokenResponse {
  status: number;
  headers: Headers;
  body: any;
}

/** A form POST to an OAuth endpoint, optionally with HTTP Basic client credentials. */
export async function oauthPost(
  app: TestApp,
  path: string,
  form: Record<string, string>,
  options: { basic?: [string, string]; query?: string; headers?: Record<string, string> } = {},
): Promise<TokenResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.basic) {
    const [id, secret] = options.basic;
    headers.Authorization = `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
  }
  const url = new URL(path, app.baseUrl);
  if (options.query) url.search = options.query;
  const res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(form), redirect: 'manual' });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, headers: res.headers, body };
}

/** Exchanges a code at the token endpoint. */
export function exchange(
  app: TestApp,
  client: RegisteredApp,
  code: string,
  extra: Record<string, string> = {},
  options: { basic?: boolean } = {},
): Promise<TokenResponse> {
  const form: Record<string, string> = {
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirectUri,
    ...extra,
  };
  if (options.basic) return oauthPost(app, '/oauth/token', form, { basic: [client.clientId, client.secret] });
  return oauthPost(app, '/oauth/token', { client_id: client.clientId, client_secret: client.secret, ...form });
}

export interface OAuthWorld {
  app: TestApp;
  /** The clock's start, to reset it after tests that move time. */
  started: Date;
  adminToken: string;
  /** A user signed in through `browser` with `password`. */
  user: User;
  browser: WebClient;
  /** A confidential application with `clientScopes`. */
  client: RegisteredApp;
  /** A second confidential application, for cross-client checks. */
  other: RegisteredApp;
  /** A public (PKCE-only) application. */
  publicClient: RegisteredApp;
}

/** A fresh app with a signed-in user and three registered applications. */
export async function startOAuthWorld(password: string, clientScopes: string): Promise<OAuthWorld> {
  const app = await startTestApp();
  const started = app.clock.now();
  const adminToken = await makeToken(app, await makeAdmin(app));
  const user = await makeUser(app, { password });
  const browser = new WebClient(app);
  expect((await browser.signIn(user.username, password)).status).toBe(303);
  const client = await registerApp(app, adminToken, { scopes: clientScopes });
  const other = await registerApp(app, adminToken, { name: 'Other client' });
  const publicClient = await registerApp(app, adminToken, {
    confidential: false,
    redirectUri: 'https://spa.example/cb',
  });
  return { app, started, adminToken, user, browser, client, other, publicClient };
}
