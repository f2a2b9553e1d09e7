import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeToken, makeUser } from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

describe('HTTP core', () => {
  it('answers unknown routes with GitLab 404 and the security headers', async () => {
    const res = await app.request('/does/not/exist');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: '404 Not Found' });
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('x-frame-options')).toBe('SAMEORIGIN');
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
    const good = await app.request('/version', { headers: { 'X-Request-Id': 'abc-123' } });
    expect(good.headers.get('x-request-id')).toBe('abc-123');
    const bad = await app.request('/version', { headers: { 'X-Request-Id': 'a b\tc' } });
    expect(bad.headers.get('x-request-id')).not.toBe('a b\tc');
  });

  it('answers a wrong method on a known path with 404, as GitLab catch-all does', async () => {
    const res = await app.request('/version', { method: 'PATCH' });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: '404 Not Found' });
  });

  it('refuses API v3 with 410', async () => {
    const res = await app.request('/api/v3/projects');
    expect(res.status).toBe(410);
    expect(res.body).toEqual({ error: 'API V3 is no longer supported. Use API V4 instead.' });
  });

  it('serves health, liveness, readiness and Prometheus metrics', async () => {
    expect((await app.request('/-/health')).status).toBe(200);
    expect((await app.request('/-/liveness')).body).toEqual({ status: 'ok' });
    const ready = await app.request('/-/readiness');
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('ok');
    expect(ready.body.checks.database.status).toBe('ok');
    await app.request('/version');
    const metrics = await app.request('/-/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('depot_http_requests_total{method="GET",route="/api/v4/version",status="401"}');
    expect(metrics.text).toContain('depot_http_request_duration_seconds_bucket');
  });

  it('GET /version needs authentication and answers the version entity', async () => {
    expect((await app.request('/version')).status).toBe(401);
    const user = await makeUser(app);
    const res = await app.request('/version', { token: await makeToken(app, user, ['read_user']) });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(['version', 'revision', 'kas', 'enterprise']);
    expect(res.body.version).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
