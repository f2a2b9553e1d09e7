import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_MODULES, API_PREFIX } from '../../src/app.js';
import { ApiRouter, type Operation } from '../../src/http/route.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import {
  addMember,
  makeAdmin,
  makeGroup,
  makeSampleProject,
  makeToken,
  makeUser,
  ROLES,
} from '../support/factories.js';
import { registerApp } from '../support/oauth.js';

/**
 * GitLab's API answers JSON as exactly `Content-Type: application/json`: no charset parameter
 * (python-gitlab 3.12 reads a body as JSON only on that exact value). Every route in the route
 * table is called once, and each JSON answer, success or error, is checked.
 */

let app: TestApp;
let token: string;
const values: Record<string, string> = {};

/** Routes whose successful answer is not JSON, with the type GitLab serves. */
const NOT_JSON: Record<string, RegExp> = {
  'get /api/v4/projects/:id/repository/blobs/:sha/raw': /^text\/plain; charset=utf-8$/,
  'get /api/v4/projects/:id/repository/files/:file_path/raw': /^text\/plain; charset=utf-8$/,
  'get /api/v4/projects/:id/repository/archive': /^application\/octet-stream$/,
  'get /api/v4/projects/:id/repository/archive.:format': /^application\/zip$/,
  'get /api/v4/projects/:id/snapshot': /^application\/x-tar$/,
};

beforeAll(async () => {
  app = await startTestApp();
  const admin = await makeAdmin(app);
  token = await makeToken(app, admin, ['api', 'sudo', 'admin_mode']);
  const group = await makeGroup(app, admin, { visibility: 'public' });
  const { project } = await makeSampleProject(app, admin);
  const member = await makeUser(app);
  await addMember(app, { type: 'project', id: project.id }, member, ROLES.developer);
  await addMember(app, { type: 'group', id: group.id }, member, ROLES.developer);
  const tree = await app.request(`/projects/${project.id}/repository/tree`, { token });
  const blob = tree.body.find((entry: { type: string }) => entry.type === 'blob');
  const commit = await app.request(`/projects/${project.id}/repository/commits/main`, { token });
  const oauthApp = await registerApp(app, token);
  await makeToken(app, member);
  const tokens = await app.request('/personal_access_tokens', { token, query: { user_id: member.id } });
  Object.assign(values, {
    project: String(project.id),
    group: String(group.id),
    user: String(member.id),
    namespace: String(project.namespace_id),
    token: String(tokens.body[0].id),
    application: String(oauthApp.id),
    blob: blob.id,
    commit: commit.body.id,
    file_path: blob.path,
    branch: 'main',
    tag_name: 'v1.0.0',
    format: 'zip',
    repository_storage_move_id: '999',
  });
});
afterAll(async () => {
  await app?.close();
});

/** A request path for a route, its parameters filled with existing records. */
function fill(op: Operation): string {
  const resource = op.path.slice(API_PREFIX.length).split('/')[1];
  return op.path.slice(API_PREFIX.length).replace(/:([a-z_]+)/g, (_, name: string) => {
    if (name === 'id') {
      const byResource: Record<string, string | undefined> = {
        projects: values.project,
        groups: values.group,
        users: values.user,
        namespaces: values.namespace,
        personal_access_tokens: values.token,
        applications: values.application,
      };
      return byResource[resource ?? ''] ?? '1';
    }
    if (name === 'user_id') return values.user as string;
    if (name === 'sha') return (op.path.includes('/blobs/') ? values.blob : values.commit) as string;
    return encodeURIComponent(values[name] ?? '1');
  });
}

describe('Content-Type of JSON answers', () => {
  it('is exactly application/json on every route that answers JSON, errors included', async () => {
    const api = new ApiRouter(API_PREFIX);
    for (const register of API_MODULES) register(api);
    // Deletions last (the project, the token...), so the other routes meet existing records; the
    // token that makes the calls goes last of all.
    const rank = (op: Operation) => (op.method !== 'delete' ? 0 : op.path.endsWith('/self') ? 2 : 1);
    const operations = [...api.operations].sort((a, b) => rank(a) - rank(b));
    const seen = { json: 0, success: 0, error: 0, empty: 0, other: 0 };
    const check = (route: string, res: TestResponse) => {
      const type = res.headers.get('content-type');
      const notJson = NOT_JSON[route.replace(/^head /, 'get ')];
      if (notJson && res.status === 200) {
        expect(type, route).toMatch(notJson);
        seen.other += 1;
      } else if (res.status === 204) {
        expect(res.text, route).toBe('');
        seen.empty += 1;
      } else {
        expect(type, `${route} → ${res.status} ${res.text.slice(0, 200)}`).toBe('application/json');
        if (!route.startsWith('head ')) expect(() => JSON.parse(res.text), route).not.toThrow();
        seen.json += 1;
        if (res.status < 300) seen.success += 1;
        else seen.error += 1;
      }
    };
    for (const op of operations) {
      const route = `${op.method} ${op.path}`;
      const path = fill(op);
      // A body for writes: missing parameters give GitLab's 400 `{"error": ...}`.
      const body = op.method === 'get' || op.method === 'delete' ? undefined : {};
      check(route, await app.request(path, { method: op.method.toUpperCase(), token, body }));
      if (op.method === 'get') check(`head ${op.path}`, await app.request(path, { method: 'HEAD', token }));
      if (op.method === 'get' && op.auth === 'optional') {
        // Anonymous callers meet the other error shapes: 401, 403 and 404 `{"message": ...}`.
        check(route, await app.request(path, { headers: { 'PRIVATE-TOKEN': 'glpat-unknown' } }));
      }
    }
    expect(seen.json).toBeGreaterThan(operations.length);
    expect(seen.success).toBeGreaterThan(40);
    expect(seen.error).toBeGreaterThan(50);
    // Each of them answered its file or archive to GET and to HEAD.
    expect(seen.other).toBe(2 * Object.keys(NOT_JSON).length);
  });

  it('is exactly application/json on answers outside the routes: unknown paths, API v3, the OpenAPI document', async () => {
    const token = await makeToken(app, await makeAdmin(app));
    for (const path of ['/does/not/exist', '/api/v3/projects', '/openapi.json']) {
      const res = await app.request(path, { token });
      expect(res.headers.get('content-type'), path).toBe('application/json');
    }
  });

  it('leaves the types of the answers GitLab serves outside its API alone', async () => {
    const token = await app.request('/oauth/token', { method: 'POST', body: new URLSearchParams() });
    expect(token.status).toBe(400);
    expect(token.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const page = await fetch(`${app.baseUrl}/users/sign_in`);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
  });
});
