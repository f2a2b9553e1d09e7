import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import { REPOSITORY_MAINTENANCE_JOB } from '../../src/services/repository-maintenance.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeSampleProject, makeToken, makeUser, putSettings } from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

// housekeeping_enabled and the housekeeping periods decide the repository upkeep job at once
// (issue 16 item 4): off, pushes queue no upkeep; on, the count of pushes picks the task.

let app: TestApp;
let worker: Worker;
let scratch: string;
let owner: User;
let token: string;
let adminToken: string;
let counter = 0;

const DEFAULTS = {
  housekeeping_enabled: true,
  housekeeping_bitmaps_enabled: true,
  housekeeping_incremental_repack_period: 10,
  housekeeping_full_repack_period: 50,
  housekeeping_gc_period: 200,
};

const setSettings = (body: Record<string, unknown>) => putSettings(app, adminToken, body);

async function git(args: string[], cwd = scratch): Promise<string> {
  const result = await runGitClient(args, cwd);
  expect({ args, code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
  return result.stdout.trim();
}

async function workClone(project: Project): Promise<string> {
  const dir = path.join(scratch, `work-${++counter}`);
  await git(['clone', '--quiet', remoteUrl(app.baseUrl, project, { login: owner.username, password: token }), dir]);
  return dir;
}

/** One push of one new commit over HTTP. */
async function pushOne(dir: string): Promise<void> {
  const name = `file-${++counter}.txt`;
  await fs.writeFile(path.join(dir, name), `${name}\n`);
  await git(['add', name], dir);
  await git(['commit', '--quiet', '-m', `Add ${name}`], dir);
  await git(['push', '--quiet', 'origin', 'HEAD:refs/heads/main'], dir);
}

async function queuedTasks(project: Project): Promise<string[]> {
  const rows = await app.deps.db
    .selectFrom('jobs')
    .select('payload')
    .where('kind', '=', REPOSITORY_MAINTENANCE_JOB)
    .where('state', '=', 'queued')
    .execute();
  return rows
    .map((r) => r.payload as { project_id: number; task: string })
    .filter((p) => p.project_id === project.id)
    .map((p) => p.task);
}

async function packState(gitDir: string) {
  const counts = await git([`--git-dir=${gitDir}`, 'count-objects', '-v']);
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(counts)?.[1]);
  const files = await fs.readdir(path.join(gitDir, 'objects', 'pack'));
  return { loose: field('count'), packs: field('packs'), bitmaps: files.filter((f) => f.endsWith('.bitmap')).length };
}

async function pushesSinceGc(project: Project): Promise<number | undefined> {
  const row = await app.deps.db
    .selectFrom('repository_housekeeping')
    .select('pushes_since_gc')
    .where('project_id', '=', project.id)
    .executeTakeFirst();
  return row?.pushes_since_gc;
}

/** A sample project whose packs carry no bitmap, so a bitmap after upkeep is the upkeep's. */
async function projectWithoutBitmaps() {
  const made = await makeSampleProject(app, owner, { path: `hk-${++counter}` });
  const packDir = path.join(made.gitDir, 'objects', 'pack');
  for (const file of await fs.readdir(packDir)) {
    if (file.endsWith('.bitmap')) await fs.rm(path.join(packDir, file));
  }
  return made;
}

beforeAll(async () => {
  app = await startTestApp();
  worker = new Worker(app.deps, JOB_KINDS);
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-housekeeping-'));
  owner = await makeUser(app);
  token = await makeToken(app, owner);
  adminToken = await makeToken(app, await makeAdmin(app));
});
afterEach(async () => {
  await worker.drain();
  await setSettings(DEFAULTS);
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('housekeeping settings', () => {
  it('queues no upkeep and counts no push while housekeeping_enabled is off', async () => {
    const { project, gitDir } = await projectWithoutBitmaps();
    const dir = await workClone(project);
    await setSettings({ housekeeping_enabled: false });
    await pushOne(dir);
    expect(await queuedTasks(project)).toEqual([]);
    expect(await pushesSinceGc(project)).toBeUndefined();
    const before = await packState(gitDir);
    expect(before.loose).toBeGreaterThan(0);

    await setSettings(DEFAULTS);
    await pushOne(dir);
    expect(await queuedTasks(project)).toEqual(['heuristic']);
    expect(await pushesSinceGc(project)).toBe(1);
  });

  it('runs an incremental repack, a full repack with bitmaps and a gc at their periods in pushes', async () => {
    const { project, gitDir } = await projectWithoutBitmaps();
    const dir = await workClone(project);
    await setSettings({
      housekeeping_enabled: true,
      housekeeping_bitmaps_enabled: true,
      housekeeping_incremental_repack_period: 1,
      housekeeping_full_repack_period: 2,
      housekeeping_gc_period: 4,
    });
    const packsBefore = (await packState(gitDir)).packs;

    await pushOne(dir);
    expect(await queuedTasks(project)).toEqual(['incremental_repack']);
    expect((await packState(gitDir)).loose).toBeGreaterThan(0);
    await worker.drain();
    // The loose objects of the push went into one more pack; nothing was rewritten.
    expect(await packState(gitDir)).toEqual({ loose: 0, packs: packsBefore + 1, bitmaps: 0 });

    await pushOne(dir);
    expect(await queuedTasks(project)).toEqual(['full_repack']);
    await worker.drain();
    expect(await packState(gitDir)).toEqual({ loose: 0, packs: 1, bitmaps: 1 });

    await pushOne(dir);
    await pushOne(dir);
    // Two pushes before the worker: one job, with the more thorough task of the two.
    expect(await queuedTasks(project)).toEqual(['gc']);
    expect(await pushesSinceGc(project)).toBe(0);
    await worker.drain();
    expect(await packState(gitDir)).toEqual({ loose: 0, packs: 1, bitmaps: 1 });
    await git([`--git-dir=${gitDir}`, 'fsck', '--no-progress', '--connectivity-only']);
  });

  it('writes no bitmap with housekeeping_bitmaps_enabled off', async () => {
    const { project, gitDir } = await projectWithoutBitmaps();
    const dir = await workClone(project);
    await setSettings({
      housekeeping_enabled: true,
      housekeeping_bitmaps_enabled: false,
      housekeeping_incremental_repack_period: 1,
      housekeeping_full_repack_period: 1,
      housekeeping_gc_period: 5,
    });
    await pushOne(dir);
    expect(await queuedTasks(project)).toEqual(['full_repack']);
    await worker.drain();
    expect(await packState(gitDir)).toEqual({ loose: 0, packs: 1, bitmaps: 0 });
  });
});
