import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeProjectMember, makeSampleProject, makeToken, putSettings } from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

/**
 * default_branch_protection (GitLab's levels 0, 1, 2): a project's default branch is protected
 * as the setting said when the project was created; later changes leave it alone, as in GitLab.
 */
let app: TestApp;
let admin: User;
let adminToken: string;
let scratch: string;
let counter = 0;

beforeAll(async () => {
  app = await startTestApp();
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-protection-'));
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

const setProtection = async (level: number) => {
  expect((await putSettings(app, adminToken, { default_branch_protection: level })).default_branch_protection).toBe(
    level,
  );
};

const commitAs = (project: Project, token: string, file: string) =>
  app.request(`/projects/${project.id}/repository/commits`, {
    method: 'POST',
    token,
    body: { branch: 'main', commit_message: file, actions: [{ action: 'create', file_path: file, content: 'x\n' }] },
  });

const mainBranch = async (project: Project) =>
  (await app.request(`/projects/${project.id}/repository/branches/main`, { token: adminToken })).body;

/** A developer's clone that rewrites main (an amend) and force pushes it, or pushes on top. */
async function pushAsDeveloper(project: Project, login: string, token: string, force: boolean) {
  const dir = path.join(scratch, `work-${++counter}`);
  const remote = remoteUrl(app.baseUrl, project, { login, password: token });
  expect((await runGitClient(['clone', '--quiet', remote, dir], scratch)).code).toBe(0);
  await fs.writeFile(path.join(dir, `pushed-${counter}.txt`), 'y\n');
  await runGitClient(['add', '.'], dir);
  await runGitClient(['commit', '--quiet', ...(force ? ['--amend'] : []), '-m', 'pushed'], dir);
  return runGitClient(['push', ...(force ? ['--force'] : []), 'origin', 'main'], dir);
}

describe('default_branch_protection', () => {
  it('2 (the default): only maintainers push to the default branch, nobody force pushes', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const developer = await makeProjectMember(app, project, 'developer');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    expect(await commitAs(project, developer.token, 'dev.txt')).toMatchObject({
      status: 403,
      body: { message: '403 Forbidden - You are not allowed to push into this branch' },
    });
    expect((await commitAs(project, maintainer.token, 'maintainer.txt')).status).toBe(201);
    expect(await mainBranch(project)).toMatchObject({ protected: true, developers_can_push: false, can_push: true });
    const push = await pushAsDeveloper(project, developer.user.username, developer.token, false);
    expect(push.code).not.toBe(0);
    expect(push.stderr).toContain('You are not allowed to push code to protected branches on this project.');
  });

  it('1: developers push to the default branch of projects created after the change, but never force', async () => {
    const { project: before } = await makeSampleProject(app, admin, { visibility: 'private' });
    await setProtection(1);
    try {
      const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
      const developer = await makeProjectMember(app, project, 'developer');
      expect((await commitAs(project, developer.token, 'dev.txt')).status).toBe(201);
      expect(await mainBranch(project)).toMatchObject({ protected: true, developers_can_push: true });
      expect((await pushAsDeveloper(project, developer.user.username, developer.token, false)).code).toBe(0);
      const forced = await pushAsDeveloper(project, developer.user.username, developer.token, true);
      expect(forced.code).not.toBe(0);
      expect(forced.stderr).toContain('You are not allowed to force push code to a protected branch on this project.');
      // A project created before keeps the protection it was created with.
      const old = await makeProjectMember(app, before, 'developer');
      expect((await commitAs(before, old.token, 'dev.txt')).status).toBe(403);
    } finally {
      await setProtection(2);
    }
  });

  it('0: the default branch is not protected: developers push and force push, nobody deletes it', async () => {
    await setProtection(0);
    try {
      const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
      const developer = await makeProjectMember(app, project, 'developer');
      expect((await commitAs(project, developer.token, 'dev.txt')).status).toBe(201);
      expect(await mainBranch(project)).toMatchObject({ protected: false, developers_can_push: false, can_push: true });
      expect((await pushAsDeveloper(project, developer.user.username, developer.token, true)).code).toBe(0);
      const deleted = await app.request(`/projects/${project.id}/repository/branches/main`, {
        method: 'DELETE',
        token: developer.token,
      });
      expect(deleted.status).toBe(400);
      expect(deleted.body).toEqual({ message: 'The default branch of a project cannot be deleted.' });
    } finally {
      await setProtection(2);
    }
  });
});
