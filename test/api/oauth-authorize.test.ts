import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUser } from '../support/factories.js';
import {
  authorizeParams,
  authorizePath,
  decide,
  type RegisteredApp,
  RFC7636_CHALLENGE,
  registerApp,
} from '../support/oauth.js';
import { WebClient } from '../support/web-client.js';

const PASSWORD = 'correct horse battery staple';
let app: TestApp;
let adminToken: string;
let user: User;
let browser: WebClient;
let client: RegisteredApp;
let publicClient: RegisteredApp;

beforeAll(async () => {
  app = await startTestApp();
  adminToken = await makeToken(app, await makeAdmin(app));
  user = await makeUser(app, { password: PASSWORD });
  browser = new WebClient(app);
  const signedIn = await browser.signIn(user.username, PASSWORD);
  expect(signedIn.status).toBe(303);
  client = await registerApp(app, adminToken, { name: 'Confidential client' });
  publicClient = await registerApp(app, adminToken, { confidential: false, redirectUri: 'https://spa.example/cb' });
});
afterAll(async () => {
  await app?.close();
});

const grantCount = async () => (await app.deps.db.selectFrom('oauth_access_grants').select('id').execute()).length;

/** The query of an error redirect, checked to go to the registered URI. */
function errorRedirectOf(location: string | null, base = client.redirectUri) {
  expect(location).toBeTruthy();
  const url = new URL(location as string);
  expect(`${url.origin}${url.pathname}`).toBe(base);
  return url.searchParams;
}

describe('requests that cannot go back to the client', () => {
  it('show an error page and never redirect when client_id or redirect_uri is bad', async () => {
    const registered = client.redirectUri;
    const cases: Record<string, string | undefined>[] = [
      { client_id: undefined },
      { client_id: 'no-such-client' },
      { redirect_uri: undefined },
      { redirect_uri: `${registered}/` },
      { redirect_uri: 'https://CLIENT.example/cb' },
      { redirect_uri: 'https://client.example/CB' },
      { redirect_uri: `${registered}?extra=1` },
      { redirect_uri: `${registered}#frag` },
      { redirect_uri: 'https://client.example@evil.example/cb' },
      { redirect_uri: 'https://client.example.evil.example/cb' },
      { redirect_uri: 'https://client.example/cb/../evil' },
      { redirect_uri: 'https://client.example/cb%2F..%2Fevil' },
      { redirect_uri: 'http://client.example/cb' },
      { redirect_uri: 'javascript:alert(1)' },
    ];
    for (const extra of cases) {
      const res = await browser.get(authorizePath(authorizeParams(client, extra)));
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(res.location).toBeNull();
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.text).toContain('An error has occurred');
    }
    const unknown = await browser.get(authorizePath(authorizeParams(client, { client_id: 'no-such-client' })));
    expect(unknown.text).toContain('invalid_client');
    const badUri = await browser.get(
      authorizePath(authorizeParams(client, { redirect_uri: 'https://evil.example/cb' })),
    );
    expect(badUri.text).toContain('invalid_redirect_uri');
  });

  it('treats a repeated client_id or redirect_uri as fatal too', async () => {
    const query = `${new URLSearchParams(authorizeParams(client))}&redirect_uri=${encodeURIComponent(client.redirectUri)}`;
    const res = await browser.get(`/oauth/authorize?${query}`);
    expect(res.status).toBe(400);
    expect(res.location).toBeNull();
  });

  it('lets only the port of a loopback IP redirect URI vary (RFC 8252), not localhost', async () => {
    const native = await registerApp(app, adminToken, { redirectUri: 'http://127.0.0.1:4000/cb' });
    const otherPort = await browser.get(
      authorizePath(authorizeParams(native, { redirect_uri: 'http://127.0.0.1:51234/cb' })),
    );
    expect(otherPort.status).toBe(200);
    expect(otherPort.text).toContain('Authorize');
    const otherPath = await browser.get(
      authorizePath(authorizeParams(native, { redirect_uri: 'http://127.0.0.1:51234/other' })),
    );
    expect(otherPath.status).toBe(400);
    const local = await registerApp(app, adminToken, { redirectUri: 'http://localhost:4000/cb' });
    const localOther = await browser.get(
      authorizePath(authorizeParams(local, { redirect_uri: 'http://localhost:4001/cb' })),
    );
    expect(localOther.status).toBe(400);
    expect(localOther.location).toBeNull();
  });
});

describe('errors sent back to the client', () => {
  const cases: [string, Record<string, string | undefined>, string][] = [
    ['implicit grant', { response_type: 'token' }, 'unsupported_response_type'],
    ['code token', { response_type: 'code token' }, 'unsupported_response_type'],
    ['upper-case CODE', { response_type: 'CODE' }, 'unsupported_response_type'],
    ['missing response_type', { response_type: undefined }, 'invalid_request'],
    ['empty response_type', { response_type: '' }, 'invalid_request'],
    ['unknown scope', { scope: 'api nonsense' }, 'invalid_scope'],
    ['scope not registered for the app', { scope: 'write_repository' }, 'invalid_scope'],
    ['api%2Bread_user', { scope: 'api+read_user' }, 'invalid_scope'],
    ['challenge without method (plain)', { code_challenge: RFC7636_CHALLENGE }, 'invalid_request'],
    ['lower-case s256', { code_challenge: RFC7636_CHALLENGE, code_challenge_method: 's256' }, 'invalid_request'],
    ['plain', { code_challenge: RFC7636_CHALLENGE, code_challenge_method: 'plain' }, 'invalid_request'],
    ['method without challenge', { code_challenge_method: 'S256' }, 'invalid_request'],
    ['malformed challenge', { code_challenge: 'short', code_challenge_method: 'S256' }, 'invalid_request'],
  ];
  for (const [name, extra, error] of cases) {
    it(`${name} → ${error}, with the exact state and iss`, async () => {
      const before = await grantCount();
      const res = await browser.get(authorizePath(authorizeParams(client, extra)));
      expect(res.status).toBe(302);
      const query = errorRedirectOf(res.location);
      expect(query.get('error')).toBe(error);
      expect(query.get('error_description')).toBeTruthy();
      expect(query.get('state')).toBe('xyz-state');
      expect(query.get('iss')).toBe(app.baseUrl);
      expect(query.get('code')).toBeNull();
      expect(await grantCount()).toBe(before);
    });
  }

  it('scope written api+read_user in the URL means two scopes', async () => {
    const res = await browser.get(
      `/oauth/authorize?client_id=${client.clientId}&redirect_uri=${encodeURIComponent(client.redirectUri)}` +
        '&response_type=code&scope=api+read_user&state=s',
    );
    expect(res.status).toBe(200);
    expect(res.text).toContain('<strong>read_user</strong>');
  });

  it('a repeated parameter is invalid_request', async () => {
    const res = await browser.get(`${authorizePath(authorizeParams(client))}&scope=read_user`);
    expect(res.status).toBe(302);
    expect(errorRedirectOf(res.location).get('error')).toBe('invalid_request');
  });

  it('public clients must use PKCE', async () => {
    const res = await browser.get(authorizePath(authorizeParams(publicClient)));
    expect(res.status).toBe(302);
    const query = errorRedirectOf(res.location, publicClient.redirectUri);
    expect(query.get('error')).toBe('invalid_request');
    expect(query.get('error_description')).toContain('PKCE');
  });

  it('keeps a long state with special characters byte for byte', async () => {
    const state = `${'a'.repeat(1500)} &=+/?#é%20"'<>`;
    const res = await decide(browser, authorizeParams(client, { state }), 'deny');
    expect(res.status).toBe(302);
    const query = errorRedirectOf(res.location);
    expect(query.get('error')).toBe('access_denied');
    expect(query.get('state')).toBe(state);
    const approved = await decide(browser, authorizeParams(client, { state }));
    expect(new URL(approved.location as string).searchParams.get('state')).toBe(state);
  });

  it('keeps the registered query of a redirect URI and adds to it', async () => {
    const withQuery = await registerApp(app, adminToken, { redirectUri: 'https://q.example/cb?tenant=7' });
    const res = await decide(browser, authorizeParams(withQuery));
    expect(res.status).toBe(302);
    expect(res.location).toMatch(/^https:\/\/q\.example\/cb\?tenant=7&code=[A-Za-z0-9_-]{43}&state=xyz-state&iss=/);
  });
});

describe('the consent page', () => {
  it('sends an anonymous browser to sign in, then back to the same request', async () => {
    const fresh = new WebClient(app);
    const path = authorizePath(authorizeParams(client, { scope: 'api read_user' }));
    const res = await fresh.get(path);
    expect(res.status).toBe(302);
    expect(res.location).toBe('/users/sign_in');
    const signedIn = await fresh.signIn(user.username, PASSWORD);
    expect(signedIn.status).toBe(303);
    expect(signedIn.location).toBe(path);
    const consent = await fresh.get(signedIn.location as string);
    expect(consent.status).toBe(200);
    expect(consent.text).toContain('Confidential client');
  });

  it('shows the application, the scopes and Authorize/Deny in a form with a CSRF token, and no script', async () => {
    const res = await browser.get(authorizePath(authorizeParams(client, { scope: 'api read_user' })));
    expect(res.status).toBe(200);
    expect(res.text).toContain('Authorize <strong>Confidential client</strong> to use your account?');
    expect(res.text).toContain('<strong>api</strong>');
    expect(res.text).toContain('<strong>read_user</strong>');
    expect(res.text).toMatch(/<form method="post" action="\/oauth\/authorize">/);
    expect(res.text).toMatch(/name="authenticity_token" value="[A-Za-z0-9_-]{43}"/);
    expect(res.text).toContain('name="decision" value="approve"');
    expect(res.text).toContain('name="decision" value="deny"');
    expect(res.text).toContain('client.example');
    expect(res.text).not.toMatch(/<script|javascript:|\son[a-z]+=/i);
    expect(res.text).toMatch(/<html lang="en">/);
  });

  it('cannot be framed, leaks nothing through Referer and is not cached', async () => {
    const res = await browser.get(authorizePath(authorizeParams(client)));
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('escapes the application name', async () => {
    const evil = await registerApp(app, adminToken, { name: '<img src=x onerror=alert(1)>' });
    const res = await browser.get(authorizePath(authorizeParams(evil)));
    expect(res.text).not.toContain('<img src=x');
    expect(res.text).toContain('&#60;img src=x onerror=alert(1)&#62;');
  });

  it('refuses a decision without the session CSRF token: 422, no redirect, no code', async () => {
    const before = await grantCount();
    for (const token of [undefined, 'forged', `${await browser.csrfToken()}x`]) {
      const form: Record<string, string> = { ...authorizeParams(client), decision: 'approve' };
      if (token !== undefined) form.authenticity_token = token;
      const res = await browser.post('/oauth/authorize', form);
      expect(res.status).toBe(422);
      expect(res.location).toBeNull();
    }
    // Another browser's valid token is no good either.
    const other = new WebClient(app);
    await other.signIn(user.username, PASSWORD);
    const res = await browser.post('/oauth/authorize', {
      ...authorizeParams(client),
      decision: 'approve',
      authenticity_token: await other.csrfToken(),
    });
    expect(res.status).toBe(422);
    expect(await grantCount()).toBe(before);
  });

  it('Deny redirects with access_denied and the state', async () => {
    const res = await decide(browser, authorizeParams(client), 'deny');
    expect(res.status).toBe(302);
    const query = errorRedirectOf(res.location);
    expect(query.get('error')).toBe('access_denied');
    expect(query.get('error_description')).toBe('The resource owner or authorization server denied the request.');
    expect(query.get('state')).toBe('xyz-state');
  });

  it('Authorize redirects (302, never 307) with a code, the state and iss', async () => {
    const res = await decide(browser, authorizeParams(client));
    expect(res.status).toBe(302);
    const url = new URL(res.location as string);
    expect(`${url.origin}${url.pathname}`).toBe(client.redirectUri);
    expect(url.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(url.searchParams.get('state')).toBe('xyz-state');
    expect(url.searchParams.get('iss')).toBe(app.baseUrl);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
  });

  it('ignores unknown parameters (RFC 6749 §3.1)', async () => {
    const params = { ...authorizeParams(client), prompt: 'consent', nonce: 'n', foo: 'bar' };
    const page = await browser.get(authorizePath(params));
    expect(page.status).toBe(200);
    expect(page.text).toContain('Authorize <strong>Confidential client</strong>');
    const res = await decide(browser, params);
    expect(res.status).toBe(302);
    expect(new URL(res.location as string).searchParams.get('code')).toBeTruthy();
  });

  it('re-checks the request on POST: a tampered redirect_uri is refused without redirect', async () => {
    const res = await decide(browser, authorizeParams(client, { redirect_uri: 'https://evil.example/cb' }));
    expect(res.status).toBe(400);
    expect(res.location).toBeNull();
  });
});

describe('server metadata', () => {
  it('advertises S256 only and the endpoints', async () => {
    const res = await fetch(new URL('/.well-known/oauth-authorization-server', app.baseUrl));
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.issuer).toBe(app.baseUrl);
    expect(body.code_challenge_methods_supported).toEqual(['S256']);
    expect(body.response_types_supported).toEqual(['code']);
    expect(body.token_endpoint).toBe(`${app.baseUrl}/oauth/token`);
    expect(body.grant_types_supported).not.toContain('implicit');
  });
});
