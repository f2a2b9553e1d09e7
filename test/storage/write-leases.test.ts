import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { Project, User } from '../../src/db/schema.js';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import { loadProjectPolicy } from '../../src/policies/abilities.js';
import { openRuntime } from '../../src/runtime.js';
import { findProjectAndNamespace } from '../../src/services/projects.js';
import { createBranch } from '../../src/services/ref-writes.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeSampleProject, makeToken, makeUser } from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';
import { tempStorageDir } from '../support/server-process.js';

let app: TestApp;
let admin: User;
let adminToken: string;
let scratch: string;
let counter = 0;

const READ_ONLY = 'The repository is temporarily read-only. Please try again later.';
const ZERO = '0'.repeat(40);

beforeAll(async () => {
  app = await startTestApp({ storages: ['second'] });
  admin = await makeUser(app, { admin: true });
  adminToken = await makeToken(app, admin);
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-leases-'));
});

afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

const git = (args: string[], cwd = scratch) => runGitClient(args, cwd);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

async function moveRow(id: number) {
  return app.deps.db.selectFrom('repository_storage_moves').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

async function projectRow(id: number): Promise<Project> {
  return app.deps.db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

async function scheduleMove(project: Project): Promise<number> {
  const res = await app.request(`/projects/${project.id}/repository_storage_moves`, {
    method: 'POST',
    token: adminToken,
    body: { destination_storage_name: 'second' },
  });
  expect(res.status).toBe(201);
  return res.body.id as number;
}

/** A commit on top of the project's main, and the receive-pack request body that pushes it to `ref`. */
async function pushBody(project: Project, ref: string): Promise<{ body: Buffer; commit: string }> {
  const work = path.join(scratch, `work${++counter}`);
  const credentials = { login: admin.username, password: adminToken };
  expect((await git(['clone', '--quiet', remoteUrl(app.baseUrl, project, credentials), work])).code).toBe(0);
  await fs.writeFile(path.join(work, 'held.txt'), `written while a move was scheduled ${counter}\n`);
  await git(['add', 'held.txt'], work);
  expect((await git(['commit', '--quiet', '-m', 'a push that was under way'], work)).code).toBe(0);
  const commit = (await git(['rev-parse', 'HEAD'], work)).stdout.trim();
  const base = (await git(['rev-parse', 'HEAD^'], work)).stdout.trim();
  const pack = execFileSync('git', ['pack-objects', '--stdout', '--revs', '-q'], {
    cwd: work,
    input: `${commit}\n^${base}\n`,
  });
  const command = `${ZERO} ${commit} ${ref}\0report-status\n`;
  const line = Buffer.from(`${(command.length + 4).toString(16).padStart(4, '0')}${command}`);
  return { body: Buffer.concat([line, Buffer.from('0000'), pack]), commit };
}

/**
 * Starts a push whose request body is held back: it passed every check and holds its write
 * lease, git receive-pack runs, but git has read nothing yet, so there is no quarantine
 * directory or ref lock on disk.
 */
async function startHeldPush(project: Project): Promise<{ finish: (body: Buffer) => Promise<string> }> {
  const url = new URL(`/${project.full_path}.git/git-receive-pack`, app.baseUrl);
  const req = http.request(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/x-git-receive-pack-request',
      Authorization: `Basic ${Buffer.from(`${admin.username}:${adminToken}`).toString('base64')}`,
    },
  });
  const chunks: Buffer[] = [];
  const ended = new Promise<string>((resolve, reject) => {
    req.once('response', (response) => {
      if (response.statusCode !== 200) reject(new Error(`push answered ${response.statusCode}`));
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
      response.once('error', reject);
    });
    req.once('error', reject);
  });
  // Awaited by finish(); a test that fails first must not leave it rejecting unhandled.
  ended.catch(() => {});
  req.flushHeaders();
  await until(async () => (await leaseCount(project.id)) === 1);
  return {
    finish: (body: Buffer) => {
      req.end(body);
      return ended;
    },
  };
}

async function until(condition: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('timed out waiting for the condition');
    await sleep(25);
  }
}

async function insertLease(projectId: number, holder: string, idleSeconds: number): Promise<void> {
  await sql`INSERT INTO repository_write_leases (project_id, holder, kind, acquired_at, heartbeat_at)
    VALUES (${projectId}, ${holder}, 'push', now() - make_interval(secs => ${idleSeconds}),
            now() - make_interval(secs => ${idleSeconds}))`.execute(app.deps.db);
}

async function leaseCount(projectId: number): Promise<number> {
  const rows = await app.deps.db
    .selectFrom('repository_write_leases')
    .select('id')
    .where('project_id', '=', projectId)
    .execute();
  return rows.length;
}

describe('storage moves and writes under way (write leases)', () => {
  it('waits for a push that passed the read-only check before writing anything, and moves it', async () => {
    const { project, gitDir } = await makeSampleProject(app, admin, { path: `held${++counter}` });
    const { body, commit } = await pushBody(project, 'refs/heads/held-push');
    const push = await startHeldPush(project);
    // Nothing on disk tells that this push is under way.
    const objectDirs = await fs.readdir(path.join(gitDir, 'objects'));
    expect(objectDirs.filter((d) => d.includes('incoming'))).toEqual([]);

    const moveId = await scheduleMove(project);
    const worker = new Worker(app.deps, JOB_KINDS);
    const drained = worker.drain();
    await until(async () => {
      const move = await moveRow(moveId);
      return move.state !== 3 || move.step === 'waiting for writes';
    });
    await sleep(500);
    const waiting = await moveRow(moveId);
    expect({ state: waiting.state, step: waiting.step }).toEqual({ state: 3, step: 'waiting for writes' });
    const destDir = app.deps.storages.repositoryPath('second', project.id);
    expect(await exists(destDir)).toBe(false);

    // A writer arriving now is refused with GitLab's message, through the API and through git.
    const commitRes = await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token: adminToken,
      body: {
        branch: 'other',
        start_branch: 'main',
        commit_message: 'm',
        actions: [{ action: 'create', file_path: 'n.txt', content: 'n' }],
      },
    });
    expect(commitRes.status).toBe(403);
    expect(commitRes.body).toEqual({ message: `403 Forbidden - ${READ_ONLY}` });
    const late = await pushBody(project, 'refs/heads/late');
    const lateRes = await fetch(new URL(`/${project.full_path}.git/git-receive-pack`, app.baseUrl), {
      method: 'POST',
      headers: {
        'Content-Type': 'application/x-git-receive-pack-request',
        Authorization: `Basic ${Buffer.from(`${admin.username}:${adminToken}`).toString('base64')}`,
      },
      body: late.body,
    });
    expect(lateRes.status).toBe(403);
    expect(await lateRes.text()).toBe(`${READ_ONLY}\n`);

    // The held push completes and is acknowledged; only then does the move copy.
    const report = await push.finish(body);
    expect(report).toContain('unpack ok');
    expect(report).toContain('ok refs/heads/held-push');
    // The move, then the upkeep the push queued, which finds the repository at its destination.
    expect(await drained).toBe(2);

    const done = await moveRow(moveId);
    expect({ state: done.state, error: done.error_message }).toEqual({ state: 4, error: null });
    const moved = await projectRow(project.id);
    expect({ storage: moved.repository_storage, readOnly: moved.repository_read_only }).toEqual({
      storage: 'second',
      readOnly: false,
    });
    expect(await exists(gitDir)).toBe(false);
    expect((await git([`--git-dir=${destDir}`, 'rev-parse', 'refs/heads/held-push'])).stdout.trim()).toBe(commit);
    expect(await exists(path.join(destDir, 'objects', 'info', 'commit-graphs', 'commit-graph-chain'))).toBe(true);
    // A clone through the server (now from the destination) has the acknowledged push.
    const clone = path.join(scratch, `clone${++counter}`);
    const credentials = { login: admin.username, password: adminToken };
    expect(
      (await git(['clone', '--quiet', '--mirror', remoteUrl(app.baseUrl, project, credentials), clone])).code,
    ).toBe(0);
    expect((await git([`--git-dir=${clone}`, 'rev-parse', 'refs/heads/held-push'])).stdout.trim()).toBe(commit);
    expect((await git([`--git-dir=${clone}`, 'fsck', '--full'])).code).toBe(0);
    expect(await leaseCount(project.id)).toBe(0);
  }, 90_000);

  it('refuses a write whose project row was loaded before the move, once the project has moved', async () => {
    const { project, gitDir } = await makeSampleProject(app, admin, { path: `stale-row${++counter}` });
    const found = await findProjectAndNamespace(app.deps, String(project.id));
    const policy = await loadProjectPolicy(
      app.deps,
      admin,
      project,
      found?.namespace as NonNullable<typeof found>['namespace'],
    );
    const moveId = await scheduleMove(project);
    expect(await new Worker(app.deps, JOB_KINDS).drain()).toBe(1);
    expect((await moveRow(moveId)).state).toBe(4);
    // `project` still says writable, on `default`: the write must not land in the old place.
    await expect(createBranch(app.deps, project, policy, gitDir, 'late', 'main')).rejects.toMatchObject({
      status: 403,
      body: { message: `403 Forbidden - ${READ_ONLY}` },
    });
    expect(await exists(gitDir)).toBe(false);
    const destDir = app.deps.storages.repositoryPath('second', project.id);
    expect((await git([`--git-dir=${destDir}`, 'for-each-ref', 'refs/heads/late'])).stdout).toBe('');
  });

  it('ignores and removes stale leases: a dead process of this host, one not renewed for long', async () => {
    const { project } = await makeSampleProject(app, admin, { path: `stale-lease${++counter}` });
    const dead = spawnSync('true').pid;
    await insertLease(project.id, `${os.hostname()}:${dead}:gone`, 0);
    await insertLease(project.id, 'another-host:4242:gone', 3600);
    expect(await leaseCount(project.id)).toBe(2);
    const moveId = await scheduleMove(project);
    const started = Date.now();
    expect(await new Worker(app.deps, JOB_KINDS).drain()).toBe(1);
    expect(Date.now() - started).toBeLessThan(20_000);
    const done = await moveRow(moveId);
    expect({ state: done.state, error: done.error_message }).toEqual({ state: 4, error: null });
    expect(await leaseCount(project.id)).toBe(0);
  });
});

describe('a writer that crashed', () => {
  /** What a writer killed in the middle of a branch update and a push leaves in the repository. */
  async function leaveCrashLeftovers(gitDir: string): Promise<string[]> {
    const files = [path.join(gitDir, 'HEAD.lock'), path.join(gitDir, 'refs', 'heads', 'main.lock')];
    for (const file of files) await fs.writeFile(file, '');
    const quarantine = path.join(gitDir, 'objects', 'tmp_objdir-incoming-crashed');
    await fs.mkdir(quarantine);
    return [...files, quarantine];
  }

  async function commitToMain(project: Project, file: string) {
    const res = await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token: adminToken,
      body: { branch: 'main', commit_message: file, actions: [{ action: 'create', file_path: file, content: 'x\n' }] },
    });
    return { status: res.status, body: res.body };
  }

  it('leaves locks the next writer clears when no other writer is live', async () => {
    const { project, gitDir } = await makeSampleProject(app, admin, { path: `crashed-writer${++counter}` });
    const leftovers = await leaveCrashLeftovers(gitDir);
    // Its process is gone, its lease was renewed a moment ago.
    await insertLease(project.id, `${os.hostname()}:${spawnSync('true').pid}:gone`, 1);
    await sleep(20); // the leftovers predate the next writer's lease check
    expect(await commitToMain(project, 'after-crash.txt')).toMatchObject({ status: 201 });
    for (const file of leftovers) expect(await exists(file)).toBe(false);
    expect(await leaseCount(project.id)).toBe(0);
    // git agrees: the branch moved and the repository is sound.
    expect((await git([`--git-dir=${gitDir}`, 'show', 'main:after-crash.txt'])).stdout).toBe('x\n');
    expect((await git([`--git-dir=${gitDir}`, 'fsck', '--strict', '--no-dangling'])).stdout).toBe('');
  });

  it('does not touch locks while another writer may be holding them', async () => {
    const { project, gitDir } = await makeSampleProject(app, admin, { path: `crashed-writer${++counter}` });
    const leftovers = await leaveCrashLeftovers(gitDir);
    await insertLease(project.id, `${os.hostname()}:${spawnSync('true').pid}:gone`, 1);
    await insertLease(project.id, 'another-host:4242:live', 1);
    const tip = (await git([`--git-dir=${gitDir}`, 'rev-parse', 'main'])).stdout;
    expect(await commitToMain(project, 'blocked.txt')).toEqual({
      status: 400,
      body: { message: 'Could not update main. Please refresh and try again.' },
    });
    for (const file of leftovers) expect(await exists(file)).toBe(true);
    expect((await git([`--git-dir=${gitDir}`, 'rev-parse', 'main'])).stdout).toBe(tip);
    expect(await leaseCount(project.id)).toBe(2);
  });
});

describe('write leases in the embedded database after a crash', () => {
  it('are all removed when a fresh process opens the database', async () => {
    const storageDir = tempStorageDir('depot-leases-embedded-');
    try {
      const config = loadConfig({ STORAGE_DIR: storageDir, LOG_LEVEL: 'silent' });
      const first = await openRuntime(config);
      const user = await makeUser({ deps: first.deps } as TestApp);
      const { project } = await makeSampleProject({ deps: first.deps } as TestApp, user, { path: 'crashed' });
      // The process "crashes" in the middle of a push: its lease stays behind, fresh and on this pid.
      await sql`INSERT INTO repository_write_leases (project_id, holder, kind)
        VALUES (${project.id}, ${`${os.hostname()}:${process.pid}:earlier`}, 'push')`.execute(first.deps.db);
      const lock = path.join(first.deps.storages.repositoryPath(project.repository_storage, project.id), 'HEAD.lock');
      await fs.writeFile(lock, '');
      await first.close();
      const second = await openRuntime(config);
      try {
        const rows = await second.deps.db.selectFrom('repository_write_leases').select('id').execute();
        expect(rows).toEqual([]);
        expect(await exists(lock)).toBe(false);
      } finally {
        await second.close();
      }
    } finally {
      await fs.rm(storageDir, { recursive: true, force: true });
    }
  });
});
