import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gitEnvironment } from '../src/git/command.js';
import { FAILPOINTS, failpointMarker } from '../src/lib/failpoints.js';
import { clusterProgram, type PrivateCluster, startPrivateCluster } from './support/pg-cluster.js';
import { lacks } from './support/programs.js';
import {
  type ServerAnswer,
  type ServerProcess,
  serverRequest,
  startServerProcess,
  tempStorageDir,
} from './support/server-process.js';

/**
 * SIGKILL at each step of a merge and of a push's pipeline (issue 23): for every fail point of
 * src/lib/failpoints.ts (a new point is covered here without a change), the real server
 * (src/main.ts, embedded database) is started with DEPOT_FAILPOINTS naming it, the operation
 * runs until the process group dies there, and a server started again on the same storage
 * must show nothing lost, nothing done twice and nothing stuck:
 * - a merge: the target at its old tip (the merge request open, and merging again merges it) or
 *   at a merge holding the source (the merge request merged, at once or when merged again);
 *   one merge commit, one `merged` event, one push event; the source branch removed with one
 *   push event; `git fsck` clean; the target writable.
 * - a push's pipeline: exactly one pipeline for the pushed commit once its job ran again, with
 *   all its jobs, and a runner gets its first job.
 * Under DATABASE_URL the database is external (a private cluster of the same PostgreSQL) and
 * outlives the kills, as a database server of its own would; else the embedded one dies too.
 */
const exec = promisify(execFile);
const TOKEN = 'glpat-killsteps-test-token-0123456789';
const storage = tempStorageDir('depot-killsteps-');
const external = process.env.DATABASE_URL ? await clusterProgram(process.env.DATABASE_URL) : undefined;
let cluster: PrivateCluster | undefined;
const env: Record<string, string> = {
  STORAGE_DIR: storage,
  WORKERS: '1',
  ADMIN_TOKEN: TOKEN,
  ADMIN_PASSWORD: 'a-long-admin-password',
};
const CI_FILE = [
  'stages: [build, test]',
  'build:',
  '  stage: build',
  '  script: echo build',
  'test:',
  '  stage: test',
  '  script: echo test',
  '',
].join('\n');

let server: ServerProcess | undefined;
/** Every fail point the operations below reached (each must be reached by one). */
const hit = new Set<string>();

afterAll(async () => {
  if (process.env.FAULTS_LOG) process.stderr.write(server?.output().slice(-6000) ?? '');
  await server?.crash();
  cluster?.stop();
  fs.rmSync(storage, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const call = (method: string, route: string, body?: unknown, token = TOKEN) =>
  serverRequest((server as ServerProcess).base, token, method, route, body);

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout.trim();

function repositoryOf(projectId: number): string {
  const h = createHash('sha256').update(String(projectId)).digest('hex');
  return path.join(storage, 'repositories', 'default', '@hashed', h.slice(0, 2), h.slice(2, 4), `${h}.git`);
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const family = (point: string) => point.split(':')[0] as string;

/**
 * The points in the order they are killed at: merge and pipeline points alternate, so the
 * server that comes back after one point's kill can already be armed with the next (the checks
 * of a merge reach no pipeline point and the other way round), which halves the restarts.
 */
const ORDER: string[] = (() => {
  const groups = [...new Set(FAILPOINTS.map(family))].map((f) => FAILPOINTS.filter((p) => family(p) === f));
  const order: string[] = [];
  for (let i = 0; groups.some((g) => i < g.length); i++)
    for (const g of groups) if (i < g.length) order.push(g[i] as string);
  return order;
})();

/** The point the running server is armed with (undefined: none). */
let armedWith: string | undefined;

async function restart(point: string | undefined): Promise<void> {
  await server?.crash();
  server = await startServerProcess(point ? { ...env, DEPOT_FAILPOINTS: point } : env);
  armedWith = point;
}

/**
 * Runs `operation` (whose answer may never come) on the server armed with `point`, waits for
 * the fail point to kill the process group, and starts the server again: armed with the next
 * point when its checks cannot reach that one, unarmed otherwise.
 */
async function killAt(point: string, operation: () => Promise<unknown>): Promise<void> {
  const armed = server as ServerProcess;
  expect(armedWith).toBe(point);
  const died = new Promise<void>((resolve) => {
    if (armed.child.exitCode !== null || armed.child.signalCode !== null) resolve();
    else armed.child.once('exit', () => resolve());
  });
  void operation().catch(() => undefined);
  const outcome = await Promise.race([died.then(() => 'died'), sleep(30_000).then(() => 'alive')]);
  expect(outcome, `the server did not die at ${point}:\n${armed.output().slice(-3000)}`).toBe('died');
  expect(armed.output()).toContain(failpointMarker(point));
  hit.add(point);
  // The rest of the power cut (whatever of the group is left, and the embedded database) is
  // the next start's crash().
  const next = ORDER[ORDER.indexOf(point) + 1];
  await restart(next !== undefined && family(next) !== family(point) ? next : undefined);
}

let mergeProject: number;
let pipelineProject: number;
let runnerToken: string;

/** The two projects and the runner, on a server not armed yet. */
async function setUp(): Promise<void> {
  if (external) {
    cluster = await startPrivateCluster(external.bindir);
    env.DATABASE_URL = cluster.url;
  }
  server = await startServerProcess(env);
  const merges = await call('POST', '/projects', { name: 'kill-merges', initialize_with_readme: true });
  expect(merges.status, merges.text).toBe(201);
  mergeProject = merges.body.id;
  const pipelines = await call('POST', '/projects', { name: 'kill-pipelines', initialize_with_readme: true });
  expect(pipelines.status, pipelines.text).toBe(201);
  pipelineProject = pipelines.body.id;
  const registration = await call('POST', `/projects/${pipelineProject}/runners/reset_registration_token`);
  expect(registration.status, registration.text).toBe(201);
  const runner = await call('POST', '/runners', {
    token: registration.body.token,
    description: 'kill-steps runner',
    info: { name: 'gitlab-runner', version: '17.0.0' },
  });
  expect(runner.status, runner.text).toBe(201);
  runnerToken = runner.body.token;
  const ci = await call('POST', `/projects/${pipelineProject}/repository/commits`, {
    branch: 'main',
    commit_message: 'CI',
    actions: [{ action: 'create', file_path: '.gitlab-ci.yml', content: CI_FILE }],
  });
  expect(ci.status, ci.text).toBe(201);
  // That commit's pipeline: its first job taken, so each step's pipeline has the only pending job.
  await until('the first pipeline', async () => {
    const list = await call('GET', `/projects/${pipelineProject}/pipelines?sha=${ci.body.id}`);
    return (list.body as unknown[]).length === 1 ? true : undefined;
  });
  expect((await requestJob()).status).toBe(201);
}

function requestJob(): Promise<ServerAnswer> {
  return call('POST', '/jobs/request', {
    token: runnerToken,
    info: { name: 'gitlab-runner', version: '17.0.0', features: { variables: true, artifacts: true } },
  });
}

let step = 0;

/**
 * What a restart finds after a kill at each merge point: the target unmoved, the target moved
 * with the merge request still locked (the next merge finishes it), or the merge request merged.
 * A point not listed must still meet the invariants, whichever it finds.
 */
const MERGE_OUTCOMES: Record<string, 'unmoved' | 'moved' | 'merged'> = {
  'merge:after-lock': 'unmoved',
  'merge:after-squash-commit': 'unmoved',
  'merge:after-merge-commit': 'unmoved',
  'merge:after-intent': 'unmoved',
  'merge:after-ref-update': 'moved',
  'merge:after-db': 'merged',
  'merge:after-source-branch-removal': 'merged',
};

/** A merge (squashed, source branch removed) killed at `point`, then checked and finished. */
async function mergeKilledAt(point: string): Promise<void> {
  step += 1;
  const id = mergeProject;
  const gitDir = repositoryOf(id);
  const branch = `feature-${step}`;
  const file = `${branch}.txt`;
  const source = await call('POST', `/projects/${id}/repository/commits`, {
    branch,
    start_branch: 'main',
    commit_message: branch,
    actions: [{ action: 'create', file_path: file, content: `${branch}\n` }],
  });
  expect(source.status, source.text).toBe(201);
  const created = await call('POST', `/projects/${id}/merge_requests`, {
    source_branch: branch,
    target_branch: 'main',
    title: `merge ${branch}`,
    squash: true,
    remove_source_branch: true,
  });
  expect(created.status, created.text).toBe(201);
  const iid = created.body.iid as number;
  await until('mergeability', async () => {
    const mr = await call('GET', `/projects/${id}/merge_requests/${iid}`);
    return mr.body.merge_status === 'can_be_merged' ? true : undefined;
  });
  const oldMain = await git(gitDir, 'rev-parse', 'refs/heads/main');

  await killAt(point, () => call('PUT', `/projects/${id}/merge_requests/${iid}/merge`));

  await git(gitDir, 'fsck', '--no-dangling');
  const main = await git(gitDir, 'rev-parse', 'refs/heads/main');
  const before = (await call('GET', `/projects/${id}/merge_requests/${iid}`)).body;
  if (main === oldMain) {
    // Not merged: the merge request is not marked merged, and merging again merges it.
    expect(before.state).not.toBe('merged');
  } else {
    // Merged: the target's new commit holds the source's change on top of the old tip.
    await git(gitDir, 'merge-base', '--is-ancestor', oldMain, main);
    expect(await git(gitDir, 'show', `${main}:${file}`)).toBe(branch);
  }
  const outcome = main === oldMain ? 'unmoved' : before.state === 'merged' ? 'merged' : 'moved';
  expect(outcome).toBe(MERGE_OUTCOMES[point] ?? outcome);
  const again = await call('PUT', `/projects/${id}/merge_requests/${iid}/merge`);
  if (before.state === 'merged') {
    // GitLab's answer to merging a merged merge request.
    expect(again.status, again.text).toBe(405);
  } else {
    expect(again.status, again.text).toBe(200);
    expect(again.body.state).toBe('merged');
  }
  const after = (await call('GET', `/projects/${id}/merge_requests/${iid}`)).body;
  expect(after.state).toBe('merged');
  const tip = await git(gitDir, 'rev-parse', 'refs/heads/main');
  // One merge: one commit on the target's first-parent line, the merge commit the row names,
  // whose second parent is the squash commit of the source.
  expect((await git(gitDir, 'rev-list', '--first-parent', `${oldMain}..${tip}`)).split('\n')).toEqual([tip]);
  expect(after.merge_commit_sha).toBe(tip);
  expect(await git(gitDir, 'rev-parse', `${tip}^2`)).toBe(after.squash_commit_sha);
  expect(await git(gitDir, 'show', `${tip}:${file}`)).toBe(branch);
  await git(gitDir, 'fsck', '--no-dangling');
  // One `merged` event, one push event for the target's move.
  const merged = await call('GET', `/projects/${id}/events?action=merged&target_type=merge_request&per_page=100`);
  expect((merged.body as { target_iid: number }[]).filter((e) => e.target_iid === iid)).toHaveLength(1);
  const pushed = await call('GET', `/projects/${id}/events?action=pushed&per_page=100`);
  const pushes = (pushed.body as { push_data: { commit_to: string | null; ref: string } }[]).filter(
    (e) => e.push_data.ref === 'main' && e.push_data.commit_to === tip,
  );
  expect(pushes).toHaveLength(1);
  // The source branch removed as asked: by the merge, or by the job queued with it.
  await until('the source branch removed', async () =>
    (await call('GET', `/projects/${id}/repository/branches/${branch}`)).status === 404 ? true : undefined,
  );
  // With its one push event, even when the process died between the removal and its event.
  const removals = async () =>
    (
      (await call('GET', `/projects/${id}/events?action=pushed&per_page=100`)).body as {
        push_data: { action: string; ref: string };
      }[]
    ).filter((e) => e.push_data.action === 'removed' && e.push_data.ref === branch);
  await until('the removal event', async () => ((await removals()).length > 0 ? true : undefined));
  expect(await removals()).toHaveLength(1);
  // Nothing stuck: no lock or lease keeps the target from the next write.
  const next = await call('POST', `/projects/${id}/repository/commits`, {
    branch: 'main',
    commit_message: `after ${branch}`,
    actions: [{ action: 'create', file_path: `after-${branch}.txt`, content: 'x' }],
  });
  expect(next.status, next.text).toBe(201);
}

/** A push whose pipeline job is killed at `point`; then exactly one pipeline, runnable. */
async function pipelineKilledAt(point: string): Promise<void> {
  step += 1;
  const id = pipelineProject;
  const gitDir = repositoryOf(id);
  const title = `push ${step}`;
  await killAt(point, () =>
    call('POST', `/projects/${id}/repository/commits`, {
      branch: 'main',
      commit_message: title,
      actions: [{ action: 'create', file_path: `push-${step}.txt`, content: title }],
    }),
  );
  await git(gitDir, 'fsck', '--no-dangling');
  // The push happened before its pipeline job was queued.
  const sha = await git(gitDir, 'rev-parse', 'refs/heads/main');
  expect(await git(gitDir, 'log', '-1', '--format=%s', sha)).toBe(title);
  const pipelines = async () => (await call('GET', `/projects/${id}/pipelines?sha=${sha}`)).body as { id: number }[];
  await until('the pipeline of the push', async () => ((await pipelines()).length > 0 ? true : undefined));
  // The job, run again, has finished by now: no second pipeline comes.
  await sleep(1_000);
  const found = await pipelines();
  expect(found).toHaveLength(1);
  const pipeline = (await call('GET', `/projects/${id}/pipelines/${found[0]?.id}`)).body;
  expect(pipeline.status).toBe('pending');
  const jobs = (await call('GET', `/projects/${id}/pipelines/${pipeline.id}/jobs`)).body as {
    id: number;
    name: string;
    status: string;
  }[];
  expect(jobs.map((j) => `${j.name}:${j.status}`).sort()).toEqual(['build:pending', 'test:created']);
  const picked = await requestJob();
  expect(picked.status, picked.text).toBe(201);
  expect(picked.body.id).toBe(jobs.find((j) => j.name === 'build')?.id);
}

describe.skipIf(external !== undefined && lacks(external))('SIGKILL at each fail point', () => {
  beforeAll(setUp, 120_000);

  for (const point of ORDER) {
    it(point, { timeout: 120_000 }, async () => {
      if (armedWith !== point) await restart(point);
      if (point.startsWith('merge:')) await mergeKilledAt(point);
      else if (point.startsWith('pipeline:')) await pipelineKilledAt(point);
      else throw new Error(`no operation reaches ${point}: add one to this test`);
    });
  }

  it('reached every point', () => {
    expect([...hit].sort()).toEqual([...FAILPOINTS].sort());
  });
});
