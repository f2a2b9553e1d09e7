import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  addMember,
  makeProjectMember,
  makeSampleProject,
  makeToken,
  makeUser,
  ROLES,
  type Role,
} from '../support/factories.js';
import { type GitCredentials, remoteUrl, runGitClient } from '../support/git-client.js';

let app: TestApp;
let scratch: string;
let owner: User;
let publicProject: Project;
let publicGitDir: string;
let secret: Project;
let secretGitDir: string;
let counter = 0;

const git = (args: string[], cwd = scratch) => runGitClient(args, cwd);
const remote = (project: Project, credentials?: GitCredentials) => remoteUrl(app.baseUrl, project, credentials);

const refsOf = async (gitDir: string) =>
  (await git([`--git-dir=${gitDir}`, 'for-each-ref', '--format=%(objectname) %(refname)'])).stdout;

async function member(project: Project, role: Role, scopes = ['api']) {
  const { user, token } = await makeProjectMember(app, project, role, scopes);
  return { user, credentials: { login: user.username, password: token } };
}

async function cloneOf(project: Project, credentials?: { login: string; password: string }, extra: string[] = []) {
  const dir = path.join(scratch, `clone-${++counter}`);
  const result = await git([...extra, 'clone', '--quiet', '--mirror', remote(project, credentials), dir]);
  return { ...result, dir };
}

beforeAll(async () => {
  app = await startTestApp();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-smart-http-'));
  owner = await makeUser(app);
  ({ project: publicProject, gitDir: publicGitDir } = await makeSampleProject(app, owner, { path: 'open' }));
  ({ project: secret, gitDir: secretGitDir } = await makeSampleProject(app, owner, {
    path: 'secret',
    visibility: 'private',
  }));
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('git clone and fetch over HTTP', () => {
  it('clones a public project anonymously, every ref and object as stored (protocol v2 and v0)', async () => {
    for (const extra of [[], ['-c', 'protocol.version=0']]) {
      const { code, stderr, dir } = await cloneOf(publicProject, undefined, extra);
      expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
      expect(await refsOf(dir)).toBe(await refsOf(publicGitDir));
      expect((await git([`--git-dir=${dir}`, 'fsck', '--strict'])).code).toBe(0);
    }
  });

  it('asks anonymous callers of private projects for credentials, and follows the roles', async () => {
    const anonymous = await cloneOf(secret);
    expect(anonymous.code).not.toBe(0);
    expect(anonymous.stderr).toMatch(/Authentication failed|could not read Username/);

    const reporter = await member(secret, 'reporter');
    const ok = await cloneOf(secret, reporter.credentials);
    expect(ok.code).toBe(0);
    expect(await refsOf(ok.dir)).toBe(await refsOf(secretGitDir));

    const guest = await member(secret, 'guest');
    const denied = await cloneOf(secret, guest.credentials);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain('You are not allowed to download code from this project.');

    const outsider = await makeUser(app);
    const hidden = await cloneOf(secret, {
      login: outsider.username,
      password: await makeToken(app, outsider, ['api']),
    });
    expect(hidden.stderr).toContain(
      "The project you were looking for could not be found or you don't have permission to view it.",
    );

    const wrong = await cloneOf(secret, { login: reporter.user.username, password: 'glpat-not-a-real-token' });
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toMatch(/HTTP Basic: Access denied|Authentication failed/);
  });

  it('accepts a user’s password, and tokens with read_repository but not read_api', async () => {
    const password = 'correct-horse-battery-staple';
    const user = await makeUser(app, { password });
    await addMember(app, { type: 'project', id: secret.id }, user, ROLES.reporter);
    expect((await cloneOf(secret, { login: user.username, password })).code).toBe(0);
    expect((await cloneOf(secret, { login: user.username, password: 'wrong-password' })).code).not.toBe(0);
    const readRepo = await makeToken(app, user, ['read_repository']);
    expect((await cloneOf(secret, { login: 'anything', password: readRepo })).code).toBe(0);
    const readApi = await makeToken(app, user, ['read_api']);
    expect((await cloneOf(secret, { login: user.username, password: readApi })).code).not.toBe(0);

    // With two-factor authentication on, the password alone is refused; a token still works.
    await app.deps.db.updateTable('users').set({ two_factor_enabled: true }).where('id', '=', user.id).execute();
    const refused = await cloneOf(secret, { login: user.username, password });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("you're required to use a token instead of a password");
    expect((await cloneOf(secret, { login: user.username, password: readRepo })).code).toBe(0);
  });

  it('answers the raw protocol as git http-backend does', async () => {
    const res = await fetch(new URL(`/${publicProject.full_path}.git/info/refs?service=git-upload-pack`, app.baseUrl));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-git-upload-pack-advertisement');
    const body = await res.text();
    expect(body.startsWith('001e# service=git-upload-pack\n0000')).toBe(true);
    const dumb = await fetch(new URL(`/${publicProject.full_path}.git/info/refs`, app.baseUrl));
    expect(dumb.status).toBe(403);
    const traversal = await fetch(
      new URL(`/${publicProject.namespace_id}/../x.git/info/refs?service=git-upload-pack`, app.baseUrl),
    );
    expect(traversal.status).not.toBe(200);
  });
});

describe('git push over HTTP', () => {
  async function workClone(project: Project, credentials: { login: string; password: string }) {
    const dir = path.join(scratch, `work-${++counter}`);
    const result = await git(['clone', '--quiet', remote(project, credentials), dir]);
    expect(result.code).toBe(0);
    return dir;
  }
  async function commitIn(dir: string, file: string, content: string) {
    await fs.writeFile(path.join(dir, file), content);
    await git(['add', file], dir);
    await git(['commit', '--quiet', '-m', `Change ${file}`], dir);
    return (await git(['rev-parse', 'HEAD'], dir)).stdout.trim();
  }

  it('lets developers push branches and tags, records push events, and protects the default branch', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `pushy${++counter}` });
    const dev = await member(project, 'developer');
    const dir = await workClone(project, dev.credentials);

    await git(['checkout', '--quiet', '-b', 'topic'], dir);
    const topic = await commitIn(dir, 'topic.txt', 'topic\n');
    const pushed = await git(['push', '--quiet', 'origin', 'topic'], dir);
    expect(pushed).toMatchObject({ code: 0 });
    expect((await git([`--git-dir=${gitDir}`, 'rev-parse', 'refs/heads/topic'])).stdout.trim()).toBe(topic);

    const events = await app.deps.db
      .selectFrom('events')
      .selectAll()
      .where('project_id', '=', project.id)
      .where('action', '=', 'pushed')
      .execute();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ action: 'pushed', author_id: dev.user.id });
    expect(events[0]?.push_data).toMatchObject({
      action: 'created',
      ref_type: 'branch',
      ref: 'topic',
      commit_from: null,
      commit_to: topic,
      commit_count: 1,
      commit_title: 'Change topic.txt',
    });

    // Tags are not protected: a developer moves and deletes an existing tag (GitLab's admin_tag).
    const tagBefore = (await git([`--git-dir=${gitDir}`, 'rev-parse', 'refs/tags/v1.0.0'])).stdout.trim();
    await git(['fetch', '--quiet', '--tags', 'origin'], dir);
    expect((await git(['tag', '-f', 'v1.0.0', 'topic'], dir)).code).toBe(0);
    expect(await git(['push', '--quiet', '--force', 'origin', 'refs/tags/v1.0.0'], dir)).toMatchObject({ code: 0 });
    expect((await git([`--git-dir=${gitDir}`, 'rev-parse', 'refs/tags/v1.0.0'])).stdout.trim()).toBe(topic);
    expect(tagBefore).not.toBe(topic);
    expect(await git(['push', '--quiet', 'origin', ':refs/tags/v1.0.0'], dir)).toMatchObject({ code: 0 });
    expect((await git([`--git-dir=${gitDir}`, 'rev-parse', '--verify', '--quiet', 'refs/tags/v1.0.0'])).code).not.toBe(
      0,
    );

    // The default branch is protected: developers cannot push to it or delete it.
    const mainBefore = (await git([`--git-dir=${gitDir}`, 'rev-parse', 'main'])).stdout.trim();
    const toMain = await git(['push', 'origin', 'topic:main'], dir);
    expect(toMain.code).not.toBe(0);
    expect(toMain.stderr).toContain('You are not allowed to push code to protected branches on this project.');
    const del = await git(['push', 'origin', ':main'], dir);
    expect(del.code).not.toBe(0);
    expect(del.stderr).toContain('The default branch of a project cannot be deleted.');
    expect((await git([`--git-dir=${gitDir}`, 'rev-parse', 'main'])).stdout.trim()).toBe(mainBefore);

    // Maintainers can push to it, but nobody force-pushes it.
    const maintainer = await member(project, 'maintainer');
    const mdir = await workClone(project, maintainer.credentials);
    const ahead = await commitIn(mdir, 'release.txt', 'v2\n');
    expect((await git(['push', '--quiet', 'origin', 'main'], mdir)).code).toBe(0);
    expect((await git([`--git-dir=${gitDir}`, 'rev-parse', 'main'])).stdout.trim()).toBe(ahead);
    await git(['reset', '--quiet', '--hard', 'HEAD~2'], mdir);
    const force = await git(['push', '--force', 'origin', 'main'], mdir);
    expect(force.code).not.toBe(0);
    expect(force.stderr).toContain('You are not allowed to force push code to a protected branch on this project.');
    expect((await git([`--git-dir=${gitDir}`, 'rev-parse', 'main'])).stdout.trim()).toBe(ahead);
    expect((await git([`--git-dir=${gitDir}`, 'fsck'])).code).toBe(0);
  });

  it('never loses a commit when a push and an API commit race on one branch', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `racing${++counter}` });
    const { user, token } = await makeProjectMember(app, project, 'maintainer', ['api']);
    const dir = await workClone(project, { login: user.username, password: token });
    const start = (await git([`--git-dir=${gitDir}`, 'rev-parse', 'main'])).stdout.trim();
    const landed: string[] = [];
    let pushesLost = 0;
    let commitsLost = 0;
    for (let round = 0; round < 6; round++) {
      await git(['fetch', '--quiet', 'origin'], dir);
      await git(['reset', '--quiet', '--hard', 'origin/main'], dir);
      const local = await commitIn(dir, `pushed-${round}.txt`, `${round}\n`);
      const [push, api] = await Promise.all([
        git(['push', 'origin', 'main'], dir),
        app.request(`/projects/${project.id}/repository/commits`, {
          method: 'POST',
          token,
          body: {
            branch: 'main',
            commit_message: `API ${round}`,
            actions: [{ action: 'create', file_path: `api-${round}.txt`, content: `${round}` }],
          },
        }),
      ]);
      if (push.code === 0) landed.push(local);
      else {
        pushesLost += 1;
        expect(push.stderr).toMatch(/rejected|failed to update ref|cannot lock ref/);
      }
      if (api.status === 201) landed.push(api.body.id);
      else {
        commitsLost += 1;
        expect(api.body).toEqual({ message: 'Could not update main. Please refresh and try again.' });
      }
      expect(push.code === 0 || api.status === 201).toBe(true);
    }
    // Every writer told it succeeded is on main, and nothing else is.
    const history = (await git([`--git-dir=${gitDir}`, 'rev-list', `${start}..main`])).stdout.trim().split('\n');
    expect(history.sort()).toEqual(landed.sort());
    expect(landed.length + pushesLost + commitsLost).toBe(12);
    expect((await git([`--git-dir=${gitDir}`, 'fsck', '--strict'])).code).toBe(0);
  });

  it('lets admins push, and refuses guests and users who are not members', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `roles${++counter}` });
    const dir = await workClone(project, (await member(project, 'developer')).credentials);
    await git(['checkout', '--quiet', '-b', 'by-role'], dir);
    const tip = await commitIn(dir, 'role.txt', 'role\n');
    const guest = await member(project, 'guest');
    const stranger = await makeUser(app);
    const strangerToken = await makeToken(app, stranger, ['api']);
    for (const credentials of [guest.credentials, { login: stranger.username, password: strangerToken }]) {
      const refused = await git(['push', remote(project, credentials), 'by-role'], dir);
      expect(refused.code, credentials.login).not.toBe(0);
    }
    expect(
      (await git([`--git-dir=${gitDir}`, 'rev-parse', '--verify', '--quiet', 'refs/heads/by-role'])).code,
    ).not.toBe(0);
    const admin = await makeUser(app, { admin: true });
    const adminToken = await makeToken(app, admin, ['api']);
    const pushed = await git(
      ['push', '--quiet', remote(project, { login: admin.username, password: adminToken }), 'by-role'],
      dir,
    );
    expect(pushed).toMatchObject({ code: 0 });
    expect((await git([`--git-dir=${gitDir}`, 'rev-parse', 'refs/heads/by-role'])).stdout.trim()).toBe(tip);
  });

  it('refuses pushes from reporters, read-only tokens, anonymous callers and to read-only repositories', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `guarded${++counter}` });
    const before = await refsOf(gitDir);
    const reporter = await member(project, 'reporter');
    const dir = await workClone(project, reporter.credentials);
    await git(['checkout', '--quiet', '-b', 'nope'], dir);
    await commitIn(dir, 'x.txt', 'x\n');
    const asReporter = await git(['push', 'origin', 'nope'], dir);
    expect(asReporter.stderr).toContain('You are not allowed to push code to this project.');

    const dev = await member(project, 'developer', ['read_repository']);
    const readOnlyToken = await git(['push', remote(project, dev.credentials), 'nope'], dir);
    expect(readOnlyToken.code).not.toBe(0);
    const anonymous = await git(['push', remote(project), 'nope'], dir);
    expect(anonymous.code).not.toBe(0);

    const writer = await member(project, 'developer');
    await app.deps.db
      .updateTable('projects')
      .set({ repository_read_only: true })
      .where('id', '=', project.id)
      .execute();
    const readOnly = await git(['push', remote(project, writer.credentials), 'nope'], dir);
    expect(readOnly.stderr).toContain('The repository is temporarily read-only. Please try again later.');
    expect(await refsOf(gitDir)).toBe(before);
  });
});
