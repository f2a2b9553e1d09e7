import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  makeAdmin,
  makeGroup,
  makeToken,
  makeUserWithToken,
  putSettings,
  resetSettings,
} from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

/**
 * Issue 16 item 4: settings that govern what Depot does take effect on the next request, each
 * shown through HTTP after an administrator changed it with `PUT /application/settings`.
 */
let app: TestApp;
let admin: User;
let adminToken: string;

beforeAll(async () => {
  app = await startTestApp();
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
});
afterAll(async () => {
  await app?.close();
});
/** Each test starts from GitLab's defaults. */
beforeEach(async () => {
  await resetSettings(app);
  await app.request('/application/settings', { token: adminToken }); // reloads the cache
});

let sequence = 0;
const unique = (prefix: string) => `${prefix}${process.pid.toString(36)}x${++sequence}`;

const setSettings = (body: Record<string, unknown>) => putSettings(app, adminToken, body);

const createProject = (token: string, body: Record<string, unknown> = {}) => {
  const path = unique('proj');
  return app.request('/projects', { method: 'POST', token, body: { name: path, path, ...body } });
};
const createGroup = (token: string, body: Record<string, unknown> = {}) => {
  const path = unique('grp');
  return app.request('/groups', { method: 'POST', token, body: { name: path, path, ...body } });
};

describe('default_project_visibility and default_group_visibility', () => {
  it('give projects created without a visibility the instance default', async () => {
    const { token } = await makeUserWithToken(app);
    expect((await createProject(token)).body.visibility).toBe('private');
    await setSettings({ default_project_visibility: 'internal' });
    const res = await createProject(token);
    expect(res.status).toBe(201);
    expect(res.body.visibility).toBe('internal');
    // A visibility given still wins.
    expect((await createProject(token, { visibility: 'public' })).body.visibility).toBe('public');
  });

  it('lower the project default to what the group allows', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user, { visibility: 'internal' });
    await setSettings({ default_project_visibility: 'public' });
    const res = await createProject(token, { namespace_id: group.id });
    expect(res.status).toBe(201);
    expect(res.body.visibility).toBe('internal');
  });

  it('give groups created without a visibility the instance default, capped by the parent', async () => {
    const { user, token } = await makeUserWithToken(app, { can_create_group: true });
    expect((await createGroup(token)).body.visibility).toBe('private');
    await setSettings({ default_group_visibility: 'public' });
    const top = await createGroup(token);
    expect(top.status).toBe(201);
    expect(top.body.visibility).toBe('public');
    const parent = await makeGroup(app, user, { visibility: 'internal' });
    const sub = await createGroup(token, { parent_id: parent.id });
    expect(sub.status).toBe(201);
    expect(sub.body.visibility).toBe('internal');
  });
});

describe('restricted_visibility_levels', () => {
  it('refuses a non-admin a restricted level for a new project or group; an admin may', async () => {
    const { token } = await makeUserWithToken(app, { can_create_group: true });
    await setSettings({ restricted_visibility_levels: ['public'] });
    const project = await createProject(token, { visibility: 'public' });
    expect(project.status).toBe(400);
    expect(project.body).toEqual({
      message: { visibility_level: ['public has been restricted by your GitLab administrator'] },
    });
    const group = await createGroup(token, { visibility: 'public' });
    expect(group.status).toBe(400);
    expect(group.body.message).toMatch(/^Failed to save group \{/);
    expect(group.body.message).toContain('public has been restricted by your GitLab administrator');
    expect((await createProject(adminToken, { visibility: 'public' })).status).toBe(201);
    expect((await createGroup(adminToken, { visibility: 'public' })).status).toBe(201);
    // Unrestricted levels stay open.
    expect((await createProject(token, { visibility: 'internal' })).status).toBe(201);
  });

  it('applies to the instance default a project would get', async () => {
    const { token } = await makeUserWithToken(app);
    await setSettings({ default_project_visibility: 'internal', restricted_visibility_levels: ['internal'] });
    const res = await createProject(token);
    expect(res.status).toBe(400);
    expect(res.body.message.visibility_level).toEqual(['internal has been restricted by your GitLab administrator']);
  });

  it('refuses a non-admin a change to a restricted level; other changes pass', async () => {
    const { user, token } = await makeUserWithToken(app, { can_create_group: true });
    const project = (await createProject(token, { visibility: 'private' })).body;
    const group = await makeGroup(app, user, { visibility: 'private' });
    await setSettings({ restricted_visibility_levels: ['internal', 'private'] });
    const toInternal = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token,
      body: { visibility: 'internal' },
    });
    expect(toInternal.status).toBe(400);
    expect(toInternal.body).toEqual({
      message: { visibility_level: ['internal has been restricted by your GitLab administrator'] },
    });
    // The level it already has is no change.
    const same = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token,
      body: { visibility: 'private', description: 'kept' },
    });
    expect(same.status).toBe(200);
    const groupChange = await app.request(`/groups/${group.id}`, {
      method: 'PUT',
      token,
      body: { visibility: 'internal' },
    });
    expect(groupChange.status).toBe(400);
    expect(groupChange.body).toEqual({
      message: { visibility_level: ['internal has been restricted by your GitLab administrator'] },
    });
    const byAdmin = await app.request(`/groups/${group.id}`, {
      method: 'PUT',
      token: adminToken,
      body: { visibility: 'internal' },
    });
    expect(byAdmin.status).toBe(200);
    expect(byAdmin.body.visibility).toBe('internal');
  });
});

describe('default_projects_limit', () => {
  it('is the projects_limit of users created after it changed', async () => {
    await setSettings({ default_projects_limit: 2 });
    const name = unique('u');
    const res = await app.request('/users', {
      method: 'POST',
      token: adminToken,
      body: { username: name, email: `${name}@example.com`, name, password: 'a-long-password-1234' },
    });
    expect(res.status).toBe(201);
    expect(res.body.projects_limit).toBe(2);
  });

  it('refuses a personal project beyond the limit with GitLab error', async () => {
    await setSettings({ default_projects_limit: 1 });
    const { user, token } = await makeUserWithToken(app);
    expect(user.projects_limit).toBe(1);
    expect((await createProject(token)).status).toBe(201);
    const over = await createProject(token);
    expect(over.status).toBe(400);
    expect(over.body).toEqual({
      message: {
        limit_reached: ['Your project limit is 1 projects! Please contact your administrator to increase it'],
      },
    });
    // GitLab checks the limit before the model: an invalid path adds nothing to it.
    const alsoInvalid = await app.request('/projects', { method: 'POST', token, body: { name: 'x', path: '-bad-' } });
    expect(alsoInvalid.body).toEqual(over.body);
    // Projects in a group do not count against it.
    const group = await makeGroup(app, user);
    expect((await createProject(token, { namespace_id: group.id })).status).toBe(201);
  });

  it('at zero, refuses personal projects altogether', async () => {
    await setSettings({ default_projects_limit: 0 });
    const { token } = await makeUserWithToken(app);
    const res = await createProject(token);
    expect(res.status).toBe(400);
    expect(res.body.message.limit_reached).toEqual([
      'Personal project creation is not allowed. Please contact your administrator with questions',
    ]);
  });
});

describe('default_project_creation', () => {
  it('is the project_creation_level of new groups', async () => {
    const { token } = await makeUserWithToken(app, { can_create_group: true });
    expect((await createGroup(token)).body.project_creation_level).toBe('developer');
    await setSettings({ default_project_creation: 1 });
    expect((await createGroup(token)).body.project_creation_level).toBe('maintainer');
    await setSettings({ default_project_creation: 0 });
    expect((await createGroup(token)).body.project_creation_level).toBe('noone');
    // A level given still wins.
    expect((await createGroup(token, { project_creation_level: 'developer' })).body.project_creation_level).toBe(
      'developer',
    );
  });
});

describe('default_branch_name', () => {
  it('must be a branch name git takes; a bad one changes nothing', async () => {
    for (const bad of ['has space', 'a..b', '-dash', 'refs/heads/x', 'end.lock']) {
      const res = await app.request('/application/settings', {
        method: 'PUT',
        token: adminToken,
        body: { default_branch_name: bad, default_projects_limit: 7 },
      });
      expect(res.status, bad).toBe(400);
      expect(res.body).toEqual({ message: { default_branch_name: ['is invalid'] } });
    }
    const read = await app.request('/application/settings', { token: adminToken });
    expect(read.body.default_branch_name).toBeNull();
    expect(read.body.default_projects_limit).toBe(100000);
    await setSettings({ default_branch_name: 'release/trunk' });
  });

  it('names the first branch of new repositories, with a README or by the first push', async () => {
    const { user, token } = await makeUserWithToken(app);
    const before = await createProject(token, { initialize_with_readme: true });
    expect(before.body.default_branch).toBe('main');
    await setSettings({ default_branch_name: 'trunk' });
    const withReadme = await createProject(token, { initialize_with_readme: true });
    expect(withReadme.status).toBe(201);
    expect(withReadme.body.default_branch).toBe('trunk');
    const branches = await app.request(`/projects/${withReadme.body.id}/repository/branches`, { token });
    expect(branches.body.map((b: { name: string; default: boolean }) => [b.name, b.default])).toEqual([
      ['trunk', true],
    ]);
    // An empty repository: the first push of that name becomes the default branch.
    const empty = (await createProject(token)).body;
    expect(empty.default_branch).toBe('trunk');
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-branch-'));
    try {
      expect((await runGitClient(['init', '--quiet', '-b', 'work', dir], dir)).code).toBe(0);
      await fs.writeFile(path.join(dir, 'a.txt'), 'a\n');
      await runGitClient(['add', 'a.txt'], dir);
      expect((await runGitClient(['commit', '--quiet', '-m', 'First'], dir)).code).toBe(0);
      const url = remoteUrl(
        app.baseUrl,
        { full_path: empty.path_with_namespace },
        { login: user.username, password: token },
      );
      const pushed = await runGitClient(['push', '--quiet', url, 'work:other', 'work:trunk'], dir);
      expect(pushed.code, pushed.stderr).toBe(0);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
    const after = await app.request(`/projects/${empty.id}`, { token });
    expect(after.body.default_branch).toBe('trunk');
    const trunk = await app.request(`/projects/${empty.id}/repository/branches/trunk`, { token });
    expect(trunk.body.default).toBe(true);
  });
});

describe('personal access tokens', () => {
  const today = () => app.clock.now().toISOString().slice(0, 10);
  const addDays = (date: string, days: number) =>
    new Date(Date.parse(`${date}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
  const createToken = (userId: number, body: Record<string, unknown> = {}) =>
    app.request(`/users/${userId}/personal_access_tokens`, {
      method: 'POST',
      token: adminToken,
      body: { name: 'effect', scopes: ['api'], ...body },
    });

  it('start with personal_access_token_prefix; tokens made before keep working', async () => {
    const { user } = await makeUserWithToken(app);
    const before = await createToken(user.id);
    expect(before.body.token).toMatch(/^glpat-/);
    await setSettings({ personal_access_token_prefix: 'xyz-' });
    const after = await createToken(user.id);
    expect(after.status).toBe(201);
    expect(after.body.token).toMatch(/^xyz-[A-Za-z0-9_-]{20,}$/);
    for (const token of [before.body.token, after.body.token]) {
      const me = await app.request('/user', { token });
      expect(me.status).toBe(200);
      expect(me.body.id).toBe(user.id);
    }
    await setSettings({ personal_access_token_prefix: '' });
    expect((await createToken(user.id)).body.token).toMatch(/^glpat-/);
  });

  it('live at most max_personal_access_token_lifetime days', async () => {
    const { user } = await makeUserWithToken(app);
    await setSettings({ max_personal_access_token_lifetime: 30 });
    const unset = await createToken(user.id);
    expect(unset.status).toBe(201);
    expect(unset.body.expires_at).toBe(addDays(today(), 30));
    const atLimit = await createToken(user.id, { expires_at: addDays(today(), 30) });
    expect(atLimit.status).toBe(201);
    const beyond = await createToken(user.id, { expires_at: addDays(today(), 31) });
    expect(beyond.status).toBe(422);
    expect(beyond.body).toEqual({ message: `Expiration date must be before ${addDays(today(), 30)}` });
    await setSettings({ max_personal_access_token_lifetime: 365 });
    expect((await createToken(user.id, { expires_at: addDays(today(), 31) })).status).toBe(201);
  });
});
