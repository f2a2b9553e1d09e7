import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { digestToken } from '../../src/lib/crypto.js';
import { s256CodeChallenge } from '../../src/lib/pkce.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUser } from '../support/factories.js';
import {
  codeFor,
  exchange,
  oauthPost,
  type RegisteredApp,
  RFC7636_CHALLENGE,
  RFC7636_VERIFIER,
  registerApp,
  startOAuthWorld,
  type TokenResponse,
} from '../support/oauth.js';
import type { WebClient } from '../support/web-client.js';

const PASSWORD = 'correct horse battery staple';
const INVALID_GRANT =
  'The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.';
const INVALID_CLIENT =
  'Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method.';
const VERIFIER = 'ks02i3jdikdo2k0dkfodf3m39rjfjsdk0wk349rj3jrhf';

let app: TestApp;
let started: Date;
let adminToken: string;
let user: User;
let browser: WebClient;
let client: RegisteredApp;
let other: RegisteredApp;
let publicClient: RegisteredApp;

beforeAll(async () => {
  ({ app, started, adminToken, user, browser, client, other, publicClient } = await startOAuthWorld(
    PASSWORD,
    'api read_user read_api',
  ));
});
afterEach(() => {
  app.clock.set(started);
});
afterAll(async () => {
  await app?.close();
});

function expectError(res: TokenResponse, status: number, error: string, description?: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.error).toBe(error);
  if (description) expect(res.body.error_description).toBe(description);
  expect(Object.keys(res.body).sort()).toEqual(['error', 'error_description']);
  expect(res.headers.get('cache-control')).toContain('no-store');
  // RFC 6749 §5.2: a challenge with 401 (invalid_client, unauthorized_client), none with 400.
  if (status === 401) expect(res.headers.get('www-authenticate')).toMatch(/^(Basic|Bearer) realm="Depot"/);
  else expect(res.headers.get('www-authenticate')).toBeNull();
}

const me = (token: string) => app.request('/user', { headers: { Authorization: `Bearer ${token}` } });

describe('PKCE (RFC 7636)', () => {
  it('computes the Appendix B and GitLab documentation vectors', () => {
    expect(s256CodeChallenge(RFC7636_VERIFIER)).toBe(RFC7636_CHALLENGE);
    expect(s256CodeChallenge(VERIFIER)).toBe('2i0WFA-0AerkjQm4X4oDEhqA17QIAKNjXpagHBXmO_U');
  });

  it('a public client completes the flow with the Appendix B verifier and no secret', async () => {
    const code = await codeFor(browser, publicClient, { verifier: RFC7636_VERIFIER });
    const grant = await app.deps.db
      .selectFrom('oauth_access_grants')
      .selectAll()
      .where('code_digest', '=', digestToken(code))
      .executeTakeFirstOrThrow();
    expect(grant.code_challenge).toBe(RFC7636_CHALLENGE);
    const res = await oauthPost(app, '/oauth/token', {
      grant_type: 'authorization_code',
      client_id: publicClient.clientId,
      code,
      redirect_uri: publicClient.redirectUri,
      code_verifier: RFC7636_VERIFIER,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('pragma')).toBe('no-cache');
    expect(res.body).toEqual({
      access_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      token_type: 'Bearer',
      expires_in: 7200,
      refresh_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      scope: 'api',
      created_at: Math.floor(app.clock.now().getTime() / 1000),
    });
    const who = await me(res.body.access_token);
    expect(who.status).toBe(200);
    expect(who.body.username).toBe(user.username);
  });

  it('a public client without a verifier gets invalid_request; a wrong verifier invalid_grant', async () => {
    const code = await codeFor(browser, publicClient, { verifier: VERIFIER });
    const base = {
      grant_type: 'authorization_code',
      client_id: publicClient.clientId,
      code,
      redirect_uri: publicClient.redirectUri,
    };
    expectError(
      await oauthPost(app, '/oauth/token', base),
      400,
      'invalid_request',
      'Missing required parameter: code_verifier.',
    );
    for (const wrong of [RFC7636_VERIFIER, VERIFIER.slice(0, 42), `${VERIFIER}+/=`, `${VERIFIER} `, 'x'.repeat(129)]) {
      expectError(
        await oauthPost(app, '/oauth/token', { ...base, code_verifier: wrong }),
        400,
        'invalid_grant',
        INVALID_GRANT,
      );
    }
    // The right verifier with the wrong redirect URI is still refused.
    expectError(
      await oauthPost(app, '/oauth/token', {
        ...base,
        redirect_uri: 'https://spa.example/other',
        code_verifier: VERIFIER,
      }),
      400,
      'invalid_grant',
    );
    // None of the failures used the code up.
    const ok = await oauthPost(app, '/oauth/token', { ...base, code_verifier: VERIFIER });
    expect(ok.status).toBe(200);
  });

  it('a verifier for a code issued without a challenge is refused (downgrade)', async () => {
    const code = await codeFor(browser, client);
    expectError(await exchange(app, client, code, { code_verifier: VERIFIER }), 400, 'invalid_grant', INVALID_GRANT);
  });

  it('a confidential client may combine PKCE with its secret (Basic, form-encoded)', async () => {
    const code = await codeFor(browser, client, { verifier: VERIFIER });
    const encoded = (v: string) => encodeURIComponent(v).replace(/-/g, '%2D').replace(/_/g, '%5F');
    const res = await oauthPost(
      app,
      '/oauth/token',
      { grant_type: 'authorization_code', code, redirect_uri: client.redirectUri, code_verifier: VERIFIER },
      { basic: [encoded(client.clientId), encoded(client.secret)] },
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });
});

describe('authorization code with a client secret', () => {
  it('exchanges a code for tokens (secret in the body) and stores only digests', async () => {
    const code = await codeFor(browser, client, { scope: 'api read_user' });
    const res = await exchange(app, client, code);
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe('api read_user');
    const row = await app.deps.db
      .selectFrom('oauth_access_tokens')
      .selectAll()
      .where('token_digest', '=', digestToken(res.body.access_token))
      .executeTakeFirstOrThrow();
    expect(row.refresh_token_digest).toBe(digestToken(res.body.refresh_token));
    const everything = JSON.stringify([
      await app.deps.db.selectFrom('oauth_access_tokens').selectAll().execute(),
      await app.deps.db.selectFrom('oauth_access_grants').selectAll().execute(),
      await app.deps.db.selectFrom('oauth_applications').selectAll().execute(),
    ]);
    for (const secret of [res.body.access_token, res.body.refresh_token, code, client.secret]) {
      expect(everything).not.toContain(secret);
    }
  });

  it('answers RFC 6749 errors for bad client authentication (401 + WWW-Authenticate)', async () => {
    const code = await codeFor(browser, client);
    const form = { grant_type: 'authorization_code', code, redirect_uri: client.redirectUri };
    expectError(
      await oauthPost(app, '/oauth/token', { ...form, client_id: client.clientId, client_secret: `${client.secret}x` }),
      401,
      'invalid_client',
      INVALID_CLIENT,
    );
    expectError(await oauthPost(app, '/oauth/token', { ...form, client_id: client.clientId }), 401, 'invalid_client');
    expectError(
      await oauthPost(app, '/oauth/token', { ...form, client_id: 'nope', client_secret: 'x' }),
      401,
      'invalid_client',
    );
    expectError(await oauthPost(app, '/oauth/token', form), 401, 'invalid_client');
    const basic = await oauthPost(app, '/oauth/token', form, { basic: [client.clientId, 'wrong'] });
    expectError(basic, 401, 'invalid_client');
    expect(basic.headers.get('www-authenticate')).toBe('Basic realm="Depot"');
    // Two methods at once, and credentials in the URL, are refused.
    expectError(
      await oauthPost(
        app,
        '/oauth/token',
        { ...form, client_secret: client.secret },
        { basic: [client.clientId, client.secret] },
      ),
      400,
      'invalid_request',
      'The request utilizes more than one mechanism for authenticating the client.',
    );
    expectError(
      await oauthPost(app, '/oauth/token', form, {
        query: `client_id=${client.clientId}&client_secret=${encodeURIComponent(client.secret)}`,
      }),
      400,
      'invalid_request',
    );
    // The code survived every refusal.
    expect((await exchange(app, client, code)).status).toBe(200);
  });

  it('answers invalid_request and unsupported_grant_type with Doorkeeper texts', async () => {
    const creds = { client_id: client.clientId, client_secret: client.secret };
    expectError(
      await oauthPost(app, '/oauth/token', creds),
      400,
      'invalid_request',
      'Missing required parameter: grant_type.',
    );
    for (const grant of ['implicit', 'client_credentials', 'token', 'urn:ietf:params:oauth:grant-type:device_code']) {
      expectError(
        await oauthPost(app, '/oauth/token', { ...creds, grant_type: grant }),
        400,
        'unsupported_grant_type',
        'The authorization grant type is not supported by the authorization server.',
      );
    }
    const code = await codeFor(browser, client);
    expectError(
      await oauthPost(app, '/oauth/token', { ...creds, grant_type: 'authorization_code', code }),
      400,
      'invalid_request',
      'Missing required parameter: redirect_uri.',
    );
    // The code in the URL query is not read.
    expectError(
      await oauthPost(
        app,
        '/oauth/token',
        { ...creds, grant_type: 'authorization_code', redirect_uri: client.redirectUri },
        { query: `code=${code}` },
      ),
      400,
      'invalid_request',
      'Missing required parameter: code.',
    );
    // A repeated parameter is invalid.
    const res = await fetch(new URL('/oauth/token', app.baseUrl), {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: `${new URLSearchParams({ ...creds, grant_type: 'authorization_code', code, redirect_uri: client.redirectUri })}&code=${code}`,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
  });

  it('binds the code to its client and redirect URI', async () => {
    const code = await codeFor(browser, client);
    expectError(await exchange(app, other, code), 400, 'invalid_grant', INVALID_GRANT);
    expectError(
      await exchange(app, client, code, { redirect_uri: `${client.redirectUri}/` }),
      400,
      'invalid_grant',
      INVALID_GRANT,
    );
    expectError(await exchange(app, client, 'not-a-code'), 400, 'invalid_grant');
    expect((await exchange(app, client, code)).status).toBe(200);
  });

  it('expires codes after 600 seconds', async () => {
    const fresh = await codeFor(browser, client);
    const stale = await codeFor(browser, client);
    app.clock.advance(599_000);
    expect((await exchange(app, client, fresh)).status).toBe(200);
    app.clock.advance(1_000);
    expectError(await exchange(app, client, stale), 400, 'invalid_grant', INVALID_GRANT);
  });

  it('a code used twice fails and revokes the tokens issued from it, refresh chain included', async () => {
    const code = await codeFor(browser, client);
    const first = await exchange(app, client, code);
    expect(first.status).toBe(200);
    expect((await me(first.body.access_token)).status).toBe(200);
    const refreshed = await oauthPost(app, '/oauth/token', {
      grant_type: 'refresh_token',
      refresh_token: first.body.refresh_token,
      client_id: client.clientId,
      client_secret: client.secret,
    });
    expect(refreshed.status).toBe(200);
    expectError(await exchange(app, client, code), 400, 'invalid_grant', INVALID_GRANT);
    const revoked = await me(refreshed.body.access_token);
    expect(revoked.status).toBe(401);
    expect(revoked.body).toEqual({
      error: 'invalid_token',
      error_description: 'Token was revoked. You have to re-authorize from the user.',
    });
  });

  it('of 20 concurrent exchanges of one code exactly one succeeds', async () => {
    const code = await codeFor(browser, client);
    const results = await Promise.all(Array.from({ length: 20 }, () => exchange(app, client, code)));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 200)) expectError(r, 400, 'invalid_grant', INVALID_GRANT);
    const tokens = await app.deps.db
      .selectFrom('oauth_access_grants')
      .select('access_token_id')
      .where('code_digest', '=', digestToken(code))
      .executeTakeFirstOrThrow();
    expect(tokens.access_token_id).not.toBeNull();
  });
});

describe('refresh tokens', () => {
  async function pair(scope = 'api read_user') {
    const res = await exchange(app, client, await codeFor(browser, client, { scope }));
    expect(res.status).toBe(200);
    return res.body as { access_token: string; refresh_token: string };
  }
  const refresh = (token: string, extra: Record<string, string> = {}, who: RegisteredApp = client) =>
    oauthPost(app, '/oauth/token', {
      grant_type: 'refresh_token',
      refresh_token: token,
      client_id: who.clientId,
      client_secret: who.secret,
      ...extra,
    });

  it('rotate: the old access and refresh tokens stop working', async () => {
    const old = await pair();
    const res = await refresh(old.refresh_token);
    expect(res.status).toBe(200);
    expect(res.body.expires_in).toBe(7200);
    expect(res.body.refresh_token).not.toBe(old.refresh_token);
    expect((await me(res.body.access_token)).status).toBe(200);
    expect((await me(old.access_token)).status).toBe(401);
  });

  it('a replayed rotated refresh token fails and revokes the whole family', async () => {
    const old = await pair();
    const next = await refresh(old.refresh_token);
    expectError(await refresh(old.refresh_token), 400, 'invalid_grant', INVALID_GRANT);
    expect((await me(next.body.access_token)).status).toBe(401);
    expectError(await refresh(next.body.refresh_token), 400, 'invalid_grant');
  });

  it('of 10 concurrent refreshes with one token exactly one succeeds, and the replays revoke its result', async () => {
    const old = await pair();
    const results = await Promise.all(Array.from({ length: 10 }, () => refresh(old.refresh_token)));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 200)) expectError(r, 400, 'invalid_grant', INVALID_GRANT);
    expect((await me((ok[0] as TokenResponse).body.access_token)).status).toBe(401);
  });

  it('works after the access token expired; the expired token answers GitLab’s text', async () => {
    const old = await pair();
    app.clock.advance(7200_000);
    const expired = await me(old.access_token);
    expect(expired.status).toBe(401);
    expect(expired.body).toEqual({
      error: 'invalid_token',
      error_description: 'Token is expired. You can either do re-authorization or token refresh.',
    });
    const res = await refresh(old.refresh_token);
    expect(res.status).toBe(200);
    expect((await me(res.body.access_token)).status).toBe(200);
  });

  it('is bound to its client, and scope may only narrow', async () => {
    const old = await pair();
    expectError(await refresh(old.refresh_token, {}, other), 400, 'invalid_grant', INVALID_GRANT);
    expectError(await refresh(old.refresh_token, { scope: 'api read_api' }), 400, 'invalid_scope');
    expectError(await refresh(old.refresh_token, { client_secret: 'wrong' }), 401, 'invalid_client');
    const narrowed = await refresh(old.refresh_token, { scope: 'read_user' });
    expect(narrowed.status).toBe(200);
    expect(narrowed.body.scope).toBe('read_user');
    expect(
      (await app.request('/projects', { headers: { Authorization: `Bearer ${narrowed.body.access_token}` } })).status,
    ).toBe(403);
  });

  it('a missing refresh_token is invalid_request; a revoked one invalid_grant', async () => {
    expectError(
      await oauthPost(app, '/oauth/token', {
        grant_type: 'refresh_token',
        client_id: client.clientId,
        client_secret: client.secret,
      }),
      400,
      'invalid_request',
      'Missing required parameter: refresh_token.',
    );
    const old = await pair();
    const revoked = await oauthPost(
      app,
      '/oauth/revoke',
      { token: old.access_token },
      { basic: [client.clientId, client.secret] },
    );
    expect(revoked.status).toBe(200);
    expectError(await refresh(old.refresh_token), 400, 'invalid_grant');
  });
});

describe('the password grant', () => {
  // GitLab since 15.0: any application that authenticates with its client credentials may use it;
  // there is no per-application opt-in.
  const grant = (username: string, password: string, basic: [string, string]) =>
    oauthPost(app, '/oauth/token', { grant_type: 'password', username, password }, { basic });

  it('is granted to any application that authenticates, by HTTP Basic or by form fields', async () => {
    const basic = await grant(user.username, PASSWORD, [client.clientId, client.secret]);
    expect(basic.status).toBe(200);
    expect(basic.body.token_type).toBe('Bearer');
    expect(basic.body.refresh_token).toBeTruthy();
    expect((await me(basic.body.access_token)).body.username).toBe(user.username);
    const form = await oauthPost(app, '/oauth/token', {
      grant_type: 'password',
      username: user.username,
      password: PASSWORD,
      client_id: other.clientId,
      client_secret: other.secret,
    });
    expect(form.status).toBe(200);
    expect((await me(form.body.access_token)).body.username).toBe(user.username);
    // A public application authenticates with its client_id alone, as Doorkeeper allows.
    const pub = await oauthPost(app, '/oauth/token', {
      grant_type: 'password',
      username: user.username,
      password: PASSWORD,
      client_id: publicClient.clientId,
    });
    expect(pub.status).toBe(200);
    // An application registered with the old opt-in parameter: GitLab ignores what it does not declare.
    const legacy = await app.request('/applications', {
      method: 'POST',
      token: adminToken,
      body: { name: 'Old script', redirect_uri: 'https://old.example/cb', scopes: 'api', ropc_enabled: false },
    });
    expect(legacy.status).toBe(201);
    expect(legacy.body).not.toHaveProperty('ropc_enabled');
    const legacyGrant = await grant(user.username, PASSWORD, [legacy.body.application_id, legacy.body.secret]);
    expect(legacyGrant.status).toBe(200);
    const metadata = await (await fetch(new URL('/.well-known/oauth-authorization-server', app.baseUrl))).json();
    expect((metadata as { grant_types_supported: string[] }).grant_types_supported).toEqual([
      'authorization_code',
      'refresh_token',
      'password',
    ]);
  });

  it('issues tokens for the right password, refuses wrong ones, two-factor users and floods', async () => {
    const ropc = await registerApp(app, adminToken, { scopes: 'api' });
    const grant = (username: string, password: string) =>
      oauthPost(
        app,
        '/oauth/token',
        { grant_type: 'password', username, password },
        { basic: [ropc.clientId, ropc.secret] },
      );
    const ok = await grant(user.username, PASSWORD);
    expect(ok.status).toBe(200);
    expect(ok.body.refresh_token).toBeTruthy();
    expect(ok.body.scope).toBe('api');
    expect((await me(ok.body.access_token)).body.username).toBe(user.username);
    expectError(await grant(user.username, 'wrong password'), 400, 'invalid_grant', INVALID_GRANT);
    expectError(await grant('nobody-by-this-name', PASSWORD), 400, 'invalid_grant', INVALID_GRANT);
    // Client authentication is required, also for the password grant.
    expectError(
      await oauthPost(app, '/oauth/token', { grant_type: 'password', username: user.username, password: PASSWORD }),
      401,
      'invalid_client',
    );
    expectError(
      await oauthPost(
        app,
        '/oauth/token',
        { grant_type: 'password', username: user.username, password: PASSWORD },
        { basic: [ropc.clientId, 'gloas-wrong'] },
      ),
      401,
      'invalid_client',
    );

    const twoFactor = await makeUser(app, { password: PASSWORD });
    await app.deps.db.updateTable('users').set({ two_factor_enabled: true }).where('id', '=', twoFactor.id).execute();
    expectError(await grant(twoFactor.username, PASSWORD), 400, 'invalid_grant');

    // Ten attempts a minute per login name; the eleventh is refused before the password is checked.
    const target = await makeUser(app, { password: PASSWORD });
    for (let i = 0; i < 10; i++) expectError(await grant(target.username, `guess ${i}`), 400, 'invalid_grant');
    const limited = await grant(target.username, PASSWORD);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get('cache-control')).toBe('no-store');
    app.clock.advance(60_000);
    // The ten wrong passwords also locked the account (test/api/user-lockout.test.ts): the right
    // one is refused until the ten-minute lock runs out.
    expectError(await grant(target.username, PASSWORD), 400, 'invalid_grant', INVALID_GRANT);
    app.clock.advance(10 * 60_000);
    expect((await grant(target.username, PASSWORD)).status).toBe(200);
  });
});

describe('the password grant turned off (application setting oauth_password_grant_enabled=false)', () => {
  let off: TestApp;
  afterAll(async () => {
    await off?.close();
  });

  it('is not offered: unsupported_grant_type, and the metadata leaves it out; other grants work', async () => {
    off = await startTestApp();
    const admin = await makeToken(off, await makeAdmin(off));
    const setting = await off.request('/application/settings', {
      method: 'PUT',
      token: admin,
      body: { oauth_password_grant_enabled: false },
    });
    expect(setting.status).toBe(200);
    expect(setting.body.oauth_password_grant_enabled).toBe(false);
    expect((await off.request('/application/settings', { token: admin })).body.oauth_password_grant_enabled).toBe(
      false,
    );
    const owner = await makeUser(off, { password: PASSWORD });
    const registered = await registerApp(off, admin, { scopes: 'api' });
    const refused = await oauthPost(
      off,
      '/oauth/token',
      { grant_type: 'password', username: owner.username, password: PASSWORD },
      { basic: [registered.clientId, registered.secret] },
    );
    expectError(refused, 400, 'unsupported_grant_type');
    const metadata = await (await fetch(new URL('/.well-known/oauth-authorization-server', off.baseUrl))).json();
    expect((metadata as { grant_types_supported: string[] }).grant_types_supported).toEqual([
      'authorization_code',
      'refresh_token',
    ]);
    const unknownGrant = await oauthPost(
      off,
      '/oauth/token',
      { grant_type: 'refresh_token', refresh_token: 'nope' },
      { basic: [registered.clientId, registered.secret] },
    );
    expectError(unknownGrant, 400, 'invalid_grant');
  });
});
