import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import { maintainRepository, REPOSITORY_MAINTENANCE_JOB } from '../../src/services/repository-maintenance.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeSampleProject, makeToken, makeUser } from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

let app: TestApp;
let worker: Worker;
let scratch: string;
let owner: User;
let token: string;
let counter = 0;

beforeAll(async () => {
  app = await startTestApp();
  worker = new Worker(app.deps, JOB_KINDS);
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-maintenance-'));
  owner = await makeUser(app);
  token = await makeToken(app, owner);
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

async function git(args: string[], cwd = scratch): Promise<string> {
  const result = await runGitClient(args, cwd);
  expect({ args, code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
  return result.stdout.trim();
}

/** A clone of the project over HTTP, as its owner. */
async function workClone(project: Project): Promise<string> {
  const dir = path.join(scratch, `work-${++counter}`);
  await git(['clone', '--quiet', remoteUrl(app.baseUrl, project, { login: owner.username, password: token }), dir]);
  return dir;
}

async function pushCommits(dir: string, branch: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await fs.writeFile(path.join(dir, `${branch}-${i}.txt`), `${branch} ${i}\n`);
    await git(['add', '.'], dir);
    await git(['commit', '--quiet', '-m', `${branch} ${i}`], dir);
  }
  await git(['push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`], dir);
}

interface GraphLayer {
  commits: number;
  chunks: string[];
}

/**
 * The layers of a split commit-graph, read from the file format (gitformat-commit-graph): a
 * chunk table after the 8-byte header, and the OID fanout whose last entry counts the commits.
 */
async function graphLayers(gitDir: string): Promise<GraphLayer[]> {
  const dir = path.join(gitDir, 'objects', 'info', 'commit-graphs');
  const chain = await fs.readFile(path.join(dir, 'commit-graph-chain'), 'utf8').catch(() => '');
  const layers: GraphLayer[] = [];
  for (const hash of chain.split('\n').filter(Boolean)) {
    const data = await fs.readFile(path.join(dir, `graph-${hash}.graph`));
    expect(data.subarray(0, 4).toString('latin1')).toBe('CGPH');
    const chunks = new Map<string, number>();
    for (let i = 0; i < (data[6] as number); i++) {
      const entry = 8 + 12 * i;
      chunks.set(data.subarray(entry, entry + 4).toString('latin1'), Number(data.readBigUInt64BE(entry + 4)));
    }
    const fanout = chunks.get('OIDF') as number;
    layers.push({ commits: data.readUInt32BE(fanout + 255 * 4), chunks: [...chunks.keys()] });
  }
  return layers;
}

const graphCommits = async (gitDir: string) => (await graphLayers(gitDir)).reduce((sum, l) => sum + l.commits, 0);
const reachableCommits = async (gitDir: string) =>
  Number(await git([`--git-dir=${gitDir}`, 'rev-list', '--all', '--count']));

async function queuedJobs(project: Project): Promise<number> {
  const rows = await app.deps.db
    .selectFrom('jobs')
    .select('payload')
    .where('kind', '=', REPOSITORY_MAINTENANCE_JOB)
    .where('state', '=', 'queued')
    .execute();
  return rows.filter((r) => (r.payload as { project_id: number }).project_id === project.id).length;
}

describe('repository maintenance', () => {
  it('writes a commit-graph of every reachable commit, with changed-path filters, after a push', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `kept-${++counter}` });
    expect(await graphLayers(gitDir)).toEqual([]);
    const dir = await workClone(project);
    await pushCommits(dir, 'topic', 3);
    expect(await queuedJobs(project)).toBe(1);
    await worker.drain();
    expect(await queuedJobs(project)).toBe(0);
    // Done, the job leaves no row behind (one per push would pile up).
    const left = await app.deps.db
      .selectFrom('jobs')
      .select('id')
      .where('kind', '=', REPOSITORY_MAINTENANCE_JOB)
      .execute();
    expect(left).toEqual([]);
    const layers = await graphLayers(gitDir);
    expect(layers.length).toBeGreaterThan(0);
    for (const layer of layers) expect(layer.chunks).toEqual(expect.arrayContaining(['OIDF', 'BIDX', 'BDAT']));
    expect(await graphCommits(gitDir)).toBe(await reachableCommits(gitDir));
    await git([`--git-dir=${gitDir}`, 'commit-graph', 'verify', '--no-progress']);

    // The next push adds its commits to the graph.
    await pushCommits(dir, 'more', 2);
    await worker.drain();
    expect(await graphCommits(gitDir)).toBe(await reachableCommits(gitDir));
    await git([`--git-dir=${gitDir}`, 'commit-graph', 'verify', '--no-progress']);
  });

  it('queues one job however many changes come before the worker, and none for a deletion', async () => {
    const { project } = await makeSampleProject(app, owner, { path: `kept-${++counter}` });
    for (const branch of ['one', 'two']) {
      const res = await app.request(`/projects/${project.id}/repository/commits`, {
        method: 'POST',
        token,
        body: {
          branch,
          start_branch: 'main',
          commit_message: `Add ${branch}`,
          actions: [{ action: 'create', file_path: `${branch}.txt`, content: branch }],
        },
      });
      expect(res.status).toBe(201);
    }
    expect(await queuedJobs(project)).toBe(1);
    await worker.drain();
    const deleted = await app.request(`/projects/${project.id}/repository/branches/one`, { method: 'DELETE', token });
    expect(deleted.status).toBe(204);
    expect(await queuedJobs(project)).toBe(0);
  });

  it('packs in the job, not in the push: receive-pack runs no gc of its own', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `kept-${++counter}` });
    // Every push kept as a pack, and gc due at a second pack, in the foreground: were the push to
    // run its own gc, it would have packed before answering.
    const config = { 'receive.unpackLimit': '1', 'gc.autoPackLimit': '1', 'gc.autoDetach': 'false' };
    for (const [key, value] of Object.entries(config)) await git([`--git-dir=${gitDir}`, 'config', key, value]);
    const packs = async () =>
      Number(/^packs: (\d+)$/m.exec(await git([`--git-dir=${gitDir}`, 'count-objects', '-v']))?.[1]);
    await git([`--git-dir=${gitDir}`, 'repack', '-a', '-d', '-q']);
    expect(await packs()).toBe(1);
    const dir = await workClone(project);
    await pushCommits(dir, 'packed', 2);
    expect(await packs()).toBe(2);
    await worker.drain();
    expect(await packs()).toBe(1);
    await git([`--git-dir=${gitDir}`, 'fsck', '--no-progress', '--connectivity-only']);
    expect(await graphCommits(gitDir)).toBe(await reachableCommits(gitDir));
  });

  it('leaves a read-only repository (a storage move under way) alone', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `kept-${++counter}` });
    const setReadOnly = (readOnly: boolean) =>
      app.deps.db
        .updateTable('projects')
        .set({ repository_read_only: readOnly })
        .where('id', '=', project.id)
        .execute();
    await setReadOnly(true);
    expect(await maintainRepository(app.deps, project.id)).toBe(false);
    expect(await graphLayers(gitDir)).toEqual([]);
    await setReadOnly(false);
    expect(await maintainRepository(app.deps, project.id)).toBe(true);
    expect(await graphCommits(gitDir)).toBe(await reachableCommits(gitDir));
    expect(await maintainRepository(app.deps, project.id + 1000)).toBe(false);
  });
});
