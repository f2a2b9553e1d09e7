import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeSampleProject, makeToken, makeUser } from '../support/factories.js';

const exec = promisify(execFile);
let app: TestApp;
let owner: User;
let project: Project;
let gitDir: string;

const gitIn = async (dir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${dir}`, ...args], { env: gitEnvironment(), encoding: 'utf8', maxBuffer: 1 << 28 }))
    .stdout;
const git = (...args: string[]) => gitIn(gitDir, ...args);
const rev = async (r: string) => (await git('rev-parse', `${r}^{commit}`)).trim();

/** Hunks per file from `git diff`, keyed by new path, as GitLab keeps them (from the first @@). */
async function gitPatches(left: string, right: string, dir = gitDir): Promise<Record<string, string>> {
  const text = await gitIn(dir, 'diff', '--no-color', '--find-renames=30%', '--full-index', left, right);
  const out: Record<string, string> = {};
  for (const section of text.split(/^diff --git /m).slice(1)) {
    const lines = section.split('\n');
    const plus = lines.find((l) => l.startsWith('+++ ') || l.startsWith('rename to ') || l.startsWith('Binary files'));
    const start = lines.findIndex((l) => l.startsWith('@@') || /^Binary files .* differ$/.test(l));
    const header = lines[0] as string;
    const name = plus?.startsWith('+++ b/')
      ? plus.slice(6)
      : plus?.startsWith('rename to ')
        ? plus.slice(10)
        : header.split(' b/').pop();
    const body = start < 0 ? '' : lines.slice(start).join('\n');
    out[name as string] = body;
  }
  return out;
}

/** A sample project and a working clone of it in a scratch directory, with a committer set. */
async function sampleClone(name: string) {
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-compare-'));
  const { project: cloned, gitDir: dir } = await makeSampleProject(app, owner, { path: name });
  const work = path.join(scratch, 'work');
  const env = gitEnvironment({
    GIT_AUTHOR_NAME: 'A',
    GIT_AUTHOR_EMAIL: 'a@e',
    GIT_COMMITTER_NAME: 'A',
    GIT_COMMITTER_EMAIL: 'a@e',
  });
  await exec('git', ['clone', '--quiet', dir, work], { env });
  /** Runs git in the clone; answers its stdout. */
  const run = async (...args: string[]) => (await exec('git', args, { cwd: work, env })).stdout;
  return { project: cloned, gitDir: dir, work, run, remove: () => fs.rm(scratch, { recursive: true, force: true }) };
}

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  ({ project, gitDir } = await makeSampleProject(app, owner, { path: 'cmp' }));
});
afterAll(async () => {
  await app?.close();
});

describe('GET /projects/:id/repository/compare', () => {
  const pairs: [string, string][] = [
    ['v1.0.0', 'main'],
    ['stable', 'feature/merge-me'],
    ['main', 'stable'],
    ['v1.0.0', 'v1.1.0'],
  ];
  it.each(pairs)('compares %s with %s as git does (three dots, and straight)', async (from, to) => {
    for (const straight of [false, true]) {
      const res = await app.request(`/projects/${project.id}/repository/compare`, { query: { from, to, straight } });
      expect(res.status).toBe(200);
      const base = await rev(from);
      const head = await rev(to);
      const left = straight ? base : (await git('merge-base', head, base)).trim();
      const commits = (await git('rev-list', '--reverse', `${base}..${head}`)).trim().split('\n').filter(Boolean);
      expect(res.body.commits.map((c: { id: string }) => c.id)).toEqual(commits);
      expect(res.body.commit?.id ?? null).toBe(commits[commits.length - 1] ?? null);
      expect(res.body.compare_same_ref).toBe(false);
      expect(res.body.compare_timeout).toBe(false);
      expect(res.body.web_url).toBe(`${app.baseUrl}/${project.full_path}/-/compare/${left}...${head}`);
      const patches = await gitPatches(left, head);
      const names = (await git('diff', '--name-only', '--find-renames=30%', left, head))
        .trim()
        .split('\n')
        .filter(Boolean);
      expect(res.body.diffs.map((d: { new_path: string }) => d.new_path)).toEqual(names);
      for (const d of res.body.diffs)
        expect({ path: d.new_path, diff: d.diff }).toEqual({ path: d.new_path, diff: patches[d.new_path] });
    }
  });

  it('marks new, deleted and renamed files with their modes, and writes unidiff headers', async () => {
    const res = await app.request(`/projects/${project.id}/repository/compare`, {
      query: { from: 'v1.0.0', to: 'main', unidiff: true },
    });
    const status = (
      await git(
        'diff',
        '--name-status',
        '--find-renames=30%',
        await git('merge-base', 'main', 'v1.0.0').then((s) => s.trim()),
        'main',
      )
    )
      .trim()
      .split('\n');
    for (const line of status) {
      const [code, a, b] = line.split('\t') as [string, string, string?];
      const entry = res.body.diffs.find((d: { new_path: string }) => d.new_path === (b ?? a));
      expect(entry, line).toBeDefined();
      expect(entry.new_file).toBe(code === 'A');
      expect(entry.deleted_file).toBe(code === 'D');
      expect(entry.renamed_file).toBe(code.startsWith('R'));
      if (code === 'A') expect(entry.a_mode).toBe('0');
      if (entry.diff.startsWith('---')) {
        expect(entry.diff.split('\n')[0]).toBe(code === 'A' ? '--- /dev/null' : `--- a/${entry.old_path}`);
      }
    }
  });

  it('answers same refs, unknown refs and hostile refs as GitLab does', async () => {
    const same = await app.request(`/projects/${project.id}/repository/compare`, {
      query: { from: 'main', to: 'main' },
    });
    expect(same.body).toMatchObject({
      commit: null,
      commits: [],
      diffs: [],
      compare_same_ref: true,
      compare_timeout: false,
    });
    for (const [from, to] of [
      ['main', 'nope'],
      ['nope', 'main'],
      ['--output=/tmp/depot-compare-pwned', 'main'],
      ['main..stable', 'main'],
      ['main:README.md', 'main'],
    ]) {
      const res = await app.request(`/projects/${project.id}/repository/compare`, {
        query: { from: from as string, to: to as string },
      });
      expect({ from, to, status: res.status, body: res.body }).toEqual({
        from,
        to,
        status: 404,
        body: { message: '404 Ref Not Found' },
      });
    }
    await expect(fs.access('/tmp/depot-compare-pwned')).rejects.toThrow();
    expect((await app.request(`/projects/${project.id}/repository/compare`, { query: { from: 'main' } })).body).toEqual(
      {
        error: 'to is missing',
      },
    );
    expect(
      (
        await app.request(`/projects/${project.id}/repository/compare`, {
          query: { from: 'main', to: 'stable', from_project_id: 999999 },
        })
      ).body,
    ).toEqual({ message: `Target project id:999999 is not a fork of project id:${project.id}` });
  });

  it('collapses past the safe limits and stops at the max limits (compare_timeout)', async () => {
    const { project: big, gitDir: bigDir, work, run, remove } = await sampleClone('limits');
    await fs.mkdir(path.join(work, 'many'));
    for (let i = 0; i < 120; i++)
      await fs.writeFile(path.join(work, 'many', `f${String(i).padStart(3, '0')}.txt`), `line ${i}\n`);
    await run('add', '.');
    await run('commit', '--quiet', '-m', 'many files');
    await run('push', '--quiet', 'origin', 'HEAD:refs/heads/many');
    const res = await app.request(`/projects/${big.id}/repository/compare`, { query: { from: 'main', to: 'many' } });
    expect(res.body.diffs).toHaveLength(120);
    expect(res.body.compare_timeout).toBe(false);
    expect(res.body.diffs.slice(0, 100).every((d: { diff: string }) => d.diff !== '')).toBe(true);
    expect(res.body.diffs.slice(100).every((d: { diff: string }) => d.diff === '')).toBe(true);

    for (let i = 0; i < 1001; i++) await fs.writeFile(path.join(work, 'many', `g${i}.txt`), `${i}\n`);
    await run('add', '.');
    await run('commit', '--quiet', '-m', 'too many files');
    await run('push', '--quiet', 'origin', 'HEAD:refs/heads/too-many');
    const over = await app.request(`/projects/${big.id}/repository/compare`, {
      query: { from: 'main', to: 'too-many' },
    });
    expect(over.body.compare_timeout).toBe(true);
    expect(over.body.diffs).toHaveLength(1000);

    // Around the max: git's output is read up to the file past it, then git is stopped.
    const manyId = (await run('rev-parse', 'HEAD~1')).trim();
    for (const total of [1000, 1001, 1002]) {
      await run('checkout', '--quiet', '-B', `total-${total}`, manyId);
      for (let i = 120; i < total; i++) await fs.writeFile(path.join(work, 'many', `h${i}.txt`), `${i}\n`);
      await run('add', '.');
      await run('commit', '--quiet', '-m', `${total} files`);
      await run('push', '--quiet', 'origin', `HEAD:refs/heads/total-${total}`);
      const res = await app.request(`/projects/${big.id}/repository/compare`, {
        query: { from: 'main', to: `total-${total}` },
      });
      expect({ total, timeout: res.body.compare_timeout }).toEqual({ total, timeout: total > 1000 });
      expect(res.body.diffs).toHaveLength(1000);
      const names = (await gitIn(bigDir, 'diff', '--name-only', 'main', `total-${total}`)).trim().split('\n');
      expect(res.body.diffs.map((d: { new_path: string }) => d.new_path)).toEqual(names.slice(0, 1000));
    }
    await remove();
  });

  it('diffs from the base git merge-base names when there are several, and from `from` when there is none', async () => {
    const { project: crossed, gitDir: dir, work, run, remove } = await sampleClone('criss-cross');
    const commitFile = async (name: string, content: string) => {
      await fs.writeFile(path.join(work, name), content);
      await run('add', name);
      await run('commit', '--quiet', '-m', `${name}: ${content.trim()}`);
    };
    try {
      // A criss-cross: a1 and b1 are both best common ancestors of a2 and b2.
      await run('checkout', '--quiet', '-b', 'cross-a');
      await commitFile('a.txt', 'a1\n');
      await run('checkout', '--quiet', '-b', 'cross-b', 'main');
      await commitFile('b.txt', 'b1\n');
      await run('merge', '--quiet', '--no-edit', 'cross-a~0');
      await commitFile('b.txt', 'b2\n');
      await run('checkout', '--quiet', 'cross-a');
      await run('merge', '--quiet', '--no-edit', 'cross-b~2');
      await commitFile('a.txt', 'a2\n');
      await run('checkout', '--quiet', '--orphan', 'unrelated');
      await run('rm', '-r', '--quiet', '-f', '.');
      await commitFile('alone.txt', 'alone\n');
      await run('push', '--quiet', 'origin', 'cross-a', 'cross-b', 'unrelated');
      const id = async (r: string) => (await gitIn(dir, 'rev-parse', r)).trim();
      const [a, b, main] = await Promise.all([id('cross-a'), id('cross-b'), id('main')]);
      expect((await gitIn(dir, 'merge-base', '--all', b, a)).trim().split('\n')).toHaveLength(2);

      for (const [from, to, base, left] of [
        ['cross-a', 'cross-b', a, (await gitIn(dir, 'merge-base', b, a)).trim()],
        ['main', 'unrelated', main, main],
      ] as const) {
        const head = await id(to);
        const res = await app.request(`/projects/${crossed.id}/repository/compare`, { query: { from, to } });
        expect(res.status).toBe(200);
        expect(res.body.web_url).toBe(`${app.baseUrl}/${crossed.full_path}/-/compare/${left}...${head}`);
        const patches = Object.values(await gitPatches(left, head, dir));
        expect(patches.length).toBeGreaterThan(0);
        expect(res.body.diffs.map((d: { diff: string }) => d.diff)).toEqual(patches);
        const names = await gitIn(dir, 'diff', '-z', '--name-only', '--find-renames=30%', left, head);
        expect(res.body.diffs.map((d: { new_path: string }) => d.new_path)).toEqual(names.split('\0').filter(Boolean));
        const commits = (await gitIn(dir, 'rev-list', '--reverse', head, `^${base}`)).trim().split('\n');
        expect(res.body.commits.map((c: { id: string }) => c.id)).toEqual(commits);
      }
    } finally {
      await remove();
    }
  });
});

describe('GET /projects/:id/repository/commits/:sha/diff', () => {
  it('diffs each commit against its first parent, paginated, as git show does', async () => {
    for (const r of ['main', 'v1.0.0', 'feature/merge-me']) {
      const id = await rev(r);
      const parent =
        (await git('rev-list', '--parents', '-n', '1', id)).trim().split(' ')[1] ??
        '4b825dc642cb6eb9a060e54bf8d69288fbee4904';
      const patches = await gitPatches(parent, id);
      const res = await app.request(`/projects/${project.id}/repository/commits/${encodeURIComponent(r)}/diff`, {
        query: { per_page: 100 },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-total')).toBe(String(Object.keys(patches).length));
      for (const d of res.body) expect(d.diff).toBe(patches[d.new_path]);
    }
    expect((await app.request(`/projects/${project.id}/repository/commits/nope/diff`)).body).toEqual({
      message: '404 Commit Not Found',
    });
  });
});

describe('GET /projects/:id/repository/contributors', () => {
  it('counts the newest 2000 non-merge commits by exact email, as git shortlog does', async () => {
    const shortlog = (await git('shortlog', '-sne', '--no-merges', 'main')).trim().split('\n');
    const expected = shortlog.map((line) => {
      const m = /^\s*(\d+)\t(.*) <(.*)>$/.exec(line) as RegExpExecArray;
      return { email: m[3], commits: Number(m[1]) };
    });
    const res = await app.request(`/projects/${project.id}/repository/contributors`, { query: { order_by: 'email' } });
    expect(res.status).toBe(200);
    expect(
      res.body
        .map((c: { email: string; commits: number }) => ({ email: c.email, commits: c.commits }))
        .sort((a: { email: string }, b: { email: string }) => a.email.localeCompare(b.email)),
    ).toEqual(expected.sort((a, b) => (a.email as string).localeCompare(b.email as string)));
    expect(
      res.body.every((c: { additions: number; deletions: number }) => c.additions === 0 && c.deletions === 0),
    ).toBe(true);
    const byCommits = await app.request(`/projects/${project.id}/repository/contributors`, {
      query: { sort: 'desc', per_page: 1 },
    });
    expect(byCommits.body[0].commits).toBe(Math.max(...expected.map((e) => e.commits)));
    expect(byCommits.headers.get('link')).toContain('order_by=commits');
    expect(
      (await app.request(`/projects/${project.id}/repository/contributors`, { query: { order_by: 'size' } })).status,
    ).toBe(400);
    expect(
      (await app.request(`/projects/${project.id}/repository/contributors`, { query: { ref: 'nope' } })).body,
    ).toEqual([]);
  });
});

describe('GET /projects/:id/repository/merge_base', () => {
  it('finds what git merge-base finds, and answers GitLab’s errors', async () => {
    const expected = (await git('merge-base', 'main', 'stable')).trim();
    const res = await app.request(`/projects/${project.id}/repository/merge_base`, {
      query: { refs: ['main', 'stable'] },
    });
    expect(res.body.id).toBe(expected);
    const comma = await app.request(`/projects/${project.id}/repository/merge_base?refs=main,feature/merge-me`);
    expect(comma.body.id).toBe((await git('merge-base', 'main', 'feature/merge-me')).trim());
    expect(
      (await app.request(`/projects/${project.id}/repository/merge_base`, { query: { refs: ['main'] } })).body,
    ).toEqual({
      message: 'Provide at least 2 refs',
    });
    expect(
      (await app.request(`/projects/${project.id}/repository/merge_base`, { query: { refs: ['main', 'nope'] } })).body,
    ).toEqual({
      message: 'Could not find ref: nope',
    });
    expect(
      (await app.request(`/projects/${project.id}/repository/merge_base`, { query: { refs: ['main', 'x', 'y'] } }))
        .body,
    ).toEqual({
      message: 'Could not find refs: x, y',
    });
    expect(
      (
        await app.request(`/projects/${project.id}/repository/merge_base`, {
          query: { refs: ['main', '--output=/tmp/x'] },
        })
      ).status,
    ).toBe(400);
  });

  it('answers 404 Merge Base Not Found for refs with no history in common', async () => {
    const { project: lone, gitDir: loneDir } = await makeSampleProject(app, owner, { path: 'merge-base-orphan' });
    const identity = { GIT_AUTHOR_NAME: 'T', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 'T' };
    const emptyTree = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';
    const orphan = (
      await exec('git', [`--git-dir=${loneDir}`, 'commit-tree', emptyTree, '-m', 'unrelated'], {
        env: gitEnvironment({ ...identity, GIT_COMMITTER_EMAIL: 't@example.com' }),
        encoding: 'utf8',
      })
    ).stdout.trim();
    await gitIn(loneDir, 'update-ref', 'refs/heads/unrelated', orphan);
    const res = await app.request(`/projects/${lone.id}/repository/merge_base`, {
      query: { refs: ['main', 'unrelated'] },
    });
    expect({ status: res.status, body: res.body }).toEqual({
      status: 404,
      body: { message: '404 Merge Base Not Found' },
    });
  });

  it('works through @gitbeaker/rest', async () => {
    const client = new Gitlab({ host: app.baseUrl, token: await makeToken(app, owner) });
    const cmp = await client.Repositories.compare(project.id, 'stable', 'main');
    expect(cmp.commits?.map((c) => c.id)).toEqual(
      (await git('rev-list', '--reverse', 'stable..main')).trim().split('\n'),
    );
    const base = await client.Repositories.mergeBase(project.id, ['main', 'stable']);
    expect(base.id).toBe((await git('merge-base', 'main', 'stable')).trim());
    const people = await client.Repositories.allContributors(project.id);
    expect(people.length).toBeGreaterThan(0);
  });
});
