import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  makeAdmin,
  makeProjectMember,
  makeSampleProject,
  makeToken,
  makeUser,
  putSettings,
} from '../support/factories.js';
import { type GitCredentials, remoteUrl, runGitClient } from '../support/git-client.js';

// The instance-wide switches of git and API access (issue 16 item 4): maintenance mode and
// enabled_git_access_protocol, shown through real git over HTTP and the API.

let app: TestApp;
let scratch: string;
let owner: User;
let adminToken: string;
let admin: User;
let counter = 0;

const READ_ONLY = 'You cannot perform write operations on a read-only instance';
const PUSH_REFUSED =
  'Git push is not allowed because this GitLab instance is currently in (read-only) maintenance mode.';

const git = (args: string[], cwd = scratch) => runGitClient(args, cwd);
const remote = (project: Project, credentials?: GitCredentials) => remoteUrl(app.baseUrl, project, credentials);

const setSettings = (body: Record<string, unknown>) => putSettings(app, adminToken, body);

async function developer(project: Project) {
  const { user, token } = await makeProjectMember(app, project, 'developer');
  return { user, token, credentials: { login: user.username, password: token } };
}

async function workClone(project: Project, credentials: GitCredentials) {
  const dir = path.join(scratch, `work-${++counter}`);
  const result = await git(['clone', '--quiet', remote(project, credentials), dir]);
  expect(result).toMatchObject({ code: 0 });
  return dir;
}

async function commitIn(dir: string, file: string) {
  await fs.writeFile(path.join(dir, file), `${file}\n`);
  await git(['add', file], dir);
  await git(['commit', '--quiet', '-m', `Add ${file}`], dir);
}

beforeAll(async () => {
  app = await startTestApp();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-settings-access-'));
  owner = await makeUser(app);
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
});
afterEach(async () => {
  await setSettings({ maintenance_mode: false, maintenance_mode_message: '', enabled_git_access_protocol: '' });
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('maintenance_mode', () => {
  it('answers API writes of non-administrators with GitLab read-only 403, reads and admin writes go on', async () => {
    const { project } = await makeSampleProject(app, owner, { path: `mm-api${++counter}` });
    const dev = await developer(project);
    await setSettings({ maintenance_mode: true, maintenance_mode_message: 'Upgrading until noon' });

    const write = await app.request(`/projects/${project.id}/repository/branches`, {
      method: 'POST',
      token: dev.token,
      body: { branch: 'during-maintenance', ref: 'main' },
    });
    expect(write.status).toBe(403);
    expect(write.body).toEqual({ message: READ_ONLY });
    const removal = await app.request(`/projects/${project.id}/repository/branches/main`, {
      method: 'DELETE',
      token: dev.token,
    });
    expect(removal).toMatchObject({ status: 403, body: { message: READ_ONLY } });

    const read = await app.request(`/projects/${project.id}/repository/branches`, { token: dev.token });
    expect(read.status).toBe(200);

    const byAdmin = await app.request(`/projects/${project.id}/repository/branches`, {
      method: 'POST',
      token: adminToken,
      body: { branch: 'admin-branch', ref: 'main' },
    });
    expect(byAdmin.status).toBe(201);

    await setSettings({ maintenance_mode: false });
    const after = await app.request(`/projects/${project.id}/repository/branches`, {
      method: 'POST',
      token: dev.token,
      body: { branch: 'after-maintenance', ref: 'main' },
    });
    expect(after.status).toBe(201);
  });

  it('refuses git push with GitLab message and the banner, while clones work and admins push', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `mm-git${++counter}` });
    const dev = await developer(project);
    const dir = await workClone(project, dev.credentials);
    await git(['checkout', '--quiet', '-b', 'in-maintenance'], dir);
    await commitIn(dir, 'maintenance.txt');
    await setSettings({ maintenance_mode: true, maintenance_mode_message: 'Upgrading until noon' });

    const refused = await git(['push', 'origin', 'in-maintenance'], dir);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(PUSH_REFUSED);
    expect(refused.stderr).toContain('Upgrading until noon');
    const exists = await git([`--git-dir=${gitDir}`, 'rev-parse', '--verify', '--quiet', 'refs/heads/in-maintenance']);
    expect(exists.code).not.toBe(0);

    const clone = await git(['clone', '--quiet', '--mirror', remote(project, dev.credentials), `${dir}-mirror`]);
    expect(clone).toMatchObject({ code: 0, stderr: '' });

    const asAdmin = await git(
      ['push', '--quiet', remote(project, { login: admin.username, password: adminToken }), 'in-maintenance'],
      dir,
    );
    expect(asAdmin).toMatchObject({ code: 0 });
  });
});

describe('enabled_git_access_protocol', () => {
  it('refuses clone and push over HTTP when only ssh is enabled, allows them for http and both', async () => {
    const { project } = await makeSampleProject(app, owner, { path: `proto${++counter}` });
    const dev = await developer(project);
    const dir = await workClone(project, dev.credentials);
    await git(['checkout', '--quiet', '-b', 'by-protocol'], dir);
    await commitIn(dir, 'protocol.txt');

    await setSettings({ enabled_git_access_protocol: 'ssh' });
    const clone = await git(['clone', '--quiet', remote(project, dev.credentials), path.join(scratch, 'ssh-only')]);
    expect(clone.code).not.toBe(0);
    expect(clone.stderr).toContain('Git access over HTTP is not allowed');
    const anonymous = await git(['ls-remote', remote(project)]);
    expect(anonymous.stderr).toContain('Git access over HTTP is not allowed');
    const push = await git(['push', 'origin', 'by-protocol'], dir);
    expect(push.code).not.toBe(0);
    expect(push.stderr).toContain('Git access over HTTP is not allowed');

    for (const protocol of ['http', 'nil', '']) {
      await setSettings({ enabled_git_access_protocol: protocol });
      const ls = await git(['ls-remote', remote(project, dev.credentials)]);
      expect(ls, protocol).toMatchObject({ code: 0 });
    }
    expect(await git(['push', '--quiet', 'origin', 'by-protocol'], dir)).toMatchObject({ code: 0 });
  });
});
