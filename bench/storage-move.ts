/**
 * Storage move throughput against `cp -a` of the same repository in the same run: a 200 MiB
 * repository plus 100 MiB of LFS objects moved between two storage roots on one filesystem by
 * the real mover (copy, fsync, verify with git, rename, database switch, source removal), and
 * the same files copied with `cp -a` (and with `cp -a` followed by `sync`, which is what a
 * durable copy costs). Higher throughput is better; the goal is ≥ 0.7× of `cp -a`.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../src/config.js';
import { linkLfsObject } from '../src/db/queries/lfs.js';
import { findUserNamespace } from '../src/db/queries/namespaces.js';
import { JOB_KINDS } from '../src/jobs/kinds.js';
import { Worker } from '../src/jobs/worker.js';
import { openRuntime } from '../src/runtime.js';
import { createProject } from '../src/services/projects.js';
import { createUser } from '../src/services/users.js';
import { directorySize } from '../src/storage/copy.js';
import { MoveState, scheduleMove } from '../src/storage/moves.js';
import { benchRepository } from './fixtures/repositories.js';
import { type Measurement, measurement, median } from './harness.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const LFS_OBJECTS = 10;
const LFS_OBJECT_BYTES = 10 * 1024 * 1024;
const MIB = 1024 * 1024;

function sh(command: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, args, { stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve(performance.now() - started) : reject(new Error(`${command} exited ${code}`)),
    );
  });
}

export async function run(): Promise<{ measurements: Measurement[]; notes: string[] }> {
  const source = await benchRepository('large');
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-move-'));
  fs.chmodSync(scratch, 0o755); // the embedded database's postgres user must reach it (as root)
  try {
    const roots = { default: path.join(scratch, 'default'), second: path.join(scratch, 'second') };
    const config = loadConfig({
      STORAGE_DIR: scratch,
      REPOSITORY_STORAGES: `default=${roots.default},second=${roots.second}`,
      LOG_LEVEL: 'silent',
    });
    const runtime = await openRuntime(config, { logger: pino({ level: process.env.BENCH_LOG_LEVEL ?? 'silent' }) });
    const { deps } = runtime;
    const { storages } = deps;
    const user = await createUser(
      deps,
      { username: 'bench', email: 'bench@example.com', name: 'Bench', randomPassword: true, admin: true },
      null,
    );
    const namespace = await findUserNamespace(deps.db, user.id);
    if (!namespace) throw new Error('no namespace');
    const project = await createProject(
      deps,
      user,
      { name: 'moving', path: 'moving', visibility: 'private' },
      namespace,
    );
    const repo = storages.repositoryPath('default', project.id);
    fs.rmSync(repo, { recursive: true, force: true });
    await sh('cp', ['-a', source, repo]);
    for (let i = 0; i < LFS_OBJECTS; i++) {
      const content = randomBytes(LFS_OBJECT_BYTES);
      const oid = createHash('sha256').update(content).digest('hex');
      const file = storages.lfsObjectPath('default', oid);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, content);
      await linkLfsObject(deps.db, project.id, oid, content.length);
    }
    const bytes = (await directorySize(repo)) + (await directorySize(path.join(roots.default, '@lfs')));
    const worker = new Worker(deps, JOB_KINDS);

    const moveMs: number[] = [];
    const copyMoveMs: number[] = [];
    const cpMs: number[] = [];
    const cpSyncMs: number[] = [];
    let on = 'default';
    for (let i = 0; i < RUNS; i++) {
      // cp -a of the same files, onto the other root (same filesystem, same page cache state).
      const other = on === 'default' ? 'second' : 'default';
      const target = path.join(storages.root(other), 'cp-copy');
      const from = storages.repositoryPath(on, project.id);
      const lfs = path.join(storages.root(on), '@lfs');
      fs.mkdirSync(target, { recursive: true });
      cpMs.push(await sh('cp', ['-a', from, lfs, target]));
      fs.rmSync(target, { recursive: true, force: true });
      fs.mkdirSync(target, { recursive: true });
      const started = performance.now();
      await sh('cp', ['-a', from, lfs, target]);
      await sh('sync', ['-f', target]);
      cpSyncMs.push(performance.now() - started);
      fs.rmSync(target, { recursive: true, force: true });

      // There and back: hard links (roots on one filesystem), then forced byte copies (the path
      // for roots on different filesystems).
      for (const [mode, times] of [
        ['auto', moveMs],
        ['copy', copyMoveMs],
      ] as const) {
        process.env.DEPOT_STORAGE_MOVE_COPY = mode;
        const destination = on === 'default' ? 'second' : 'default';
        const current = await deps.db
          .selectFrom('projects')
          .selectAll()
          .where('id', '=', project.id)
          .executeTakeFirstOrThrow();
        const t0 = performance.now();
        const move = await scheduleMove(deps, { type: 'project', project: current }, destination);
        await worker.drain();
        times.push(performance.now() - t0);
        const done = await deps.db
          .selectFrom('repository_storage_moves')
          .select(['state', 'error_message'])
          .where('id', '=', move.id)
          .executeTakeFirstOrThrow();
        if (done.state !== MoveState.finished) throw new Error(`move did not finish: ${done.error_message}`);
        on = destination;
      }
      delete process.env.DEPOT_STORAGE_MOVE_COPY;
    }
    await runtime.close();
    const throughput = (ms: number) => bytes / MIB / (ms / 1000);
    const move = throughput(median(moveMs));
    return {
      measurements: [
        measurement(
          `storage move of ${(bytes / MIB).toFixed(0)} MiB (repository + LFS)`,
          'MiB/s',
          move,
          throughput(median(cpMs)),
          'cp -a',
          'higher',
          '≥ 0.7×',
        ),
        measurement(
          `storage move of ${(bytes / MIB).toFixed(0)} MiB against a durable copy`,
          'MiB/s',
          move,
          throughput(median(cpSyncMs)),
          'cp -a + sync -f',
          'higher',
        ),
        measurement(
          `storage move of ${(bytes / MIB).toFixed(0)} MiB, bytes copied (roots on different filesystems)`,
          'MiB/s',
          throughput(median(copyMoveMs)),
          throughput(median(cpMs)),
          'cp -a',
          'higher',
        ),
        measurement(
          `storage move of ${(bytes / MIB).toFixed(0)} MiB, bytes copied, against a durable copy`,
          'MiB/s',
          throughput(median(copyMoveMs)),
          throughput(median(cpSyncMs)),
          'cp -a + sync -f',
          'higher',
        ),
      ],
      notes: [
        `median of ${RUNS} runs, alternating between two storage roots on one filesystem, warm page cache`,
        'roots on one filesystem: the mover hard-links the files (no bytes to copy, as GitLab skips replication between storages on one filesystem); DEPOT_STORAGE_MOVE_COPY=copy forces the byte copy that roots on different filesystems get',
        'the move includes fsync of every file and directory, git for-each-ref on both sides, git fsck --connectivity-only and count-objects on the copy, SHA-256 of every copied LFS object (a linked one is checked to be the same inode), the database switch and removal of the source',
        `move ms ${moveMs.map((v) => v.toFixed(0)).join(', ')}; copying move ms ${copyMoveMs.map((v) => v.toFixed(0)).join(', ')}; cp -a ms ${cpMs.map((v) => v.toFixed(0)).join(', ')}; cp -a + sync ms ${cpSyncMs.map((v) => v.toFixed(0)).join(', ')}`,
      ],
    };
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
