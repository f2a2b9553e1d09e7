import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken } from '../support/factories.js';

/**
 * OAUTH_HTTP_REDIRECT_URIS: `any` (GitLab's `force_ssl_in_redirect_uri false`) or `loopback`
 * (plain http only for callbacks on this machine, RFC 9700 §2.6 / RFC 8252 §7.3).
 */
const started: { app: TestApp; token: string }[] = [];

async function start(env: Record<string, string>) {
  const app = await startTestApp({ env });
  const token = await makeToken(app, await makeAdmin(app));
  started.push({ app, token });
  return (redirectUri: string) =>
    app.request('/applications', {
      method: 'POST',
      token,
      body: { name: 'client', redirect_uri: redirectUri, scopes: 'api' },
    });
}

let anyHttp: Awaited<ReturnType<typeof start>>;
let loopbackOnly: Awaited<ReturnType<typeof start>>;

beforeAll(async () => {
  anyHttp = await start({});
  loopbackOnly = await start({ OAUTH_HTTP_REDIRECT_URIS: 'loopback' });
});
afterAll(async () => {
  for (const { app } of started) await app.close();
});

const SECURED = { message: { redirect_uri: ['must be an HTTPS/SSL URI.'] } };

describe('http redirect URIs', () => {
  it('are accepted anywhere by default, as GitLab does', async () => {
    const res = await anyHttp('http://client.example/cb');
    expect(res.status, res.text).toBe(201);
    expect(res.body.callback_url).toBe('http://client.example/cb');
  });

  it('are refused with loopback, except for 127.0.0.1, [::1] and localhost callbacks', async () => {
    for (const uri of [
      'http://client.example/cb',
      'http://10.0.0.5:8080/cb',
      'http://127.0.0.1.evil.example/cb',
      'http://localhost.evil.example/cb',
      'http://[::2]/cb',
      // One refused URI among several refuses the registration.
      'https://client.example/cb\nhttp://client.example/cb',
    ]) {
      const res = await loopbackOnly(uri);
      expect(res.status, uri).toBe(400);
      expect(res.body, uri).toEqual(SECURED);
    }
    for (const uri of [
      'http://127.0.0.1/cb',
      'http://127.0.0.1:49152/cb',
      'http://[::1]:8080/cb',
      'http://localhost:3000/oauth/callback',
      'HTTP://LOCALHOST:3000/cb',
      'https://client.example/cb',
      'com.example.app:/oauth/cb',
      'https://client.example/cb\nhttp://127.0.0.1:8000/cb',
    ]) {
      const res = await loopbackOnly(uri);
      expect(res.status, `${uri}: ${res.text}`).toBe(201);
    }
  });

  it('keep the other Doorkeeper checks first', async () => {
    expect((await loopbackOnly('javascript:alert(1)')).body).toEqual({
      message: { redirect_uri: ['is forbidden by the server.'] },
    });
    expect((await loopbackOnly('http://client.example/cb#frag')).body).toEqual({
      message: { redirect_uri: ['cannot contain a fragment.'] },
    });
  });
});
