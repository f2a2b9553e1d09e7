import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { generateToken } from '../../src/lib/crypto.js';
import type { TestApp } from '../support/app.js';
import { makeSampleProject, makeUser, makeUserWithToken } from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';
import { codeFor, exchange, oauthPost, type RegisteredApp, startOAuthWorld } from '../support/oauth.js';
import { WebClient } from '../support/web-client.js';

const PASSWORD = 'correct horse battery staple';
let app: TestApp;
let started: Date;
let user: User;
let browser: WebClient;
let client: RegisteredApp;
let other: RegisteredApp;
let publicClient: RegisteredApp;

beforeAll(async () => {
  ({ app, started, user, browser, client, other, publicClient } = await startOAuthWorld(
    PASSWORD,
    'api read_api read_user read_repository write_repository',
  ));
});
afterEach(() => {
  app.clock.set(started);
});
afterAll(async () => {
  await app?.close();
});

async function tokensFor(scope: string, who: RegisteredApp = client) {
  const res = await exchange(app, who, await codeFor(browser, who, { scope }));
  expect(res.status).toBe(200);
  return res.body as { access_token: string; refresh_token: string; created_at: number };
}

const bearer = (token: string) => ({ headers: { Authorization: `Bearer ${token}` } });
const UNAUTHORIZED = { message: '401 Unauthorized' };
const REVOKED = {
  error: 'invalid_token',
  error_description: 'Token was revoked. You have to re-authorize from the user.',
};

describe('OAuth access tokens on /api/v4', () => {
  it('authenticate through Authorization: Bearer and the access_token parameter', async () => {
    const { access_token } = await tokensFor('api');
    for (const res of [
      await app.request('/user', bearer(access_token)),
      await app.request('/user', { headers: { Authorization: `bearer  ${access_token} ` } }),
      await app.request('/user', { query: { access_token } }),
    ]) {
      expect(res.status).toBe(200);
      expect(res.body.username).toBe(user.username);
    }
  });

  it('are held to their scopes', async () => {
    const readUser = await tokensFor('read_user');
    expect((await app.request('/user', bearer(readUser.access_token))).status).toBe(200);
    const projects = await app.request('/projects', bearer(readUser.access_token));
    expect(projects.status).toBe(403);
    expect(projects.body).toEqual({
      error: 'insufficient_scope',
      error_description: 'The request requires higher privileges than provided by the access token.',
      scope: 'api read_api',
    });
    const readApi = await tokensFor('read_api');
    expect((await app.request('/projects', bearer(readApi.access_token))).status).toBe(200);
    const write = await app.request('/projects', {
      method: 'POST',
      body: { name: 'nope' },
      ...bearer(readApi.access_token),
    });
    expect(write.status).toBe(403);
    expect(write.body.error).toBe('insufficient_scope');
    const api = await tokensFor('api');
    const created = await app.request('/projects', {
      method: 'POST',
      body: { name: `oauth-${user.id}` },
      ...bearer(api.access_token),
    });
    expect(created.status).toBe(201);
  });

  it('unknown → 401 Unauthorized; a refresh token is not an access token; expired and revoked → invalid_token', async () => {
    const pair = await tokensFor('api');
    expect((await app.request('/user', bearer(generateToken('', 32)))).body).toEqual(UNAUTHORIZED);
    const refresh = await app.request('/user', bearer(pair.refresh_token));
    expect(refresh.status).toBe(401);
    expect(refresh.body).toEqual(UNAUTHORIZED);
    app.clock.advance(7199_000);
    expect((await app.request('/user', bearer(pair.access_token))).status).toBe(200);
    app.clock.advance(1_000);
    const expired = await app.request('/user', bearer(pair.access_token));
    expect(expired.status).toBe(401);
    expect(expired.body.error_description).toBe(
      'Token is expired. You can either do re-authorization or token refresh.',
    );
    expect(expired.headers.get('www-authenticate')).toContain('error="invalid_token"');
    app.clock.set(started);
    await oauthPost(app, '/oauth/revoke', { token: pair.access_token }, { basic: [client.clientId, client.secret] });
    const revoked = await app.request('/user', bearer(pair.access_token));
    expect(revoked.status).toBe(401);
    expect(revoked.body).toEqual(REVOKED);
  });

  it('still let personal access tokens through Bearer, and PRIVATE-TOKEN wins over Bearer', async () => {
    const pat = await makeUserWithToken(app);
    expect((await app.request('/user', bearer(pat.token))).body.username).toBe(pat.user.username);
    const { access_token } = await tokensFor('api');
    const both = await app.request('/user', {
      headers: { 'PRIVATE-TOKEN': pat.token, Authorization: `Bearer ${access_token}` },
    });
    expect(both.body.username).toBe(pat.user.username);
  });

  it('stop working for a blocked user', async () => {
    const blocked = await makeUser(app, { password: PASSWORD });
    const other = new WebClient(app);
    await other.signIn(blocked.username, PASSWORD);
    const tokens = await exchange(app, client, await codeFor(other, client));
    await app.deps.db.updateTable('users').set({ state: 'blocked' }).where('id', '=', blocked.id).execute();
    const res = await app.request('/user', bearer(tokens.body.access_token));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: '403 Forbidden - Your account has been blocked.' });
  });
});

describe('GET /oauth/token/info', () => {
  it('describes a valid token, with the deprecated aliases', async () => {
    const pair = await tokensFor('api read_user');
    app.clock.advance(100_000);
    for (const res of [
      await app.request('/oauth/token/info', bearer(pair.access_token)),
      await app.request('/oauth/token/info', { query: { access_token: pair.access_token } }),
      await app.request('/oauth/token/info', { query: { bearer_token: pair.access_token } }),
    ]) {
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        resource_owner_id: user.id,
        scope: ['api', 'read_user'],
        expires_in: 7100,
        application: { uid: client.clientId },
        created_at: pair.created_at,
        scopes: ['api', 'read_user'],
        expires_in_seconds: 7100,
      });
    }
  });

  it('answers 401 invalid_token for none, garbage, expired, revoked and refresh tokens', async () => {
    const pair = await tokensFor('api');
    const revokedPair = await tokensFor('api');
    await oauthPost(
      app,
      '/oauth/revoke',
      { token: revokedPair.refresh_token },
      { basic: [client.clientId, client.secret] },
    );
    const cases: [string, Record<string, unknown>][] = [
      ['none', {}],
      ['garbage', bearer('garbage')],
      ['refresh token', bearer(pair.refresh_token)],
      ['revoked', bearer(revokedPair.access_token)],
    ];
    for (const [name, options] of cases) {
      const res = await app.request('/oauth/token/info', options);
      expect(res.status, name).toBe(401);
      expect(res.body).toEqual({ error: 'invalid_token', error_description: 'The access token is invalid' });
      expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
    }
    app.clock.advance(7200_000);
    const expired = await app.request('/oauth/token/info', bearer(pair.access_token));
    expect(expired.status).toBe(401);
  });
});

describe('POST /oauth/revoke (RFC 7009)', () => {
  const revoke = (form: Record<string, string>, who: RegisteredApp | null = client) =>
    oauthPost(app, '/oauth/revoke', form, who ? { basic: [who.clientId, who.secret] } : {});

  it('answers 200 {} for unknown tokens', async () => {
    const res = await revoke({ token: 'no-such-token' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
  });

  it('refuses another application’s token and unauthenticated requests with 403 unauthorized_client', async () => {
    const pair = await tokensFor('api');
    for (const res of [
      await revoke({ token: pair.access_token }, other),
      await revoke({ token: pair.access_token }, null),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body).toEqual({
        error: 'unauthorized_client',
        error_description: 'You are not authorized to revoke this token',
      });
    }
    const bad = await oauthPost(
      app,
      '/oauth/revoke',
      { token: pair.access_token },
      { basic: [client.clientId, 'wrong'] },
    );
    expect(bad.status).toBe(401);
    expect(bad.body.error).toBe('invalid_client');
    expect((await app.request('/user', bearer(pair.access_token))).status).toBe(200);
  });

  it('revokes the pair through either token, with or without a hint', async () => {
    const a = await tokensFor('api');
    expect((await revoke({ token: a.refresh_token, token_type_hint: 'refresh_token' })).status).toBe(200);
    expect((await app.request('/user', bearer(a.access_token))).body).toEqual(REVOKED);
    const b = await tokensFor('api');
    expect((await revoke({ token: b.access_token, token_type_hint: 'refresh_token' })).status).toBe(200);
    expect((await app.request('/user', bearer(b.access_token))).status).toBe(401);
  });

  it('lets a public client revoke its own tokens with its client_id', async () => {
    const { access_token } = await tokensForPublic();
    const res = await oauthPost(app, '/oauth/revoke', { token: access_token, client_id: publicClient.clientId });
    expect(res.status).toBe(200);
    expect((await app.request('/user', bearer(access_token))).status).toBe(401);
  });
});

async function tokensForPublic() {
  const verifier = 'a'.repeat(43);
  const code = await codeFor(browser, publicClient, { verifier });
  const res = await oauthPost(app, '/oauth/token', {
    grant_type: 'authorization_code',
    client_id: publicClient.clientId,
    code,
    redirect_uri: publicClient.redirectUri,
    code_verifier: verifier,
  });
  expect(res.status).toBe(200);
  return res.body as { access_token: string };
}

describe('POST /oauth/introspect (RFC 7662)', () => {
  const introspect = (token: string, who: RegisteredApp = client) =>
    oauthPost(app, '/oauth/introspect', { token }, { basic: [who.clientId, who.secret] });

  it('describes an active token to its own confidential client', async () => {
    const pair = await tokensFor('api read_user');
    const res = await introspect(pair.access_token);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toEqual({
      active: true,
      scope: 'api read_user',
      client_id: client.clientId,
      username: user.username,
      sub: String(user.id),
      token_type: 'Bearer',
      iat: pair.created_at,
      exp: pair.created_at + 7200,
    });
    expect((await introspect(pair.refresh_token)).body.active).toBe(true);
  });

  it('answers {"active":false} for unknown, revoked, expired and other clients’ tokens', async () => {
    const pair = await tokensFor('api');
    expect((await introspect('unknown')).body).toEqual({ active: false });
    expect((await introspect(pair.access_token, other)).body).toEqual({ active: false });
    app.clock.advance(7200_000);
    expect((await introspect(pair.access_token)).body).toEqual({ active: false });
    app.clock.set(started);
    await oauthPost(app, '/oauth/revoke', { token: pair.access_token }, { basic: [client.clientId, client.secret] });
    expect((await introspect(pair.access_token)).body).toEqual({ active: false });
  });

  it('requires a confidential client’s credentials', async () => {
    const pair = await tokensFor('api');
    const none = await oauthPost(app, '/oauth/introspect', { token: pair.access_token });
    expect(none.status).toBe(401);
    expect(none.body.error).toBe('invalid_client');
    const pub = await oauthPost(app, '/oauth/introspect', {
      token: pair.access_token,
      client_id: publicClient.clientId,
    });
    expect(pub.status).toBe(401);
    const wrong = await oauthPost(
      app,
      '/oauth/introspect',
      { token: pair.access_token },
      { basic: [client.clientId, 'x'] },
    );
    expect(wrong.status).toBe(401);
  });
});

describe('Git over HTTP', () => {
  it('accepts an OAuth access token as the password of login oauth2, within its scopes', async () => {
    const { project } = await makeSampleProject(app, user, { visibility: 'private' });
    const infoRefs = (password: string, login = 'oauth2') =>
      fetch(new URL(`/${user.username}/${project.path}.git/info/refs?service=git-upload-pack`, app.baseUrl), {
        headers: { Authorization: `Basic ${Buffer.from(`${login}:${password}`).toString('base64')}` },
      });
    const readRepo = await tokensFor('read_repository');
    const ok = await infoRefs(readRepo.access_token);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toBe('application/x-git-upload-pack-advertisement');
    const readUser = await tokensFor('read_user');
    expect((await infoRefs(readUser.access_token)).status).toBe(401);
    expect((await infoRefs('not-a-token')).status).toBe(401);
  });

  it('lets git itself clone with a read_repository token and push only with write_repository', async () => {
    const { project, gitDir } = await makeSampleProject(app, user, { visibility: 'private' });
    const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-oauth-git-'));
    try {
      const url = (token: string) => remoteUrl(app.baseUrl, project, { login: 'oauth2', password: token });
      const reader = await tokensFor('read_repository');
      const work = path.join(scratch, 'work');
      expect(await runGitClient(['clone', '--quiet', url(reader.access_token), work], scratch)).toMatchObject({
        code: 0,
      });
      const tip = (await runGitClient([`--git-dir=${gitDir}`, 'rev-parse', 'main'], scratch)).stdout.trim();
      expect((await runGitClient(['rev-parse', 'HEAD'], work)).stdout.trim()).toBe(tip);

      await runGitClient(['checkout', '--quiet', '-b', 'from-oauth'], work);
      await fs.writeFile(path.join(work, 'oauth.txt'), 'pushed with an OAuth token\n');
      await runGitClient(['add', 'oauth.txt'], work);
      await runGitClient(['commit', '--quiet', '-m', 'OAuth push'], work);
      const refused = await runGitClient(['push', url(reader.access_token), 'from-oauth'], work);
      expect(refused.code).not.toBe(0);
      const writer = await tokensFor('write_repository');
      expect(await runGitClient(['push', '--quiet', url(writer.access_token), 'from-oauth'], work)).toMatchObject({
        code: 0,
      });
      const pushed = (await runGitClient(['rev-parse', 'HEAD'], work)).stdout.trim();
      expect((await runGitClient([`--git-dir=${gitDir}`, 'rev-parse', 'from-oauth'], scratch)).stdout.trim()).toBe(
        pushed,
      );
    } finally {
      await fs.rm(scratch, { recursive: true, force: true });
    }
  });
});
