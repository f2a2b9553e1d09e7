import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeSampleProject, makeToken, makeUser, putSettings } from '../support/factories.js';

// diff_max_patch_bytes, diff_max_files and diff_max_lines decide the compare and commit diff
// limits at once (issue 16 item 4). GitLab only lets them rise above their defaults, so each
// test shows a diff cut at the default and whole after the limit is raised.

const exec = promisify(execFile);
let app: TestApp;
let owner: User;
let adminToken: string;
let scratch: string;
let counter = 0;

interface DiffBody {
  diff: string;
  new_path: string;
  collapsed: boolean;
  too_large: boolean;
}

const setSettings = (body: Record<string, unknown>) => putSettings(app, adminToken, body);

/** A sample project with one more commit on `main` made by `write` in a working clone. */
async function projectWithCommit(write: (work: string) => Promise<void>) {
  const { project } = await makeSampleProject(app, owner, { path: `limits${++counter}` });
  const work = path.join(scratch, `work-${counter}`);
  const env = gitEnvironment({
    GIT_AUTHOR_NAME: 'A',
    GIT_AUTHOR_EMAIL: 'a@e',
    GIT_COMMITTER_NAME: 'A',
    GIT_COMMITTER_EMAIL: 'a@e',
  });
  const gitDir = app.deps.storages.repositoryPath(project.repository_storage, project.id);
  const run = (...args: string[]) => exec('git', args, { cwd: work, env, maxBuffer: 1 << 26 });
  await exec('git', ['clone', '--quiet', gitDir, work], { env });
  await write(work);
  await run('add', '.');
  await run('commit', '--quiet', '-m', 'big change');
  await run('push', '--quiet', 'origin', 'HEAD:refs/heads/main');
  const sha = (await run('rev-parse', 'HEAD')).stdout.trim();
  return { project, sha };
}

const commitDiff = async (projectId: number, sha: string) => {
  const res = await app.request(`/projects/${projectId}/repository/commits/${sha}/diff`, {
    query: { per_page: 100, page: 1 },
  });
  expect(res.status).toBe(200);
  return { files: res.body as DiffBody[], total: Number(res.headers.get('x-total')) };
};

const compare = async (projectId: number, sha: string) => {
  const res = await app.request(`/projects/${projectId}/repository/compare`, {
    query: { from: `${sha}~1`, to: sha },
  });
  expect(res.status).toBe(200);
  return res.body as { diffs: DiffBody[]; compare_timeout: boolean };
};

beforeAll(async () => {
  app = await startTestApp();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-diff-limits-'));
  owner = await makeUser(app);
  adminToken = await makeToken(app, await makeAdmin(app));
});
afterEach(async () => {
  await setSettings({ diff_max_patch_bytes: 204800, diff_max_files: 1000, diff_max_lines: 50000 });
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('diff_max_patch_bytes', () => {
  it('marks a patch past it too_large and empty, and shows it whole once raised', async () => {
    // 3000 lines of 100 bytes: a patch of about 300 KB, past the 200 KiB default.
    const { project, sha } = await projectWithCommit((work) =>
      fs.writeFile(path.join(work, 'big.txt'), `${'x'.repeat(99)}\n`.repeat(3000)),
    );
    const cut = await commitDiff(project.id, sha);
    expect(cut.files).toHaveLength(1);
    expect(cut.files[0]).toMatchObject({ new_path: 'big.txt', diff: '', too_large: true, collapsed: false });
    expect((await compare(project.id, sha)).diffs[0]).toMatchObject({ diff: '', too_large: true });

    await setSettings({ diff_max_patch_bytes: 512000 });
    const whole = await commitDiff(project.id, sha);
    expect(whole.files[0]).toMatchObject({ new_path: 'big.txt', too_large: false, collapsed: false });
    expect(whole.files[0]?.diff.split('\n').filter((l) => l.startsWith('+'))).toHaveLength(3000);
    expect((await compare(project.id, sha)).diffs[0]).toMatchObject({ too_large: false });
  });
});

describe('diff_max_lines', () => {
  it('stops the commit diff at the line limit and collapses compare past a tenth of it, both following it', async () => {
    // 55 files of 1000 lines: 55 000 lines, past the 50 000 default.
    const { project, sha } = await projectWithCommit(async (work) => {
      for (let i = 0; i < 55; i++) {
        await fs.writeFile(path.join(work, `lines-${String(i).padStart(2, '0')}.txt`), 'a\n'.repeat(1000));
      }
    });
    const cut = await commitDiff(project.id, sha);
    expect(cut.total).toBeLessThan(55);
    expect(cut.files.every((f) => !f.collapsed && f.diff !== '')).toBe(true);
    // Compare collapses past the safe limit, and collapsed patches count toward no limit.
    const cutCompare = await compare(project.id, sha);
    expect(cutCompare.diffs).toHaveLength(55);
    const expandedAtDefault = cutCompare.diffs.filter((d) => !d.collapsed).length;
    expect(cutCompare.diffs.find((d) => d.collapsed)).toMatchObject({ diff: '', too_large: false });

    await setSettings({ diff_max_lines: 60000 });
    expect((await commitDiff(project.id, sha)).total).toBe(55);
    const whole = await compare(project.id, sha);
    // The safe limit is a tenth of the max: 6 000 lines instead of 5 000, one more file in full.
    expect(whole.diffs.filter((d) => !d.collapsed).length).toBe(expandedAtDefault + 1);
  });
});

describe('diff_max_files', () => {
  it('stops the list at the file limit (compare_timeout) and collapses past a tenth of it', async () => {
    const { project, sha } = await projectWithCommit(async (work) => {
      await fs.mkdir(path.join(work, 'many'));
      for (let i = 0; i < 1050; i++) await fs.writeFile(path.join(work, 'many', `f${i}.txt`), `${i}\n`);
    });
    const cut = await compare(project.id, sha);
    expect(cut.compare_timeout).toBe(true);
    expect(cut.diffs).toHaveLength(1000);
    expect(cut.diffs.filter((d) => !d.collapsed)).toHaveLength(100);
    expect((await commitDiff(project.id, sha)).total).toBe(1000);

    await setSettings({ diff_max_files: 1100 });
    const whole = await compare(project.id, sha);
    expect(whole.compare_timeout).toBe(false);
    expect(whole.diffs).toHaveLength(1050);
    expect(whole.diffs.filter((d) => !d.collapsed)).toHaveLength(110);
    expect(whole.diffs.slice(110).every((d) => d.collapsed && d.diff === '')).toBe(true);
    expect((await commitDiff(project.id, sha)).total).toBe(1050);
  });
});
