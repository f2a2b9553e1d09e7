import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeProject, makeToken, makeUser, makeUserWithToken } from '../support/factories.js';

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

describe('OpenAPI document', () => {
  it('lists every mounted route with its method', async () => {
    const { API_MODULES, API_PREFIX } = await import('../../src/app.js');
    const { ApiRouter } = await import('../../src/http/route.js');
    const { openApiPath } = await import('../../src/http/openapi.js');
    const api = new ApiRouter(API_PREFIX);
    for (const register of API_MODULES) register(api);
    const res = await app.request('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    const mounted = api.layers.flatMap((layer) =>
      layer.methods.filter((m) => m !== 'HEAD').map((m) => `${m.toLowerCase()} ${openApiPath(String(layer.path))}`),
    );
    expect(mounted.length).toBeGreaterThan(20);
    for (const route of mounted) {
      const [method, path] = route.split(' ') as [string, string];
      const documented = res.body.paths[path.slice(API_PREFIX.length)] ?? res.body.paths[path];
      expect(documented?.[method], route).toBeDefined();
    }
  });

  it('describes parameters from the route schemas', async () => {
    const res = await app.request('/openapi.json');
    const list = res.body.paths['/api/v4/projects'].get;
    const names = list.parameters.map((p: { name: string }) => p.name);
    expect(names).toEqual(expect.arrayContaining(['search', 'order_by', 'page', 'per_page']));
    const orderBy = list.parameters.find((p: { name: string }) => p.name === 'order_by');
    expect(orderBy.schema.enum).toContain('last_activity_at');
  });
});

describe('parameters from every transport', () => {
  it('reads query arrays in both forms and ignores duplicates the way Rack does', async () => {
    const user = await makeUser(app);
    const token = await makeToken(app, user);
    const both = await app.request('/groups?skip_groups[]=1&skip_groups[]=2&per_page=5&per_page=7', { token });
    expect(both.status).toBe(200);
    expect(both.headers.get('x-per-page')).toBe('7');
    const commas = await app.request('/groups?skip_groups=1,2', { token });
    expect(commas.status).toBe(200);
    const bad = await app.request('/groups?skip_groups=1,x', { token });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'skip_groups is invalid' });
  });

  it('accepts JSON, urlencoded and multipart bodies alike', async () => {
    const user = await makeUser(app);
    const token = await makeToken(app, user);
    const json = await app.request('/projects', {
      method: 'POST',
      token,
      body: { name: 'from-json', topics: ['a', 'b'] },
    });
    expect(json.status).toBe(201);
    expect(json.body.topics).toEqual(['a', 'b']);
    const form = await app.request('/projects', {
      method: 'POST',
      token,
      body: new URLSearchParams([
        ['name', 'from-form'],
        ['topics[]', 'x'],
        ['topics[]', 'y'],
        ['initialize_with_readme', 'true'],
      ]),
    });
    expect(form.status).toBe(201);
    expect(form.body.topics).toEqual(['x', 'y']);
    expect(form.body.empty_repo).toBe(false);
    const multipart = new FormData();
    multipart.set('name', 'from-multipart');
    multipart.set('visibility', 'internal');
    const res = await fetch(`${app.baseUrl}/api/v4/projects`, {
      method: 'POST',
      headers: { 'PRIVATE-TOKEN': token },
      body: multipart,
    });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { visibility: string }).visibility).toBe('internal');
  });

  it('reads null for a parameter as the parameter left out, at any depth', async () => {
    const { user, token } = await makeUserWithToken(app);
    const bare = await app.request('/projects', { method: 'POST', token, body: { name: 'null-none' } });
    const nulls = await app.request('/projects', {
      method: 'POST',
      token,
      body: { name: 'null-description', description: null, topics: null, initialize_with_readme: null },
    });
    expect(nulls.status).toBe(201);
    expect(nulls.body).toMatchObject({
      description: bare.body.description,
      topics: bare.body.topics,
      empty_repo: true,
    });
    const required = await app.request('/projects', { method: 'POST', token, body: { name: null, path: null } });
    expect(required.status).toBe(400);
    expect(required.body).toEqual({ error: 'name, path are missing, at least one parameter must be provided' });

    const project = await makeProject(app, user);
    const url = `/projects/${project.id}/repository`;
    const created = await app.request(`${url}/files/a%2Fb.txt`, {
      method: 'POST',
      token,
      body: {
        branch: 'main',
        content: 'one',
        commit_message: 'add',
        start_branch: null,
        author_email: null,
        encoding: null,
      },
    });
    expect([created.status, created.body]).toEqual([201, { file_path: 'a/b.txt', branch: 'main' }]);
    // What current python-gitlab sends on every file update.
    const updated = await app.request(`${url}/files/a%2Fb.txt`, {
      method: 'PUT',
      token,
      body: { branch: 'main', content: 'two', commit_message: 'update', start_branch: null, last_commit_id: null },
    });
    expect([updated.status, updated.body]).toEqual([200, { file_path: 'a/b.txt', branch: 'main' }]);
    const commit = await app.request(`${url}/commits`, {
      method: 'POST',
      token,
      body: {
        branch: 'main',
        commit_message: 'several',
        start_sha: null,
        actions: [
          { action: 'create', file_path: 'c.txt', content: 'new', encoding: null, last_commit_id: null },
          { action: 'update', file_path: 'a/b.txt', content: 'three', previous_path: null },
        ],
      },
    });
    expect(commit.status, commit.text).toBe(201);
    const file = await app.request(`${url}/files/a%2Fb.txt/raw`, { token, query: { ref: 'main' } });
    expect(file.text).toBe('three');
    const added = await app.request(`${url}/files/c.txt/raw`, { token, query: { ref: 'main' } });
    expect([added.status, added.text]).toEqual([200, 'new']);
  });

  it('answers malformed JSON with a 400, never a 500', async () => {
    const user = await makeUser(app);
    const res = await fetch(`${app.baseUrl}/api/v4/projects`, {
      method: 'POST',
      headers: { 'PRIVATE-TOKEN': await makeToken(app, user), 'Content-Type': 'application/json' },
      body: '{"name": ',
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/^400 Bad request/);
  });

  it("answers a body that cannot be parsed with GitLab's 400, never a 500", async () => {
    const admin = await makeAdmin(app);
    const token = await makeToken(app, admin);
    const part = (name: string, value: string) =>
      `--XX\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
    const bodies: [string, string][] = [
      ['multipart/form-data', `${part('name', 'no-boundary')}--XX--\r\n`],
      [
        'multipart/form-data; boundary=XX',
        `${part('name', 'cut')}--XX\r\nContent-Disposition: form-data; name="path"\r\n\r\nx`,
      ],
      ['multipart/form-data; boundary=XX', '--XX\r\nthis is no header\r\n\r\nvalue\r\n--XX--\r\n'],
      ['multipart/form-data; boundary=XX', 'no delimiter at all'],
      ['application/json', '[1, 2'],
    ];
    for (const path of ['/projects', '/groups']) {
      for (const [type, body] of bodies) {
        const res = await fetch(`${app.baseUrl}/api/v4${path}`, {
          method: 'POST',
          headers: { 'PRIVATE-TOKEN': token, 'Content-Type': type },
          body,
        });
        const answer = { path, type, status: res.status, body: await res.json() };
        expect(answer).toEqual({
          path,
          type,
          status: 400,
          body: { message: '400 Bad request - The request body could not be parsed' },
        });
        expect(res.headers.get('content-type')).toBe('application/json');
      }
    }
  });

  it('reads a multipart part with a filename and no Content-Type as a file, as python-gitlab sends avatars', async () => {
    const { token } = await makeUserWithToken(app);
    // A PNG's first bytes hold NULs, which no text field may carry.
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    const body = Buffer.concat([
      Buffer.from(
        '--XX\r\nContent-Disposition: form-data; name="name"\r\n\r\nwith-avatar\r\n' +
          '--XX\r\nContent-Disposition: form-data; name="file"\r\n\r\n\r\n' +
          '--XX\r\nContent-Disposition: form-data; name="avatar"; filename="avatar.png"\r\n\r\n',
      ),
      png,
      Buffer.from('\r\n--XX--\r\n'),
    ]);
    const res = await fetch(`${app.baseUrl}/api/v4/projects`, {
      method: 'POST',
      headers: { 'PRIVATE-TOKEN': token, 'Content-Type': 'multipart/form-data; boundary=XX' },
      body,
    });
    const created = (await res.json()) as { id: number; name: string };
    expect([res.status, created.name]).toEqual([201, 'with-avatar']);
    // The same bytes sent as a field are still refused.
    const field = Buffer.from(body.toString('latin1').replace('; filename="avatar.png"', ''), 'latin1');
    const refused = await fetch(`${app.baseUrl}/api/v4/projects`, {
      method: 'POST',
      headers: { 'PRIVATE-TOKEN': token, 'Content-Type': 'multipart/form-data; boundary=XX' },
      body: field,
    });
    expect([refused.status, await refused.json()]).toEqual([400, { message: '400 Bad request' }]);
    // A file is a parameter like any other: an update that sends only the avatar is an update.
    const avatarOnly = Buffer.concat([
      Buffer.from('--XX\r\nContent-Disposition: form-data; name="avatar"; filename="avatar.png"\r\n\r\n'),
      png,
      Buffer.from('\r\n--XX--\r\n'),
    ]);
    const updated = await fetch(`${app.baseUrl}/api/v4/projects/${created.id}`, {
      method: 'PUT',
      headers: { 'PRIVATE-TOKEN': token, 'Content-Type': 'multipart/form-data; boundary=XX' },
      body: avatarOnly,
    });
    expect(updated.status).toBe(200);
    // And a file where text is expected is invalid, as in Grape.
    const fileAsText = await fetch(`${app.baseUrl}/api/v4/projects/${created.id}`, {
      method: 'PUT',
      headers: { 'PRIVATE-TOKEN': token, 'Content-Type': 'multipart/form-data; boundary=XX' },
      body: avatarOnly.toString('latin1').replace('name="avatar"', 'name="description"'),
    });
    expect([fileAsText.status, await fileAsText.json()]).toEqual([400, { error: 'description is invalid' }]);
  });

  it('refuses a body over the size limit with 413', async () => {
    const user = await makeUser(app);
    const res = await fetch(`${app.baseUrl}/api/v4/projects`, {
      method: 'POST',
      headers: { 'PRIVATE-TOKEN': await makeToken(app, user), 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'big', description: 'x'.repeat(21 * 1024 * 1024) }),
    });
    expect(res.status).toBe(413);
  });
});

describe('pagination headers', () => {
  it('sets every GitLab header and builds Link from BASE_URL', async () => {
    const owner = await makeUser(app);
    const token = await makeToken(app, owner);
    const { makeGroup } = await import('../support/factories.js');
    for (let i = 0; i < 5; i++) await makeGroup(app, owner, { path: `pg-${owner.id}-${i}` });
    const res = await app.request(`/groups?search=pg-${owner.id}-&per_page=2&page=2&order_by=path`, { token });
    expect(res.status).toBe(200);
    expect(res.body.map((g: { path: string }) => g.path)).toEqual([`pg-${owner.id}-2`, `pg-${owner.id}-3`]);
    expect(res.headers.get('x-total')).toBe('5');
    expect(res.headers.get('x-total-pages')).toBe('3');
    expect(res.headers.get('x-page')).toBe('2');
    expect(res.headers.get('x-per-page')).toBe('2');
    expect(res.headers.get('x-next-page')).toBe('3');
    expect(res.headers.get('x-prev-page')).toBe('1');
    const link = res.headers.get('link') ?? '';
    const rels = link.split(', ').map((part) => {
      const [, url, rel] = /^<([^>]+)>; rel="(\w+)"$/.exec(part) ?? [];
      return { rel, page: new URL(url as string).searchParams.get('page'), url: url as string };
    });
    expect(rels.map((r) => [r.rel, r.page])).toEqual([
      ['prev', '1'],
      ['next', '3'],
      ['first', '1'],
      ['last', '3'],
    ]);
    for (const r of rels) {
      expect(r.url.startsWith(`${app.baseUrl}/api/v4/groups?`)).toBe(true);
      expect(new URL(r.url).searchParams.get('order_by')).toBe('path');
      expect(new URL(r.url).searchParams.get('per_page')).toBe('2');
    }
    const last = await app.request(`/groups?search=pg-${owner.id}-&per_page=2&page=3&order_by=path`, { token });
    expect(last.headers.get('x-next-page')).toBe('');
    expect(last.headers.get('link')).not.toContain('rel="next"');
    const empty = await app.request('/groups?search=nothing-matches-this&per_page=2', { token });
    expect(empty.headers.get('x-total')).toBe('0');
    expect(empty.headers.get('x-total-pages')).toBe('1');
    expect(empty.headers.get('x-prev-page')).toBe('');
  });
});
