import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { useMergeBaseOption } from '../../src/git/pick.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makePersonas, makeProject, makeProjectMember, makeUser, type Persona } from '../support/factories.js';
import { RepoBuilder } from '../support/git-builder.js';
import { commitTree } from '../support/git-fixtures.js';

const exec = promisify(execFile);
let app: TestApp;
let owner: User;

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout;
const revParse = async (gitDir: string, rev: string) => (await git(gitDir, 'rev-parse', '--verify', rev)).trim();
/** Native git with `input` on stdin. */
function gitInput(gitDir: string, input: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const env = gitEnvironment({
      GIT_AUTHOR_NAME: 'Fixture',
      GIT_AUTHOR_EMAIL: 'fixture@example.com',
      GIT_COMMITTER_NAME: 'Fixture',
      GIT_COMMITTER_EMAIL: 'fixture@example.com',
    });
    const child = execFile('git', [`--git-dir=${gitDir}`, ...args], { env, encoding: 'utf8' }, (error, out) =>
      error ? reject(error) : resolve(out),
    );
    child.stdin?.end(input);
  });
}
const refsOf = (gitDir: string) => git(gitDir, 'for-each-ref', '--format=%(objectname) %(refname)');

const alice = { name: 'Alice Author', email: 'alice@example.com' };
const bob = { name: 'Bob Builder', email: 'bob@example.com' };

interface Sample {
  project: Project;
  gitDir: string;
  /** Commits by name: c1..c3 on main, f1 (new file) and f2 (conflicting) on feature. */
  c: Record<'c1' | 'c2' | 'c3' | 'f1' | 'f2', string>;
}

/**
 * main: c1 (a.txt 1..5, b.txt) → c2 (line 2 "two", Bob) → c3 (line 2 "deux");
 * feature from c2: f1 (adds c.txt) → f2 (line 2 "TWO!", conflicts with c3).
 * Tags: v1.0 at c2, v2.0 at c3 (annotated).
 */
async function makeSample(options: { visibility?: 'private' | 'public' } = {}): Promise<Sample> {
  const project = await makeProject(app, owner, { visibility: options.visibility ?? 'private' });
  const gitDir = app.deps.storages.repositoryPath(project.repository_storage, project.id);
  const b = await RepoBuilder.create();
  const c1 = await b.commit(alice, 'First commit\n\nWith a body.', { 'a.txt': '1\n2\n3\n4\n5\n', 'b.txt': 'b\n' });
  const c2 = await b.commit(bob, 'Say two', { 'a.txt': '1\ntwo\n3\n4\n5\n' });
  await b.git(alice, 'tag', 'v1.0');
  await b.git(alice, 'checkout', '--quiet', '-b', 'feature');
  const f1 = await b.commit(alice, 'Add c', { 'c.txt': 'c\n' });
  const f2 = await b.commit(alice, 'Shout two', { 'a.txt': '1\nTWO!\n3\n4\n5\n' });
  await b.git(alice, 'checkout', '--quiet', 'main');
  const c3 = await b.commit(alice, 'Say deux', { 'a.txt': '1\ndeux\n3\n4\n5\n' });
  await b.git(alice, 'tag', '-a', 'v2.0', '-m', 'Release 2');
  await b.install(gitDir);
  // Developers push to main unless a test protects it (the instance default protects it fully).
  await app.deps.db.deleteFrom('protected_branches').where('project_id', '=', project.id).execute();
  return { project, gitDir, c: { c1, c2, c3, f1, f2 } };
}

const client = (token: string) => new Gitlab({ host: app.baseUrl, token });

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
});
afterAll(async () => {
  await app?.close();
});

describe('GET /projects/:id/repository/files/:file_path/blame', () => {
  it('groups consecutive lines by commit, as GitLab does, with the file headers', async () => {
    const { project, c } = await makeSample();
    const dev = await makeProjectMember(app, project, 'developer');
    const blame = await client(dev.token).RepositoryFiles.allFileBlames(project.id, 'a.txt', 'main');
    expect(blame.map((g) => [g.commit.id, g.lines])).toEqual([
      [c.c1, ['1']],
      [c.c3, ['deux']],
      [c.c1, ['3', '4', '5']],
    ]);
    expect(blame[0]?.commit).toEqual({
      id: c.c1,
      parent_ids: [],
      message: 'First commit\n\nWith a body.\n',
      authored_date: '2023-11-14T23:13:20.000+00:00',
      author_name: 'Alice Author',
      author_email: 'alice@example.com',
      committed_date: '2023-11-14T23:13:20.000+00:00',
      committer_name: 'Alice Author',
      committer_email: 'alice@example.com',
    });
    // An older ref, and Bob's line.
    const old = await app.request(`/projects/${project.id}/repository/files/a.txt/blame?ref=v1.0`, {
      token: dev.token,
    });
    expect(old.status).toBe(200);
    expect(old.body.map((g: { commit: { id: string }; lines: string[] }) => [g.commit.id, g.lines])).toEqual([
      [c.c1, ['1']],
      [c.c2, ['two']],
      [c.c1, ['3', '4', '5']],
    ]);
    expect(old.headers.get('x-gitlab-file-name')).toBe('a.txt');
    expect(old.headers.get('x-gitlab-ref')).toBe('v1.0');
    expect(old.headers.get('x-gitlab-commit-id')).toBe(c.c2);
    expect(old.headers.get('x-gitlab-last-commit-id')).toBe(c.c2);
    expect(old.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('blames a range of lines; past the end is an empty list; a reversed range is a 400', async () => {
    const { project, c } = await makeSample();
    const dev = await makeProjectMember(app, project, 'developer');
    const ranged = await client(dev.token).RepositoryFiles.allFileBlames(project.id, 'a.txt', 'main', {
      range: { start: 2, end: 3 },
    });
    expect(ranged.map((g) => [g.commit.id, g.lines])).toEqual([
      [c.c3, ['deux']],
      [c.c1, ['3']],
    ]);
    const url = `/projects/${project.id}/repository/files/a.txt/blame`;
    const past = await app.request(`${url}?ref=main&range[start]=7&range[end]=9`, { token: dev.token });
    expect(past.status).toBe(200);
    expect(past.body).toEqual([]);
    const reversed = await app.request(`${url}?ref=main&range[start]=3&range[end]=2`, { token: dev.token });
    expect(reversed.status).toBe(400);
    expect(reversed.body).toEqual({ message: 'range[start] must be less than or equal to range[end]' });
    const zero = await app.request(`${url}?ref=main&range[start]=0&range[end]=2`, { token: dev.token });
    expect(zero.status).toBe(400);
    expect(zero.body).toEqual({ error: 'range[start] does not have a valid value' });
    const half = await app.request(`${url}?ref=main&range[start]=1`, { token: dev.token });
    expect(half.status).toBe(400);
    expect(half.body).toEqual({ error: 'range[end] is missing' });
  });

  it('answers bad input with GitLab 4xx: no ref, unknown ref or file, traversal', async () => {
    const { project } = await makeSample();
    const dev = await makeProjectMember(app, project, 'developer');
    const get = (p: string) => app.request(`/projects/${project.id}/repository/files/${p}`, { token: dev.token });
    expect((await get('a.txt/blame')).body).toEqual({ error: 'ref is missing' });
    expect((await get('a.txt/blame?ref=')).body).toEqual({ error: 'ref is empty' });
    const unknownRef = await get('a.txt/blame?ref=nope');
    expect([unknownRef.status, unknownRef.body]).toEqual([404, { message: '404 Commit Not Found' }]);
    const unknownFile = await get('zzz.txt/blame?ref=main');
    expect([unknownFile.status, unknownFile.body]).toEqual([404, { message: '404 File Not Found' }]);
    const traversal = await get('..%2F..%2Fetc%2Fpasswd/blame?ref=main');
    expect(traversal.status).toBe(400);
    expect(traversal.body).toEqual({ error: 'file_path should be a valid file path' });
    const option = await get('a.txt/blame?ref=--output%3D%2Ftmp%2Fx');
    expect(option.status).toBe(404);
  });

  it('follows read_code for every role on a private project, and HEAD answers headers only', async () => {
    const { project, c } = await makeSample();
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<Persona['name'], number> = {
      anonymous: 404,
      'non-member': 404,
      guest: 403,
      reporter: 200,
      developer: 200,
      maintainer: 200,
      owner: 200,
      admin: 200,
    };
    for (const persona of personas) {
      const res = await app.request(`/projects/${project.id}/repository/files/b.txt/blame?ref=main`, {
        token: persona.token,
      });
      expect(res.status, persona.name).toBe(expected[persona.name]);
      const head = await app.request(`/projects/${project.id}/repository/files/b.txt/blame?ref=main`, {
        token: persona.token,
        method: 'HEAD',
      });
      expect(head.status, persona.name).toBe(expected[persona.name]);
      if (head.status === 200) {
        expect(head.text).toBe('');
        expect(head.headers.get('x-gitlab-blob-id')).toBe(await revParse(gitDirOf(project), 'main:b.txt'));
        expect(head.headers.get('x-gitlab-last-commit-id')).toBe(c.c1);
      }
    }
  });
});

const gitDirOf = (project: Project) => app.deps.storages.repositoryPath(project.repository_storage, project.id);

describe('HEAD /projects/:id/repository/files/:file_path', () => {
  it("sets GitLab's X-Gitlab-* headers and no body, for those who may read the code", async () => {
    const { project, gitDir, c } = await makeSample();
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    for (const persona of personas) {
      const res = await app.request(`/projects/${project.id}/repository/files/a.txt?ref=feature`, {
        method: 'HEAD',
        token: persona.token,
      });
      const allowed = !['anonymous', 'non-member', 'guest'].includes(persona.name);
      expect(res.status, persona.name).toBe(allowed ? 200 : persona.name === 'guest' ? 403 : 404);
      if (!allowed) continue;
      expect(res.text).toBe('');
      const content = await git(gitDir, 'cat-file', 'blob', 'feature:a.txt');
      const { createHash } = await import('node:crypto');
      expect(Object.fromEntries([...res.headers].filter(([k]) => k.startsWith('x-gitlab-')))).toEqual({
        'x-gitlab-file-name': 'a.txt',
        'x-gitlab-file-path': 'a.txt',
        'x-gitlab-size': String(Buffer.byteLength(content)),
        'x-gitlab-encoding': 'base64',
        'x-gitlab-content-sha256': createHash('sha256').update(content).digest('hex'),
        'x-gitlab-ref': 'feature',
        'x-gitlab-blob-id': await revParse(gitDir, 'feature:a.txt'),
        'x-gitlab-commit-id': c.f2,
        'x-gitlab-last-commit-id': c.f2,
        'x-gitlab-execute-filemode': 'false',
      });
    }
    const missing = await app.request(`/projects/${project.id}/repository/files/nope.txt?ref=main`, {
      method: 'HEAD',
      token: personas.find((p) => p.name === 'admin')?.token,
    });
    expect(missing.status).toBe(404);
  });
});

describe('POST /projects/:id/repository/commits/:sha/cherry_pick', () => {
  it('picks a commit onto a branch in the bare repository, keeps its author and records the push', async () => {
    const { project, gitDir, c } = await makeSample();
    const dev = await makeProjectMember(app, project, 'developer');
    const picked = await client(dev.token).Commits.cherryPick(project.id, c.f1, 'main');
    expect(picked).toMatchObject({
      parent_ids: [c.c3],
      title: 'Add c',
      message: `Add c\n\n\n(cherry-picked from commit ${c.f1})`,
      author_name: 'Alice Author',
      author_email: 'alice@example.com',
      authored_date: '2023-11-15T01:13:20.000+00:00',
      committer_name: dev.user.name,
      committer_email: dev.user.email,
      web_url: `${app.baseUrl}/${project.full_path}/-/commit/${picked.id}`,
    });
    expect(await revParse(gitDir, 'main')).toBe(picked.id);
    expect(await git(gitDir, 'show', 'main:c.txt')).toBe('c\n');
    expect(await git(gitDir, 'show', 'main:a.txt')).toBe('1\ndeux\n3\n4\n5\n');
    await git(gitDir, 'fsck', '--no-dangling');
    const events = await app.deps.db
      .selectFrom('events')
      .selectAll()
      .where('project_id', '=', project.id)
      .where('action', '=', 'pushed')
      .execute();
    expect(events).toHaveLength(1);
    expect(events[0]?.author_id).toBe(dev.user.id);

    // Picking it again changes nothing: GitLab's "empty" refusal.
    const again = await app.request(`/projects/${project.id}/repository/commits/${c.f1}/cherry_pick`, {
      method: 'POST',
      token: dev.token,
      body: { branch: 'main' },
    });
    expect(again.status).toBe(400);
    expect(again.body).toEqual({
      message:
        "Commit cherry-pick failed: Can't perform this action automatically. It may have already been done, " +
        'or a more recent commit may have updated some of this content. Please perform this action locally.',
      error_code: 'empty',
    });
    expect(await revParse(gitDir, 'main')).toBe(picked.id);
  });

  it('refuses a conflicting pick with error_code conflict; dry runs answer without writing', async () => {
    const { project, gitDir, c } = await makeSample();
    const dev = await makeProjectMember(app, project, 'developer');
    const before = await refsOf(gitDir);
    const post = (sha: string, body: Record<string, unknown>) =>
      app.request(`/projects/${project.id}/repository/commits/${sha}/cherry_pick`, {
        method: 'POST',
        token: dev.token,
        body,
      });
    const conflict = await post(c.f2, { branch: 'main' });
    expect(conflict.status).toBe(400);
    expect(conflict.body.error_code).toBe('conflict');
    expect(conflict.body.message).toMatch(/^Commit cherry-pick failed: /);
    const dryConflict = await post(c.f2, { branch: 'main', dry_run: true });
    expect(dryConflict.status).toBe(400);
    expect(dryConflict.body).toMatchObject({ error_code: 'conflict', dry_run: 'error' });
    const dry = await post(c.f1, { branch: 'main', dry_run: 'true' });
    expect([dry.status, dry.body]).toEqual([200, { dry_run: 'success' }]);
    expect(await refsOf(gitDir)).toBe(before);

    const custom = await client(dev.token).Commits.cherryPick(project.id, 'feature~1', 'main', {
      message: 'Bring c over',
    });
    expect(custom.message).toBe('Bring c over');
    expect(custom.parent_ids).toEqual([c.c3]);
  });

  it('is for those who may push to the branch: every role, and protected branches', async () => {
    const { project, gitDir, c } = await makeSample();
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<Persona['name'], number> = {
      anonymous: 404,
      'non-member': 404,
      guest: 403,
      reporter: 403,
      developer: 201,
      maintainer: 201,
      owner: 201,
      admin: 201,
    };
    for (const persona of personas) {
      await git(gitDir, 'update-ref', 'refs/heads/pick-target', c.c3);
      const res = await app.request(`/projects/${project.id}/repository/commits/${c.f1}/cherry_pick`, {
        method: 'POST',
        token: persona.token,
        body: { branch: 'pick-target' },
      });
      expect(res.status, persona.name).toBe(expected[persona.name]);
      if (persona.name === 'reporter') {
        expect(res.body).toEqual({ message: '403 Forbidden - You are not allowed to push into this branch' });
      }
      const tip = await revParse(gitDir, 'pick-target');
      expect(tip === c.c3, persona.name).toBe(res.status !== 201);
    }
    // The default branch protected: maintainers only.
    const protect = await app.request(`/projects/${project.id}/protected_branches`, {
      method: 'POST',
      token: personas.find((p) => p.name === 'admin')?.token,
      body: { name: 'main', push_access_level: 40 },
    });
    expect(protect.status, protect.text).toBe(201);
    const dev = personas.find((p) => p.name === 'developer') as Persona;
    const maintainer = personas.find((p) => p.name === 'maintainer') as Persona;
    const onMain = (token: string | undefined) =>
      app.request(`/projects/${project.id}/repository/commits/${c.f1}/cherry_pick`, {
        method: 'POST',
        token,
        body: { branch: 'main' },
      });
    expect((await onMain(dev.token)).status).toBe(403);
    expect(await revParse(gitDir, 'main')).toBe(c.c3);
    expect((await onMain(maintainer.token)).status).toBe(201);
  });

  it('answers bad input with 4xx and changes nothing', async () => {
    const { project, gitDir, c } = await makeSample({ visibility: 'public' });
    const dev = await makeProjectMember(app, project, 'developer');
    const before = await refsOf(gitDir);
    const post = (sha: string, body: Record<string, unknown>) =>
      app.request(`/projects/${project.id}/repository/commits/${encodeURIComponent(sha)}/cherry_pick`, {
        method: 'POST',
        token: dev.token,
        body,
      });
    const cases: [string, Record<string, unknown>, number, unknown][] = [
      ['0'.repeat(40), { branch: 'main' }, 404, { message: '404 Commit Not Found' }],
      ['--output=/tmp/x', { branch: 'main' }, 404, { message: '404 Commit Not Found' }],
      [`${c.c1}..${c.c2}`, { branch: 'main' }, 404, { message: '404 Commit Not Found' }],
      [c.f1, { branch: 'no-such-branch' }, 404, { message: '404 Branch Not Found' }],
      [c.f1, { branch: '../../HEAD' }, 404, { message: '404 Branch Not Found' }],
      [c.f1, {}, 400, { error: 'branch is missing' }],
      [c.f1, { branch: ' ' }, 400, { error: 'branch is empty' }],
      [c.f1, { branch: 'main', dry_run: 'maybe' }, 400, { error: 'dry_run is invalid' }],
    ];
    for (const [sha, body, status, answer] of cases) {
      const res = await post(sha, body);
      expect([res.status, res.body], `${sha} ${JSON.stringify(body)}`).toEqual([status, answer]);
    }
    const other = await app.request(`/projects/${project.id + 9999}/repository/commits/${c.f1}/cherry_pick`, {
      method: 'POST',
      token: dev.token,
      body: { branch: 'main' },
    });
    expect([other.status, other.body]).toEqual([404, { message: '404 Project Not Found' }]);
    expect(await refsOf(gitDir)).toBe(before);
  });

  it('picks a merge commit against its first parent and a root commit onto an unrelated branch', async () => {
    const { project, gitDir, c } = await makeSample();
    const dev = await makeProjectMember(app, project, 'developer');
    // A merge of feature~1 (f1) into a branch at c2: its change against the first parent is c.txt.
    const mergeTree = (await git(gitDir, 'rev-parse', `${c.f1}^{tree}`)).trim();
    const merge = (
      await exec('git', [`--git-dir=${gitDir}`, 'commit-tree', mergeTree, '-p', c.c2, '-p', c.f1, '-m', 'Merge f1'], {
        env: gitEnvironment({
          GIT_AUTHOR_NAME: 'M',
          GIT_AUTHOR_EMAIL: 'm@example.com',
          GIT_COMMITTER_NAME: 'M',
          GIT_COMMITTER_EMAIL: 'm@example.com',
        }),
      })
    ).stdout.trim();
    const picked = await client(dev.token).Commits.cherryPick(project.id, merge, 'main');
    expect(await git(gitDir, 'ls-tree', '--name-only', picked.id)).toBe('a.txt\nb.txt\nc.txt\n');
    // The root commit c1 onto an unrelated branch holding only c.txt: its files are added.
    const onlyC = (
      await gitInput(gitDir, `100644 blob ${await revParse(gitDir, `${c.f1}:c.txt`)}\tc.txt\n`, 'mktree')
    ).trim();
    const orphan = (await gitInput(gitDir, 'Only c\n', 'commit-tree', onlyC)).trim();
    await git(gitDir, 'update-ref', 'refs/heads/only-c', orphan);
    const root = await client(dev.token).Commits.cherryPick(project.id, c.c1, 'only-c');
    expect(root.parent_ids).toEqual([orphan]);
    expect(await git(gitDir, 'ls-tree', '--name-only', root.id)).toBe('a.txt\nb.txt\nc.txt\n');
  });
});

describe('the merge on git without --merge-base', () => {
  it('gives the same trees as the merge this git runs by default', async () => {
    const trees: string[][] = [];
    for (const force of [false, undefined]) {
      useMergeBaseOption(force);
      try {
        const { project, gitDir, c } = await makeSample();
        const dev = await makeProjectMember(app, project, 'developer');
        const picked = await client(dev.token).Commits.cherryPick(project.id, c.f1, 'main');
        const reverted = await client(dev.token).Commits.revert(project.id, c.c3, 'main');
        trees.push([
          (await git(gitDir, 'rev-parse', `${picked.id}^{tree}`)).trim(),
          (await git(gitDir, 'rev-parse', `${reverted.id}^{tree}`)).trim(),
        ]);
      } finally {
        useMergeBaseOption(undefined);
      }
    }
    expect(trees[0]).toEqual(trees[1]);
    expect(new Set(trees[0]).size).toBe(2);
  });
});

describe('concurrent cherry-picks onto one branch', () => {
  it("each lands on the branch or is refused with GitLab's message: no commit is lost", async () => {
    const { project, gitDir, c } = await makeSample();
    const dev = await makeProjectMember(app, project, 'developer');
    const base = { 'a.txt': { content: '1\ndeux\n3\n4\n5\n' }, 'b.txt': { content: 'b\n' } };
    const picks: string[] = [];
    let parent = c.c3;
    for (let n = 1; n <= 4; n++) {
      const files: Record<string, { content: string }> = { ...base };
      for (let k = 1; k <= n; k++) files[`d${k}.txt`] = { content: `d${k}\n` };
      parent = await commitTree(gitDir, 'many', files, { parent, message: `Add d${n}` });
      picks.push(parent);
    }
    const answers = await Promise.all(
      picks.map((sha) =>
        app.request(`/projects/${project.id}/repository/commits/${sha}/cherry_pick`, {
          method: 'POST',
          token: dev.token,
          body: { branch: 'main' },
        }),
      ),
    );
    const landed: string[] = [];
    for (const answer of answers) {
      if (answer.status === 201) landed.push(answer.body.id);
      else
        expect([answer.status, answer.body]).toEqual([
          400,
          { message: 'Could not update main. Please refresh and try again.' },
        ]);
    }
    expect(landed.length).toBeGreaterThan(0);
    const history = (await git(gitDir, 'rev-list', `${c.c3}..main`)).trim().split('\n');
    expect(history.sort()).toEqual([...landed].sort());
  });
});

describe('cherry-pick and revert under the write rules of every repository write', () => {
  it('are refused while the repository is read-only and to read-only tokens; read_repository may blame', async () => {
    const { project, gitDir, c } = await makeSample();
    const dev = await makeProjectMember(app, project, 'developer');
    const readApi = await makeProjectMember(app, project, 'developer', ['read_api']);
    const readRepository = await makeProjectMember(app, project, 'developer', ['read_repository']);
    const before = await refsOf(gitDir);
    const pick = (token: string, dryRun = false) =>
      app.request(`/projects/${project.id}/repository/commits/${c.f1}/cherry_pick`, {
        method: 'POST',
        token,
        body: { branch: 'main', dry_run: dryRun },
      });
    expect((await pick(readApi.token)).status).toBe(403);
    expect((await pick(readRepository.token)).status).toBe(403);
    const blame = await app.request(`/projects/${project.id}/repository/files/a.txt/blame?ref=main`, {
      token: readRepository.token,
    });
    expect(blame.status).toBe(200);

    await app.deps.db
      .updateTable('projects')
      .set({ repository_read_only: true })
      .where('id', '=', project.id)
      .execute();
    const readOnly = await pick(dev.token);
    expect([readOnly.status, readOnly.body]).toEqual([
      403,
      { message: '403 Forbidden - The repository is temporarily read-only. Please try again later.' },
    ]);
    const revert = await app.request(`/projects/${project.id}/repository/commits/${c.c3}/revert`, {
      method: 'POST',
      token: dev.token,
      body: { branch: 'main' },
    });
    expect(revert.status).toBe(403);
    expect(await refsOf(gitDir)).toBe(before);
    await app.deps.db
      .updateTable('projects')
      .set({ repository_read_only: false })
      .where('id', '=', project.id)
      .execute();
    expect((await pick(dev.token, true)).body).toEqual({ dry_run: 'success' });
  });
});

describe('POST /projects/:id/repository/commits/:sha/revert', () => {
  it('reverts a commit with GitLab message, by the user; again is empty; a conflict is refused', async () => {
    const { project, gitDir, c } = await makeSample();
    const dev = await makeProjectMember(app, project, 'developer');
    const reverted = await client(dev.token).Commits.revert(project.id, c.c3, 'main');
    expect(reverted).toMatchObject({
      parent_ids: [c.c3],
      title: 'Revert "Say deux"',
      message: `Revert "Say deux"\n\nThis reverts commit ${c.c3}`,
      author_name: dev.user.name,
      committer_name: dev.user.name,
    });
    expect(await git(gitDir, 'show', 'main:a.txt')).toBe('1\ntwo\n3\n4\n5\n');
    const again = await app.request(`/projects/${project.id}/repository/commits/${c.c3}/revert`, {
      method: 'POST',
      token: dev.token,
      body: { branch: 'main' },
    });
    expect(again.status).toBe(400);
    expect(again.body).toMatchObject({ error_code: 'empty' });
    expect(again.body.message).toMatch(/^Commit revert failed: Can't perform this action automatically/);
    // Reverting c2 on feature's tip (which rewrote line 2 again) conflicts.
    const conflict = await app.request(`/projects/${project.id}/repository/commits/${c.c2}/revert`, {
      method: 'POST',
      token: dev.token,
      body: { branch: 'feature', dry_run: true },
    });
    expect([conflict.status, conflict.body.error_code, conflict.body.dry_run]).toEqual([400, 'conflict', 'error']);
    expect(await revParse(gitDir, 'feature')).toBe(c.f2);
    // A root commit reverted: its files go.
    await git(gitDir, 'update-ref', 'refs/heads/root-only', c.c1);
    const root = await client(dev.token).Commits.revert(project.id, c.c1, 'root-only');
    expect(await git(gitDir, 'ls-tree', root.id)).toBe('');
  });

  it('is refused to reporters and anonymous callers, and for unknown commits and branches', async () => {
    const { project, gitDir, c } = await makeSample({ visibility: 'public' });
    const reporter = await makeProjectMember(app, project, 'reporter');
    const outsider = await makeUser(app);
    const { makeToken } = await import('../support/factories.js');
    const outsiderToken = await makeToken(app, outsider);
    const before = await refsOf(gitDir);
    const post = (token: string | undefined, sha: string, branch: string) =>
      app.request(`/projects/${project.id}/repository/commits/${sha}/revert`, {
        method: 'POST',
        token,
        body: { branch },
      });
    expect((await post(undefined, c.c3, 'main')).status).toBe(401);
    expect((await post(reporter.token, c.c3, 'main')).status).toBe(403);
    expect((await post(outsiderToken, c.c3, 'main')).status).toBe(403);
    const dev = await makeProjectMember(app, project, 'developer');
    expect((await post(dev.token, 'deadbeef', 'main')).body).toEqual({ message: '404 Commit Not Found' });
    expect((await post(dev.token, c.c3, 'nope')).body).toEqual({ message: '404 Branch Not Found' });
    expect(await refsOf(gitDir)).toBe(before);
  });
});

describe('GET /projects/:id/repository/commits/:sha/refs', () => {
  it('lists the branches then the tags holding a commit, by type, paginated without totals', async () => {
    const { project, c } = await makeSample();
    const reporter = await makeProjectMember(app, project, 'reporter');
    const api = client(reporter.token);
    expect(await api.Commits.allReferences(project.id, c.c2)).toEqual([
      { type: 'branch', name: 'feature' },
      { type: 'branch', name: 'main' },
      { type: 'tag', name: 'v1.0' },
      { type: 'tag', name: 'v2.0' },
    ]);
    expect(await api.Commits.allReferences(project.id, c.c3, { type: 'branch' })).toEqual([
      { type: 'branch', name: 'main' },
    ]);
    expect(await api.Commits.allReferences(project.id, c.f1, { type: 'tag' })).toEqual([]);
    const page = await app.request(`/projects/${project.id}/repository/commits/${c.c2}/refs?per_page=1&page=2`, {
      token: reporter.token,
    });
    expect(page.body).toEqual([{ type: 'branch', name: 'main' }]);
    expect(page.headers.get('x-next-page')).toBe('3');
    expect(page.headers.get('x-prev-page')).toBe('1');
    expect(page.headers.get('x-total')).toBeNull();
    const last = await app.request(`/projects/${project.id}/repository/commits/${c.c2}/refs?per_page=2&page=2`, {
      token: reporter.token,
    });
    expect(last.body).toEqual([
      { type: 'tag', name: 'v1.0' },
      { type: 'tag', name: 'v2.0' },
    ]);
    expect(last.headers.get('x-next-page')).toBe('');
    const bad = await app.request(`/projects/${project.id}/repository/commits/${c.c2}/refs?type=head`, {
      token: reporter.token,
    });
    expect([bad.status, bad.body]).toEqual([400, { error: 'type does not have a valid value' }]);
    const unknown = await app.request(`/projects/${project.id}/repository/commits/${'1'.repeat(40)}/refs`, {
      token: reporter.token,
    });
    expect([unknown.status, unknown.body]).toEqual([404, { message: '404 Commit Not Found' }]);
    const guest = await makeProjectMember(app, project, 'guest');
    expect(
      (await app.request(`/projects/${project.id}/repository/commits/${c.c2}/refs`, { token: guest.token })).status,
    ).toBe(403);
    expect((await app.request(`/projects/${project.id}/repository/commits/${c.c2}/refs`)).status).toBe(404);
  });
});

/** An OpenPGP v4 signature packet naming issuer `keyId` (not a valid signature: nothing verifies it). */
function pgpArmor(keyId: string): string {
  const creation = Buffer.from([5, 2, 0x65, 0x00, 0x00, 0x00]);
  const issuer = Buffer.concat([Buffer.from([9, 16]), Buffer.from(keyId, 'hex')]);
  const body = Buffer.concat([
    Buffer.from([4, 0, 1, 8, 0, creation.length]),
    creation,
    Buffer.from([0, issuer.length]),
    issuer,
    Buffer.from([0xab, 0xcd, 0, 8, 0xff]),
  ]);
  const packet = Buffer.concat([Buffer.from([0xc2, body.length]), body]);
  return `-----BEGIN PGP SIGNATURE-----\n\n${packet.toString('base64')}\n=abcd\n-----END PGP SIGNATURE-----`;
}

/** Writes a commit object on `parent` carrying `armored` in its gpgsig header. */
async function signedCommit(gitDir: string, parent: string, armored: string): Promise<string> {
  const tree = (await git(gitDir, 'rev-parse', `${parent}^{tree}`)).trim();
  const sig = armored
    .split('\n')
    .map((line, i) => (i === 0 ? line : ` ${line}`))
    .join('\n');
  const raw =
    `tree ${tree}\nparent ${parent}\nauthor A <a@example.com> 1700000000 +0000\n` +
    `committer A <a@example.com> 1700000000 +0000\ngpgsig ${sig}\n\nSigned\n`;
  return (await gitInput(gitDir, raw, 'hash-object', '-t', 'commit', '-w', '--stdin')).trim();
}

describe('GET /projects/:id/repository/commits/:sha/signature', () => {
  it("is 404 Signature Not Found for unsigned commits and GitLab's shape for each kind of signed one", async () => {
    const { project, gitDir, c } = await makeSample({ visibility: 'public' });
    const api = client((await makeProjectMember(app, project, 'reporter')).token);
    const unsigned = await app.request(`/projects/${project.id}/repository/commits/${c.c3}/signature`);
    expect([unsigned.status, unsigned.body]).toEqual([404, { message: '404 Signature Not Found' }]);
    const missing = await app.request(`/projects/${project.id}/repository/commits/nope/signature`);
    expect([missing.status, missing.body]).toEqual([404, { message: '404 Commit Not Found' }]);

    const pgp = await signedCommit(gitDir, c.c3, pgpArmor('8254aab3fbd54ac9'));
    expect(await api.Commits.showGPGSignature(project.id, pgp)).toEqual({
      signature_type: 'PGP',
      verification_status: 'unknown_key',
      gpg_key_id: null,
      gpg_key_primary_keyid: '8254AAB3FBD54AC9',
      gpg_key_user_name: null,
      gpg_key_user_email: null,
      gpg_key_subkey_id: null,
      commit_source: 'gitaly',
    });
    const ssh = await signedCommit(
      gitDir,
      c.c3,
      '-----BEGIN SSH SIGNATURE-----\nU1NIU0lHAAAAAQ==\n-----END SSH SIGNATURE-----',
    );
    expect(await api.Commits.showGPGSignature(project.id, ssh)).toEqual({
      signature_type: 'SSH',
      verification_status: 'unknown_key',
      key: null,
      commit_source: 'gitaly',
    });
    const x509 = await signedCommit(
      gitDir,
      c.c3,
      '-----BEGIN SIGNED MESSAGE-----\nMIAGCSqGSIb3DQEHAqCAMIACAQEx\n-----END SIGNED MESSAGE-----',
    );
    expect(await api.Commits.showGPGSignature(project.id, x509)).toMatchObject({
      signature_type: 'X509',
      verification_status: 'unverified',
      x509_certificate: null,
    });
    // A private project hides it from non-members.
    await app.deps.db.updateTable('projects').set({ visibility: 'private' }).where('id', '=', project.id).execute();
    expect((await app.request(`/projects/${project.id}/repository/commits/${pgp}/signature`)).status).toBe(404);
  });
});

/** GnuPG and OpenSSH's ssh-keygen, to sign commits as users do (skipped without them). */
const SIGNING_TOOLS =
  spawnSync('sh', ['-c', 'command -v gpg && command -v gpgconf && command -v ssh-keygen']).status === 0;

describe.skipIf(!SIGNING_TOOLS)('signatures made by real signing tools', () => {
  it('reads the issuer key id of a GnuPG signature and the kind of an ssh-keygen one', async () => {
    const { project, gitDir, c } = await makeSample({ visibility: 'public' });
    const home = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-gnupg-'));
    const env = { GNUPGHOME: home };
    const run = (cmd: string, args: string[], extra: Record<string, string> = {}) =>
      exec(cmd, args, { env: { ...gitEnvironment({ ...env, ...extra }) }, encoding: 'utf8' });
    try {
      await run('gpg', [
        '--batch',
        '--passphrase',
        '',
        '--quick-gen-key',
        'Signer <signer@example.com>',
        'ed25519',
        'sign',
        'never',
      ]);
      const listing = (await run('gpg', ['--list-keys', '--with-colons'])).stdout;
      const keyId = listing
        .split('\n')
        .find((line) => line.startsWith('pub:'))
        ?.split(':')[4] as string;
      expect(keyId).toMatch(/^[0-9A-F]{16}$/);
      const identity = {
        GIT_AUTHOR_NAME: 'Signer',
        GIT_AUTHOR_EMAIL: 'signer@example.com',
        GIT_COMMITTER_NAME: 'Signer',
        GIT_COMMITTER_EMAIL: 'signer@example.com',
      };
      const tree = (await git(gitDir, 'rev-parse', `${c.c3}^{tree}`)).trim();
      const signedPgp = (
        await run(
          'git',
          [`--git-dir=${gitDir}`, 'commit-tree', `-S${keyId}`, tree, '-p', c.c3, '-m', 'Signed'],
          identity,
        )
      ).stdout.trim();
      const api = client((await makeProjectMember(app, project, 'reporter')).token);
      expect(await api.Commits.showGPGSignature(project.id, signedPgp)).toMatchObject({
        signature_type: 'PGP',
        verification_status: 'unknown_key',
        gpg_key_primary_keyid: keyId,
      });
      await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(home, 'ssh-key')]);
      const signedSsh = (
        await run(
          'git',
          [
            `--git-dir=${gitDir}`,
            '-c',
            'gpg.format=ssh',
            '-c',
            `user.signingkey=${path.join(home, 'ssh-key.pub')}`,
            'commit-tree',
            '-S',
            tree,
            '-p',
            c.c3,
            '-m',
            'SSH signed',
          ],
          identity,
        )
      ).stdout.trim();
      expect(await api.Commits.showGPGSignature(project.id, signedSsh)).toEqual({
        signature_type: 'SSH',
        verification_status: 'unknown_key',
        key: null,
        commit_source: 'gitaly',
      });
    } finally {
      await run('gpgconf', ['--kill', 'all']).catch(() => undefined);
      await fs.rm(home, { recursive: true, force: true });
    }
  });
});

async function untar(data: Buffer): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const extract = tar.extract();
  extract.on('entry', (header, stream, next) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: unknown) => chunks.push(chunk as Buffer));
    stream.on('end', () => {
      if (header.type === 'file') files.set(header.name, Buffer.concat(chunks));
      next();
    });
  });
  await new Promise<void>((resolve, reject) => {
    extract.on('finish', resolve);
    extract.on('error', reject);
    Readable.from([data]).pipe(extract);
  });
  return files;
}

describe('GET /projects/:id/snapshot', () => {
  it('streams a tar of the bare repository to administrators that git reads back whole', async () => {
    const { project, gitDir, c } = await makeSample();
    await git(gitDir, 'repack', '-a', '-d', '-q');
    await git(gitDir, 'pack-refs', '--all');
    await git(gitDir, 'update-ref', 'refs/heads/loose', c.c2);
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<Persona['name'], number> = {
      anonymous: 401,
      'non-member': 403,
      guest: 403,
      reporter: 403,
      developer: 403,
      maintainer: 403,
      owner: 403,
      admin: 200,
    };
    for (const persona of personas) {
      const res = await app.request(`/projects/${project.id}/snapshot`, { token: persona.token });
      expect(res.status, persona.name).toBe(expected[persona.name]);
    }
    const admin = personas.find((p) => p.name === 'admin') as Persona;
    const raw = await fetch(`${app.baseUrl}/api/v4/projects/${project.id}/snapshot`, {
      headers: { 'PRIVATE-TOKEN': admin.token as string },
    });
    expect(raw.headers.get('content-type')).toBe('application/x-tar');
    expect(raw.headers.get('content-disposition')).toBe('attachment; filename="snapshot.tar"');
    const files = await untar(Buffer.from(await raw.arrayBuffer()));
    expect(files.get('HEAD')?.toString()).toBe('ref: refs/heads/main\n');
    expect(files.has('packed-refs')).toBe(true);
    expect(files.get('refs/heads/loose')?.toString().trim()).toBe(c.c2);
    expect([...files.keys()].some((name) => /^objects\/pack\/pack-[0-9a-f]+\.pack$/.test(name))).toBe(true);
    expect(files.has('config')).toBe(false);

    // Written out, it is the same repository to git.
    const copy = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-snapshot-'));
    try {
      for (const [name, data] of files) {
        await fs.mkdir(path.dirname(path.join(copy, name)), { recursive: true });
        await fs.writeFile(path.join(copy, name), data);
      }
      await fs.writeFile(path.join(copy, 'config'), '[core]\n\trepositoryformatversion = 0\n\tbare = true\n');
      expect(await refsOf(copy)).toBe(await refsOf(gitDir));
      await git(copy, 'fsck', '--full', '--no-dangling');
    } finally {
      await fs.rm(copy, { recursive: true, force: true });
    }

    const viaClient = await client(admin.token as string).Projects.downloadSnapshot(project.id);
    expect((await untar(Buffer.from(await viaClient.arrayBuffer()))).get('HEAD')?.toString()).toBe(
      'ref: refs/heads/main\n',
    );
    const head = await app.request(`/projects/${project.id}/snapshot`, { token: admin.token, method: 'HEAD' });
    expect([head.status, head.text, head.headers.get('content-type')]).toEqual([200, '', 'application/x-tar']);
    const wiki = await app.request(`/projects/${project.id}/snapshot?wiki=true`, { token: admin.token });
    expect([wiki.status, wiki.body]).toEqual([404, { message: '404 Repository Not Found' }]);
    const unknown = await app.request(`/projects/${project.id + 9999}/snapshot`, { token: admin.token });
    expect([unknown.status, unknown.body]).toEqual([404, { message: '404 Project Not Found' }]);
    const bad = await app.request(`/projects/${project.id}/snapshot?wiki=perhaps`, { token: admin.token });
    expect([bad.status, bad.body]).toEqual([400, { error: 'wiki is invalid' }]);
  });
  it('stops reading and closes its files when the client goes away', async () => {
    const { project, gitDir, c } = await makeSample();
    const { randomBytes } = await import('node:crypto');
    await commitTree(gitDir, 'big', { 'big.bin': { content: randomBytes(8 * 1024 * 1024) } }, { parent: c.c3 });
    await git(gitDir, 'repack', '-a', '-d', '-q');
    const admin = await makeUser(app, { admin: true });
    const { makeToken } = await import('../support/factories.js');
    const token = await makeToken(app, admin);
    const controller = new AbortController();
    const res = await fetch(`${app.baseUrl}/api/v4/projects/${project.id}/snapshot`, {
      headers: { 'PRIVATE-TOKEN': token },
      signal: controller.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    controller.abort();
    await reader.read().catch(() => undefined);
    const openInRepository = async () => {
      const fds = await fs.readdir('/proc/self/fd');
      const targets = await Promise.all(fds.map((fd) => fs.readlink(`/proc/self/fd/${fd}`).catch(() => '')));
      return targets.filter((target) => target.startsWith(gitDir) && target.includes('/objects/pack/'));
    };
    for (let i = 0; i < 50 && (await openInRepository()).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await openInRepository()).toEqual([]);
    const again = await app.request(`/projects/${project.id}/snapshot`, { token });
    expect(again.status).toBe(200);
  });
});
