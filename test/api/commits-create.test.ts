import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  makeProject,
  makeProjectMember,
  makeSampleProject,
  makeToken,
  makeUser,
  type Role,
} from '../support/factories.js';

const exec = promisify(execFile);
let app: TestApp;
let owner: User;

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8', maxBuffer: 1 << 26 }))
    .stdout;

/** path → "mode blob-content" for every file of a commit, read by native git. */
async function treeOf(gitDir: string, rev: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const line of (await git(gitDir, 'ls-tree', '-r', '-z', rev)).split('\0')) {
    if (!line) continue;
    const [meta, file] = line.split('\t') as [string, string];
    const [mode, , oid] = meta.split(' ') as [string, string, string];
    out[file] = `${mode} ${mode === '120000' ? 'link' : (await git(gitDir, 'cat-file', 'blob', oid)).length}`;
  }
  return out;
}

const member = (project: Project, role: Role) => makeProjectMember(app, project, role);

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
});
afterAll(async () => {
  await app?.close();
});

describe('POST /projects/:id/repository/commits', () => {
  it('applies create, update, delete, move and chmod as one commit, as git sees it', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'multi' });
    const { token } = await member(project, 'maintainer');
    const before = await treeOf(gitDir, 'main');
    const parent = (await git(gitDir, 'rev-parse', 'main')).trim();
    const res = await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token,
      body: {
        branch: 'main',
        commit_message: 'Many changes\n\nChangelog: changed',
        author_name: 'Release Bot',
        author_email: 'bot@example.com',
        actions: [
          { action: 'create', file_path: 'new/dir/file.txt', content: 'hello\n' },
          {
            action: 'create',
            file_path: '/bin/blob.bin',
            content: Buffer.from([0, 1, 2, 255]).toString('base64'),
            encoding: 'base64',
          },
          { action: 'update', file_path: 'README.md', content: 'rewritten\n' },
          { action: 'delete', file_path: 'VERSION' },
          { action: 'move', file_path: 'docs/moved.md', previous_path: 'docs/guide/intro.md' },
          { action: 'chmod', file_path: 'new/dir/file.txt', execute_filemode: true },
        ],
      },
    });
    expect(res.status).toBe(201);
    const head = (await git(gitDir, 'rev-parse', 'main')).trim();
    expect(res.body).toMatchObject({
      id: head,
      short_id: head.slice(0, 8),
      parent_ids: [parent],
      title: 'Many changes',
      message: 'Many changes\n\nChangelog: changed',
      author_name: 'Release Bot',
      author_email: 'bot@example.com',
      project_id: project.id,
      status: null,
      last_pipeline: null,
    });
    const numstat = (await git(gitDir, 'diff', '--numstat', '--no-renames', parent, head)).trim().split('\n');
    const sum = (i: number) => numstat.reduce((n, l) => n + (Number(l.split('\t')[i]) || 0), 0);
    expect(res.body.stats).toEqual({ additions: sum(0), deletions: sum(1), total: sum(0) + sum(1) });

    const expected = { ...before };
    expected['new/dir/file.txt'] = '100755 6';
    expected['bin/blob.bin'] = '100644 4';
    expected['README.md'] = `${before['README.md']?.split(' ')[0]} 10`;
    delete expected.VERSION;
    expected['docs/moved.md'] = before['docs/guide/intro.md'] as string;
    delete expected['docs/guide/intro.md'];
    expect(await treeOf(gitDir, 'main')).toEqual(expected);
    const blob = await exec('git', [`--git-dir=${gitDir}`, 'cat-file', 'blob', 'main:bin/blob.bin'], {
      env: gitEnvironment(),
      encoding: 'buffer',
    });
    expect(blob.stdout).toEqual(Buffer.from([0, 1, 2, 255]));
    expect((await git(gitDir, 'log', '-1', '--format=%cn <%ce>', 'main')).trim()).not.toBe(
      'Release Bot <bot@example.com>',
    );
  });

  it('records pushed events and activity as a push would: created for a new branch, pushed for an existing one', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'eventful' });
    const { user, token } = await member(project, 'developer');
    const post = (branch: string, extra: Record<string, unknown> = {}) =>
      app.request(`/projects/${project.id}/repository/commits`, {
        method: 'POST',
        token,
        body: {
          branch,
          commit_message: `Work on ${branch}\n\nMore words`,
          actions: [{ action: 'create', file_path: `f${Math.random()}.txt`, content: 'x' }],
          ...extra,
        },
      });
    const main = (await git(gitDir, 'rev-parse', 'main')).trim();
    const first = await post('topic', { start_branch: 'main' });
    expect(first.status).toBe(201);
    const second = await post('topic');
    expect(second.status).toBe(201);
    const events = await app.deps.db
      .selectFrom('events')
      .selectAll()
      .where('project_id', '=', project.id)
      .where('action', '=', 'pushed')
      .orderBy('id')
      .execute();
    expect(events.map((e) => ({ author: e.author_id, data: e.push_data }))).toEqual([
      {
        author: user.id,
        data: expect.objectContaining({
          action: 'created',
          ref_type: 'branch',
          ref: 'topic',
          commit_from: null,
          commit_to: first.body.id,
          commit_count: 1,
          commit_title: 'Work on topic',
        }),
      },
      {
        author: user.id,
        data: expect.objectContaining({
          action: 'pushed',
          ref: 'topic',
          commit_from: first.body.id,
          commit_to: second.body.id,
          commit_count: 1,
        }),
      },
    ]);
    expect(first.body.parent_ids).toEqual([main]);
    const refreshed = await app.request(`/projects/${project.id}`, { token });
    expect(Date.parse(refreshed.body.last_activity_at)).toBe(app.clock.now().getTime());
  });

  it('creates branches from start_branch or start_sha, and refuses existing ones unless forced', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'branchy' });
    const { token } = await member(project, 'developer');
    const post = (body: Record<string, unknown>) =>
      app.request(`/projects/${project.id}/repository/commits`, {
        method: 'POST',
        token,
        body: {
          commit_message: 'c',
          actions: [{ action: 'create', file_path: `f${Math.random()}.txt`, content: 'x' }],
          ...body,
        },
      });
    const stable = (await git(gitDir, 'rev-parse', 'stable')).trim();
    const fromBranch = await post({ branch: 'topic', start_branch: 'stable' });
    expect(fromBranch.status).toBe(201);
    expect(fromBranch.body.parent_ids).toEqual([stable]);

    const exists = await post({ branch: 'topic', start_branch: 'stable' });
    expect(exists).toMatchObject({
      status: 400,
      body: { message: "A branch called 'topic' already exists. Switch to that branch in order to make changes" },
    });
    const forced = await post({ branch: 'topic', start_branch: 'stable', force: true });
    expect(forced.status).toBe(201);
    expect(forced.body.parent_ids).toEqual([stable]);

    const fromSha = await post({ branch: 'from-sha', start_sha: stable });
    expect(fromSha.status).toBe(201);
    expect((await post({ branch: 'nowhere', start_branch: 'no-such-branch' })).body).toEqual({
      message: 'You can only create or edit files when you are on a branch',
    });
    expect((await post({ branch: 'x1', start_sha: 'abc' })).body).toEqual({ message: "Invalid start_sha 'abc'" });
    expect((await post({ branch: 'x2', start_sha: '0'.repeat(40) })).body).toEqual({
      message: `Cannot find start_sha '${'0'.repeat(40)}'`,
    });
    expect((await post({ branch: 'x3', start_sha: stable, start_branch: 'main' })).status).toBe(400);
    expect((await post({ branch: 'bad..name', start_branch: 'main' })).body).toEqual({
      message: "Something went wrong when we tried to create 'bad..name' for you: Branch name is invalid",
    });
  });

  it('answers GitLab’s messages when actions do not fit the tree, and changes nothing', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'strict' });
    const { token } = await member(project, 'maintainer');
    const head = (await git(gitDir, 'rev-parse', 'main')).trim();
    const cases: [Record<string, unknown>, number, unknown][] = [
      [
        { action: 'create', file_path: 'README.md', content: 'x' },
        400,
        { message: 'A file with this name already exists' },
      ],
      [
        { action: 'update', file_path: 'nope.txt', content: 'x' },
        400,
        { message: "A file with this name doesn't exist" },
      ],
      [{ action: 'delete', file_path: 'nope.txt' }, 400, { message: "A file with this name doesn't exist" }],
      [
        { action: 'move', file_path: 'a.txt', previous_path: 'nope.txt' },
        400,
        { message: "A file with this name doesn't exist" },
      ],
      [
        { action: 'create', file_path: 'docs', content: 'x' },
        400,
        { message: 'A directory with this name already exists' },
      ],
      [
        { action: 'create', file_path: '../escape.txt', content: 'x' },
        400,
        { message: 'Path cannot include directory traversal' },
      ],
      [
        { action: 'create', file_path: 'a/../../b', content: 'x' },
        400,
        { message: 'Path cannot include directory traversal' },
      ],
      [
        { action: 'update', file_path: 'README.md', content: 'x', last_commit_id: '0'.repeat(40) },
        400,
        { message: 'The file has changed since you started editing it: README.md' },
      ],
      [{ action: 'explode', file_path: 'x' }, 400, { error: 'actions[0][action] does not have a valid value' }],
      [{ action: 'create', file_path: 'x' }, 400, { error: 'actions[0][content] is missing' }],
    ];
    for (const [act, status, body] of cases) {
      const res = await app.request(`/projects/${project.id}/repository/commits`, {
        method: 'POST',
        token,
        body: { branch: 'main', commit_message: 'm', actions: [act] },
      });
      expect({ act, status: res.status, body: res.body }).toEqual({ act, status, body });
    }
    const missing = await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token,
      body: { commit_message: 'm', actions: [] },
    });
    expect(missing.status).toBe(400);
    expect((await git(gitDir, 'rev-parse', 'main')).trim()).toBe(head);
    expect((await exec('git', [`--git-dir=${gitDir}`, 'fsck'], { env: gitEnvironment() })).stderr).toBe('');
  });

  it('follows roles: developers commit to other branches, only maintainers to the default branch', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'roles', visibility: 'private' });
    const body = (branch: string) => ({
      branch,
      start_branch: 'main',
      commit_message: 'm',
      actions: [{ action: 'create', file_path: `${branch}.txt`, content: 'x' }],
    });
    const url = `/projects/${project.id}/repository/commits`;
    const dev = await member(project, 'developer');
    expect((await app.request(url, { method: 'POST', token: dev.token, body: body('main') })).body).toEqual({
      message: '403 Forbidden - You are not allowed to push into this branch',
    });
    expect((await app.request(url, { method: 'POST', token: dev.token, body: body('dev-branch') })).status).toBe(201);
    const reporter = await member(project, 'reporter');
    expect((await app.request(url, { method: 'POST', token: reporter.token, body: body('r') })).status).toBe(403);
    const stranger = await makeToken(app, await makeUser(app));
    expect((await app.request(url, { method: 'POST', token: stranger, body: body('s') })).status).toBe(404);
    expect((await app.request(url, { method: 'POST', body: body('a') })).status).toBe(401);
    await app.deps.db
      .updateTable('projects')
      .set({ repository_read_only: true })
      .where('id', '=', project.id)
      .execute();
    expect((await app.request(url, { method: 'POST', token: dev.token, body: body('ro') })).body).toEqual({
      message: '403 Forbidden - The repository is temporarily read-only. Please try again later.',
    });
  });

  it('never loses a commit when writers race on one branch', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'race' });
    const { token } = await member(project, 'maintainer');
    const start = (await git(gitDir, 'rev-parse', 'main')).trim();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        app.request(`/projects/${project.id}/repository/commits`, {
          method: 'POST',
          token,
          body: {
            branch: 'main',
            commit_message: `racer ${i}`,
            actions: [{ action: 'create', file_path: `racer-${i}.txt`, content: `${i}` }],
          },
        }),
      ),
    );
    const won = results.filter((r) => r.status === 201);
    const lost = results.filter((r) => r.status !== 201);
    expect(won.length).toBeGreaterThan(0);
    for (const r of lost) expect(r.body).toEqual({ message: 'Could not update main. Please refresh and try again.' });
    const history = (await git(gitDir, 'rev-list', `${start}..main`)).trim().split('\n').filter(Boolean);
    expect(history.sort()).toEqual(won.map((r) => r.body.id).sort());
  });

  it('makes the first commit of an empty repository, through @gitbeaker/rest', async () => {
    const project = await makeProject(app, owner, { path: 'empty' });
    const token = await makeToken(app, owner, ['api']);
    const client = new Gitlab({ host: app.baseUrl, token });
    const commit = await client.Commits.create(project.id, 'main', 'First', [
      { action: 'create', filePath: 'hello.txt', content: 'hello' },
    ]);
    const gitDir = app.deps.storages.repositoryPath(project.repository_storage, project.id);
    expect(commit.id).toBe((await git(gitDir, 'rev-parse', 'main')).trim());
    expect(commit.parent_ids).toEqual([]);
    expect(await git(gitDir, 'cat-file', 'blob', 'main:hello.txt')).toBe('hello');
  });
});
