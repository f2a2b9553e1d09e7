import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import { makeProjectMember, makeSampleProject, makeUser } from '../support/factories.js';

/**
 * Issue 4, item 4: writes are safe under concurrency and against bad input. Every check is made
 * with native git on the repository itself.
 */
const exec = promisify(execFile);
let app: TestApp;
let owner: User;

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout;
const refsOf = (gitDir: string) => git(gitDir, 'for-each-ref', '--format=%(objectname) %(refname)');
const tipOf = async (gitDir: string, ref: string) => {
  const out = await git(gitDir, 'for-each-ref', '--format=%(objectname)', ref);
  return out.trim() || null;
};
/** Errors and warnings of `git fsck` (exit status non-zero rejects); dangling objects left by losers of a race are not errors. */
const fsck = async (gitDir: string) => {
  const { stdout, stderr } = await exec('git', [`--git-dir=${gitDir}`, 'fsck', '--full', '--strict', '--no-dangling'], {
    env: gitEnvironment(),
    encoding: 'utf8',
  });
  return `${stdout}${stderr}`;
};

async function maintainerOf(project: Project) {
  return (await makeProjectMember(app, project, 'maintainer')).token;
}

const statuses = (responses: TestResponse[]) => responses.map((r) => r.status).sort();
const pushEvents = (project: Project) =>
  app.deps.db
    .selectFrom('events')
    .selectAll()
    .where('project_id', '=', project.id)
    .where('action', '=', 'pushed')
    .execute();

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
});
afterAll(async () => {
  await app?.close();
});

describe('concurrent ref writes', () => {
  it('lets exactly one of many concurrent creators of a branch win; the branch is the winner’s', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'race-create' });
    const token = await maintainerOf(project);
    const commits = (await git(gitDir, 'rev-list', '--max-count=8', 'main')).trim().split('\n');
    expect(commits).toHaveLength(8);
    const results = await Promise.all(
      commits.map((ref) =>
        app.request(`/projects/${project.id}/repository/branches`, {
          method: 'POST',
          token,
          body: { branch: 'contested', ref },
        }),
      ),
    );
    const won = results.filter((r) => r.status === 201);
    expect(won).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 201)) {
      expect({ status: r.status, body: r.body }).toEqual({ status: 400, body: { message: 'Branch already exists' } });
    }
    expect(await tipOf(gitDir, 'refs/heads/contested')).toBe(won[0]?.body.commit.id);
    expect(await pushEvents(project)).toHaveLength(1);
  });

  it('lets exactly one of many concurrent creators of a tag win, and never moves it', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'race-tag' });
    const token = await maintainerOf(project);
    const commits = (await git(gitDir, 'rev-list', '--max-count=8', 'main')).trim().split('\n');
    const results = await Promise.all(
      commits.map((ref, i) =>
        app.request(`/projects/${project.id}/repository/tags`, {
          method: 'POST',
          token,
          body: { tag_name: 'v9', ref, ...(i % 2 ? { message: `attempt ${i}` } : {}) },
        }),
      ),
    );
    const won = results.filter((r) => r.status === 201);
    expect(won).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 201)) {
      expect({ status: r.status, body: r.body }).toEqual({ status: 400, body: { message: 'Tag v9 already exists' } });
    }
    expect(await tipOf(gitDir, 'refs/tags/v9')).toBe(won[0]?.body.target);
    expect((await git(gitDir, 'rev-parse', 'refs/tags/v9^{commit}')).trim()).toBe(won[0]?.body.commit.id);
  });

  it('deletes a branch once when many delete it at the same time; the others get 404', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'race-delete' });
    const token = await maintainerOf(project);
    const results = await Promise.all(
      Array.from({ length: 6 }, () =>
        app.request(`/projects/${project.id}/repository/branches/stable`, { method: 'DELETE', token }),
      ),
    );
    expect(statuses(results)).toEqual([204, 404, 404, 404, 404, 404]);
    for (const r of results.filter((r) => r.status === 404))
      expect(r.body).toEqual({ message: '404 Branch Not Found' });
    expect(await tipOf(gitDir, 'refs/heads/stable')).toBeNull();
    expect(await pushEvents(project)).toHaveLength(1);
  });

  it('loses no acknowledged commit when commits race a deletion of their branch', async () => {
    for (let round = 0; round < 6; round++) {
      const { project, gitDir } = await makeSampleProject(app, owner, { path: `race-mixed-${round}` });
      const token = await maintainerOf(project);
      const url = `/projects/${project.id}/repository`;
      const commit = (i: number) =>
        app.request(`${url}/commits`, {
          method: 'POST',
          token,
          body: {
            branch: 'hot',
            commit_message: `writer ${i}`,
            actions: [{ action: 'create', file_path: `w${i}.txt`, content: `${i}` }],
          },
        });
      await app.request(`${url}/branches`, { method: 'POST', token, body: { branch: 'hot', ref: 'main' } });
      const start = await tipOf(gitDir, 'refs/heads/hot');
      // Three writers commit in a loop while the deletion lands somewhere in the middle.
      const writes: TestResponse[] = [];
      const writer = async (w: number) => {
        for (let i = 0; i < 6; i++) {
          const res = await commit(w * 10 + i);
          writes.push(res);
          if (res.status !== 201) return;
        }
      };
      const [deletion] = await Promise.all([
        new Promise<TestResponse>((resolve) =>
          setTimeout(() => resolve(app.request(`${url}/branches/hot`, { method: 'DELETE', token })), 30 + round * 60),
        ),
        writer(0),
        writer(1),
        writer(2),
      ]);
      if (!deletion) throw new Error('no deletion response');
      const acknowledged = writes.filter((w) => w.status === 201).map((w) => w.body.id as string);
      for (const w of writes.filter((w) => w.status !== 201)) {
        expect([
          { message: 'Could not update hot. Please refresh and try again.' },
          { message: 'You can only create or edit files when you are on a branch' },
        ]).toContainEqual(w.body);
        expect(w.status).toBe(400);
      }
      // What the branch finally holds, or what the deletion removed having seen it.
      let last: string | null;
      if (deletion.status === 204) {
        expect(await tipOf(gitDir, 'refs/heads/hot')).toBeNull();
        const data = (await pushEvents(project)).map(
          (e) => e.push_data as { action: string; ref: string; commit_from: string },
        );
        last = data.find((d) => d.action === 'removed' && d.ref === 'hot')?.commit_from ?? null;
      } else {
        expect({ status: deletion.status, body: deletion.body }).toEqual({
          status: 400,
          body: { message: 'Failed to remove branch' },
        });
        last = await tipOf(gitDir, 'refs/heads/hot');
      }
      expect(last).not.toBeNull();
      const history = (await git(gitDir, 'rev-list', `${start}..${last}`)).trim().split('\n').filter(Boolean);
      expect(history.sort()).toEqual([...acknowledged].sort());
      expect(await fsck(gitDir)).toBe('');
    }
  });
});

describe('bad input changes nothing', () => {
  it('refuses ref names git forbids for branches and tags, leaving every ref as it was', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'bad-refs' });
    const token = await maintainerOf(project);
    const before = await refsOf(gitDir);
    const names = [
      'a..b',
      'a.lock',
      'dir/a.lock',
      '-x',
      '--force',
      '@{',
      'a@{u}',
      'trailing/',
      '/leading',
      'has space',
    ];
    names.push('tab\there', 'a~', 'a^{}', 'a:b', 'a?', 'a*', 'a[', 'back\\slash', '.dot', 'x/.dot', 'end.', '@');
    for (const name of names) {
      const branch = await app.request(`/projects/${project.id}/repository/branches`, {
        method: 'POST',
        token,
        body: { branch: name, ref: 'main' },
      });
      expect({ name, status: branch.status, body: branch.body }).toEqual({
        name,
        status: 400,
        body: { message: 'Branch name is invalid' },
      });
      const tag = await app.request(`/projects/${project.id}/repository/tags`, {
        method: 'POST',
        token,
        body: { tag_name: name, ref: 'main', message: 'm' },
      });
      expect({ name, status: tag.status, body: tag.body }).toEqual({
        name,
        status: 400,
        body: { message: 'Tag name invalid' },
      });
      const commit = await app.request(`/projects/${project.id}/repository/commits`, {
        method: 'POST',
        token,
        body: { branch: name, commit_message: 'm', actions: [{ action: 'create', file_path: 'f', content: 'x' }] },
      });
      expect({ name, status: commit.status }).toEqual({ name, status: 400 });
    }
    // Refs given as start points are never read as options or ranges.
    for (const ref of ['--all', '-p', 'main..stable', 'main@{1}', 'main:README.md', 'HEAD~999']) {
      const branch = await app.request(`/projects/${project.id}/repository/branches`, {
        method: 'POST',
        token,
        body: { branch: 'fresh', ref },
      });
      expect({ ref, status: branch.status, body: branch.body }).toEqual({
        ref,
        status: 400,
        body: { message: `Invalid reference name: ${ref}` },
      });
    }
    expect(await refsOf(gitDir)).toBe(before);
    expect(await fsck(gitDir)).toBe('');
  });

  it('refuses `..` in file paths through the commits and files APIs, writing nothing anywhere', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'bad-paths' });
    const token = await maintainerOf(project);
    const before = await refsOf(gitDir);
    const outside = path.join(path.dirname(gitDir), 'escape.txt');
    const actions = [
      { action: 'create', file_path: '../escape.txt', content: 'x' },
      { action: 'create', file_path: 'docs/../../escape.txt', content: 'x' },
      { action: 'create', file_path: 'docs/..', content: 'x' },
      { action: 'update', file_path: 'README.md/../../escape.txt', content: 'x' },
      { action: 'delete', file_path: '../README.md' },
      { action: 'move', file_path: 'moved.md', previous_path: '../README.md' },
      { action: 'move', file_path: '../moved.md', previous_path: 'README.md' },
      { action: 'chmod', file_path: 'bin/../../run.sh', execute_filemode: false },
    ];
    for (const action of actions) {
      const res = await app.request(`/projects/${project.id}/repository/commits`, {
        method: 'POST',
        token,
        body: { branch: 'main', commit_message: 'm', actions: [action] },
      });
      expect({ action, status: res.status }).toEqual({ action, status: 400 });
    }
    for (const file of ['..%2Fescape.txt', 'docs%2F..%2F..%2Fescape.txt', '%2E%2E%2Fescape.txt']) {
      for (const method of ['POST', 'PUT', 'DELETE']) {
        const res = await app.request(`/projects/${project.id}/repository/files/${file}`, {
          method,
          token,
          body: { branch: 'main', commit_message: 'm', content: 'x' },
        });
        expect({ file, method, status: res.status }).toEqual({ file, method, status: 400 });
      }
    }
    expect(await refsOf(gitDir)).toBe(before);
    expect(fs.existsSync(outside)).toBe(false);
    expect(fs.existsSync(path.join(gitDir, 'escape.txt'))).toBe(false);
  });

  it('answers bodies over the limit with 413, never 500, and writes nothing', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'huge-bodies' });
    const token = await maintainerOf(project);
    const before = await refsOf(gitDir);
    const huge = 'A'.repeat(21 * 1024 * 1024);
    const json = await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token,
      body: {
        branch: 'main',
        commit_message: 'too big',
        actions: [{ action: 'create', file_path: 'big.txt', content: huge }],
      },
    });
    expect({ status: json.status, body: json.body }).toEqual({
      status: 413,
      body: { message: '413 Request Entity Too Large' },
    });
    const form = await app.request(`/projects/${project.id}/repository/branches`, {
      method: 'POST',
      token,
      body: new URLSearchParams({ branch: 'big', ref: 'main', padding: huge }),
    });
    expect({ status: form.status, body: form.body }).toEqual({
      status: 413,
      body: { message: '413 Request Entity Too Large' },
    });
    const tag = await app.request(`/projects/${project.id}/repository/tags`, {
      method: 'POST',
      token,
      body: { tag_name: 'big', ref: 'main', message: huge },
    });
    expect(tag.status).toBe(413);
    expect(await refsOf(gitDir)).toBe(before);
  });
});
