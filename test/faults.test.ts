import { execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { gitEnvironment } from '../src/git/command.js';
import { writeLeftovers } from '../src/git/locks.js';
import { clusterProgram, type PrivateCluster, postgresIdentity, startPrivateCluster } from './support/pg-cluster.js';
import { lacks } from './support/programs.js';
import { type ServerProcess, serverRequest, startServerProcess, tempStorageDir } from './support/server-process.js';

/**
 * Faults (issue 23): the real server (src/main.ts, WORKERS=2) under a small load while its
 * database restarts (the embedded server; under DATABASE_URL an external one: a private cluster
 * of the same PostgreSQL, as the run's shared server cannot restart under other test files) and
 * one of its server processes is killed (the whole instance killed at each step of a merge or a
 * pipeline's creation: kill-steps.test.ts). Requests may fail while the database is away, but
 * cleanly (GitLab's 500 JSON, never a hang or a reset connection); Depot recovers without a
 * restart, and nothing acknowledged is lost.
 */
const exec = promisify(execFile);
const TOKEN = 'glpat-faults-test-token-0123456789';
const dirs: string[] = [];
let server: ServerProcess | undefined;
let cluster: PrivateCluster | undefined;
const external = process.env.DATABASE_URL ? await clusterProgram(process.env.DATABASE_URL) : undefined;

afterAll(async () => {
  // What the server said, when a fault went wrong.
  if (process.env.FAULTS_LOG) process.stderr.write(server?.output().slice(-6000) ?? '');
  await server?.crash();
  cluster?.stop();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const call = (base: string, method: string, route: string, body?: unknown) =>
  serverRequest(base, TOKEN, method, route, body);

/** The embedded server's command line, as it wrote it to postmaster.opts. */
function postmasterCommand(dataDir: string): string[] {
  const opts = fs.readFileSync(path.join(dataDir, 'postmaster.opts'), 'utf8').trim();
  const first = opts.split(' ')[0] as string;
  const args = [...opts.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1] as string);
  return [first, ...args];
}

/** Restarts the embedded database under the running Depot: fast shutdown, a pause, the same command. */
async function restartDatabase(storage: string, downMs: number): Promise<void> {
  const dataDir = path.join(storage, 'db');
  const command = postmasterCommand(dataDir);
  const pid = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 500; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      break;
    }
    await sleep(20);
  }
  await sleep(downMs);
  const log = fs.openSync(path.join(dataDir, 'restart.log'), 'a');
  const child = spawn(command[0] as string, command.slice(1), {
    ...postgresIdentity(),
    detached: true,
    stdio: ['ignore', log, log],
    env: { ...process.env, LC_ALL: 'C' },
  });
  fs.closeSync(log);
  child.unref();
  for (let i = 0; i < 500; i++) {
    const pidFile = path.join(dataDir, 'postmaster.pid');
    if (fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').includes('ready')) return;
    await sleep(20);
  }
  throw new Error('the database did not come back');
}

/** The server processes (cluster workers) of a Depot primary: node children of a node process. */
function workerPids(groupLeader: number): number[] {
  const ps = spawnSync('ps', ['-o', 'pid=,ppid=,comm=,args=', '-g', String(groupLeader)], { encoding: 'utf8' });
  const rows = ps.stdout
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .map(([pid, ppid, comm, ...args]) => ({ pid: Number(pid), ppid: Number(ppid), comm, args: args.join(' ') }));
  // The git spawner is a node child too; server processes run main.ts.
  const nodes = rows.filter((r) => r.comm === 'node' && !r.args.includes('spawner'));
  const children = new Map<number, number[]>();
  for (const row of nodes) children.set(row.ppid, [...(children.get(row.ppid) ?? []), row.pid]);
  for (const [, pids] of children) if (pids.length >= 2) return pids;
  return [];
}

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout.trim();

describe.skipIf(external !== undefined && lacks(external))('faults', () => {
  it('a database restart and a killed server process lose nothing', {
    timeout: 300_000,
  }, async () => {
    const storage = tempStorageDir('depot-faults-');
    dirs.push(storage);
    const roots = { default: path.join(storage, 'repos', 'default'), second: path.join(storage, 'repos', 'second') };
    if (external) cluster = await startPrivateCluster(external.bindir);
    const env: Record<string, string> = {
      ...(cluster ? { DATABASE_URL: cluster.url } : {}),
      STORAGE_DIR: storage,
      WORKERS: '2',
      ADMIN_TOKEN: TOKEN,
      ADMIN_PASSWORD: 'a-long-admin-password',
      REPOSITORY_STORAGES: `default=${roots.default},second=${roots.second}`,
    };
    server = await startServerProcess(env);
    const base = server.base;
    const project = await call(base, 'POST', '/projects', { name: 'faults', initialize_with_readme: true });
    expect(project.status).toBe(201);
    const id = project.body.id as number;

    // 1. The database restarts under load: 6 clients read and commit meanwhile.
    const acknowledged = new Map<string, string>();
    const failures: string[] = [];
    const statuses: Record<number, number> = {};
    let running = true;
    let n = 0;
    const client = async (c: number) => {
      while (running) {
        n += 1;
        const branch = `load-${c}-${n}`;
        try {
          const write = await call(base, 'POST', `/projects/${id}/repository/commits`, {
            branch,
            start_branch: 'main',
            commit_message: branch,
            actions: [{ action: 'create', file_path: `${branch}.txt`, content: branch }],
          });
          const read = await call(base, 'GET', `/projects/${id}/repository/tree`);
          for (const answer of [write, read]) {
            statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
            if (answer.status >= 500 && !(answer.body && 'message' in answer.body)) {
              failures.push(`${answer.status} not in GitLab's shape: ${answer.text.slice(0, 200)}`);
            }
          }
          if (write.status === 201) acknowledged.set(branch, write.body.id);
          else if (write.status < 500) failures.push(`commit answered ${write.status}: ${write.text.slice(0, 200)}`);
        } catch (error) {
          failures.push(`no answer: ${String(error)}`);
        }
        await sleep(20);
      }
    };
    const clients = Array.from({ length: 6 }, (_, c) => client(c));
    await sleep(1_500);
    await (cluster ? cluster.restart(1_000) : restartDatabase(storage, 1_000));
    // Recovery without restarting Depot: both server processes answer again within seconds.
    let recovered = false;
    for (let i = 0; i < 100 && !recovered; i++) {
      const answers = await Promise.all(Array.from({ length: 6 }, () => call(base, 'GET', '/user')));
      recovered = answers.every((a) => a.status === 200);
      if (!recovered) await sleep(200);
    }
    expect(recovered).toBe(true);
    await sleep(1_500);
    running = false;
    await Promise.all(clients);
    expect(failures).toEqual([]);
    console.info('faults: answers while the database restarted', JSON.stringify(statuses));
    expect(statuses[201]).toBeGreaterThan(5);
    // Every acknowledged commit is there.
    const branches = new Map<string, string>();
    for (let page = 1; ; page++) {
      const list = await call(base, 'GET', `/projects/${id}/repository/branches?per_page=100&page=${page}`);
      for (const b of list.body as { name: string; commit: { id: string } }[]) branches.set(b.name, b.commit.id);
      if ((list.body as unknown[]).length < 100) break;
    }
    for (const [branch, sha] of acknowledged) expect(branches.get(branch), branch).toBe(sha);

    {
      const h = createHash('sha256').update(String(id)).digest('hex');
      const dir = path.join(roots.default, '@hashed', h.slice(0, 2), h.slice(2, 4), `${h}.git`);
      if (process.env.FAULTS_LOG) console.error('LEFTOVERS', await writeLeftovers(dir));
    }
    // 2. A server process killed just after a storage move is queued (either process may have
    // claimed it): the primary starts another, and the move is carried out all the same.
    const leader = server.child.pid as number;
    const before = workerPids(leader);
    expect(before).toHaveLength(2);
    const move = await call(base, 'POST', `/projects/${id}/repository_storage_moves`, {
      destination_storage_name: 'second',
    });
    expect(move.status).toBe(201);
    process.kill(before[0] as number, 'SIGKILL');
    // Kept-alive connections to the dead process are gone with it; new ones go to the living.
    await sleep(300);
    let state = move.body.state as string;
    for (let i = 0; i < 300 && state !== 'finished' && state !== 'failed'; i++) {
      await sleep(100);
      const found = await call(base, 'GET', `/project_repository_storage_moves/${move.body.id}`);
      if (found.status === 200) state = found.body.state;
    }
    expect(state).toBe('finished');
    for (let i = 0; i < 100 && workerPids(leader).length < 2; i++) await sleep(100);
    expect(workerPids(leader)).toHaveLength(2);
    expect((await call(base, 'GET', `/projects/${id}/repository/files/README.md?ref=main`)).status).toBe(200);

    // The moved repository is sound at its new place. (SIGKILL at each step of a merge and of a
    // pipeline's creation: test/kill-steps.test.ts.)
    const hash = createHash('sha256').update(String(id)).digest('hex');
    const gitDir = path.join(roots.second, '@hashed', hash.slice(0, 2), hash.slice(2, 4), `${hash}.git`);
    await git(gitDir, 'fsck', '--no-dangling');
  });
});
