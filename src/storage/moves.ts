import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import type { Logger } from 'pino';
import { pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import {
  findMove,
  lfsOidsNeededOn,
  projectLfsObjects,
  setMoveProgress,
  transitionMove,
} from '../db/queries/storage-moves.js';
import type { Namespace, Project, StorageMove, StorageMoveContainer } from '../db/schema.js';
import { evictRepository } from '../git/catfile.js';
import { runGit } from '../git/command.js';
import { storageFault } from '../git/errors.js';
import { writeLeftovers } from '../git/locks.js';
import { isValidStorageName } from '../git/validate.js';
import { enqueueJob } from '../jobs/queue.js';
import type { Deps } from '../services/deps.js';
import { Validation } from '../services/errors.js';
import { writesInProgress } from '../services/write-leases.js';
import {
  copyTreeDurably,
  createDirs,
  directorySize,
  fsyncPath,
  pathExists,
  renameDurably,
  type TransferMode,
  transferFileDurably,
} from './copy.js';
import { storageWeights } from './placement.js';
import type { Storages } from './storages.js';

/** GitLab's state values (app/models/concerns/repository_storage_movable.rb). */
export const MoveState = {
  initial: 1,
  scheduled: 2,
  started: 3,
  finished: 4,
  failed: 5,
  replicated: 6,
  cleanupFailed: 7,
} as const;

/** The API's state names: the human name, so `cleanup failed` has a space. */
export const MOVE_STATE_NAMES: Record<number, string> = {
  1: 'initial',
  2: 'scheduled',
  3: 'started',
  4: 'finished',
  5: 'failed',
  6: 'replicated',
  7: 'cleanup failed',
};

export const STORAGE_MOVE_JOB = 'repository_storage_move';
export const BULK_STORAGE_MOVE_JOB = 'repository_storage_move_bulk';

/** How long a move waits for pushes already under way when it starts. */
export const PUSH_DRAIN_TIMEOUT_MS = 30_000;
const PUSH_DRAIN_POLL_MS = 50;
/** Progress goes to the database at most this often (the CLI and /-/metrics read it there). */
const PROGRESS_WRITE_MS = 250;
const PROGRESS_LOG_MS = 5_000;
const TMP_DIR = '.tmp';

/** The container a move is for: a project, a group (wiki) or a snippet. */
export type MoveContainer =
  | { type: 'project'; project: Project }
  | { type: 'group'; group: Namespace }
  | { type: 'snippet'; id: number };

/** The storage a container's repository is on. Depot has no group or snippet repositories yet. */
export function containerStorage(container: MoveContainer): string {
  return container.type === 'project' ? container.project.repository_storage : 'default';
}

const containerId = (c: MoveContainer) =>
  c.type === 'project' ? c.project.id : c.type === 'group' ? c.group.id : c.id;

/** The error key GitLab uses for the container (`error_key` in each move model). */
const containerKey = (type: StorageMoveContainer) => type;

/**
 * Picks a destination by the `repository_storages_weighted` setting, leaving out the source;
 * undefined when no other storage has weight.
 */
export async function pickDestination(deps: Deps, source: string, random = Math.random): Promise<string | undefined> {
  const weights = await storageWeights(deps);
  const entries = Object.entries(weights).filter(([name, w]) => w > 0 && name !== source);
  const total = entries.reduce((sum, [, w]) => sum + w, 0);
  if (total === 0) return undefined;
  let point = random() * total;
  for (const [name, weight] of entries) {
    point -= weight;
    if (point < 0) return name;
  }
  return entries[entries.length - 1]?.[0];
}

/**
 * Validates and schedules one move (GitLab's `storage_move.schedule`): in one transaction the
 * move is recorded as scheduled, the repository becomes read-only and the job is queued. Throws
 * GitLab's 400 `{"message": {...}}` on validation failures.
 */
export async function scheduleMove(
  deps: Deps,
  container: MoveContainer,
  destinationName: string | undefined,
): Promise<StorageMove> {
  const source = containerStorage(container);
  const errors = new Validation();
  const known = (name: string) => isValidStorageName(name) && deps.storages.has(name);
  if (!known(source)) errors.add('source_storage_name', 'is not included in the list');
  const destination = destinationName ?? (await pickDestination(deps, source));
  if (destination === undefined || destination.trim() === '') {
    errors.add('destination_storage_name', "can't be blank");
  } else if (!known(destination)) {
    errors.add('destination_storage_name', 'is not included in the list');
  } else if (destination === source) {
    errors.add('destination_storage_name', 'must be different from the source storage');
  }
  if (container.type === 'project' && container.project.repository_read_only) {
    errors.add(containerKey('project'), 'is read-only');
  }
  errors.throwIfAny();
  const id = containerId(container);
  try {
    return await deps.db.transaction().execute(async (tx) => {
      if (container.type === 'project') {
        // The row lock and the condition make "writable → read-only" happen once.
        const locked = await tx
          .updateTable('projects')
          .set({ repository_read_only: true })
          .where('id', '=', id)
          .where('repository_read_only', '=', false)
          .where('repository_storage', '=', source)
          .returning('id')
          .executeTakeFirst();
        if (!locked) new Validation().add('project', 'is read-only').throwIfAny();
      }
      const move = await tx
        .insertInto('repository_storage_moves')
        .values({
          container_type: container.type,
          container_id: id,
          state: MoveState.scheduled,
          source_storage_name: source,
          destination_storage_name: destination as string,
          created_at: deps.clock.now(),
          updated_at: deps.clock.now(),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await enqueueJob(tx, STORAGE_MOVE_JOB, { move_id: move.id });
      return move;
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) {
      new Validation().add(containerKey(container.type), 'has a repository storage move in progress').throwIfAny();
    }
    throw error;
  }
}

/** Queues the bulk scheduling of every repository on `source` (answered with 202 at once). */
export async function enqueueBulkMoves(
  deps: Deps,
  type: StorageMoveContainer,
  source: string,
  destination: string | undefined,
): Promise<void> {
  await enqueueJob(deps.db, BULK_STORAGE_MOVE_JOB, { type, source, destination: destination ?? null });
}

/**
 * Schedules a move for every repository of `type` on `source` (GitLab's
 * ScheduleBulkRepositoryShardMovesService); repositories that cannot move now are skipped and
 * logged. Returns the moves scheduled.
 */
export async function scheduleBulkMoves(
  deps: Deps,
  type: StorageMoveContainer,
  source: string,
  destination: string | undefined,
  log: Logger = deps.logger,
): Promise<StorageMove[]> {
  // Depot keeps no group or snippet repositories yet: nothing of theirs is on any storage.
  if (type !== 'project') return [];
  const scheduled: StorageMove[] = [];
  let after = 0;
  for (;;) {
    const batch = await deps.db
      .selectFrom('projects')
      .selectAll()
      .where('repository_storage', '=', source)
      .where('id', '>', after)
      .orderBy('id')
      .limit(100)
      .execute();
    if (batch.length === 0) return scheduled;
    for (const project of batch) {
      after = project.id;
      try {
        scheduled.push(await scheduleMove(deps, { type: 'project', project }, destination));
      } catch (error) {
        const body = (error as { body?: unknown }).body;
        log.info({ project: project.full_path, id: project.id, errors: body }, 'project skipped by the bulk move');
      }
    }
  }
}

/**
 * Queues a job for every move still under way (scheduled, started, replicated) that has no
 * queued or running job, so no move stays in flight (and its repository read-only) forever.
 */
export async function requeueOrphanedMoves(deps: Deps): Promise<number> {
  const { rows } = await sql<{ id: number }>`
    SELECT m.id FROM repository_storage_moves m
    WHERE m.state IN (${MoveState.scheduled}, ${MoveState.started}, ${MoveState.replicated})
      AND NOT EXISTS (
        SELECT 1 FROM jobs j
        WHERE j.kind = ${STORAGE_MOVE_JOB} AND j.state IN ('queued', 'running')
          AND (j.payload->>'move_id')::int = m.id)
    ORDER BY m.id`.execute(deps.db);
  for (const { id } of rows) await enqueueJob(deps.db, STORAGE_MOVE_JOB, { move_id: id });
  return rows.length;
}

/** A test-only hook: `DEPOT_CRASH_AT=<step>` kills the process the moment the move reaches it. */
function crashPoint(step: string): void {
  if (process.env.DEPOT_CRASH_AT === step) process.kill(process.pid, 'SIGKILL');
}

/** Thrown to stop a move at a safe point when the server shuts down. */
export class MoveInterrupted extends Error {}

export interface RunMoveOptions {
  log: Logger;
  /** 1 for a first run; more when the move resumes after a crash. */
  attempt: number;
  signal?: AbortSignal;
}

const checkSignal = (signal: AbortSignal | undefined) => {
  if (signal?.aborted) throw new MoveInterrupted('the server is stopping');
};

/** Paths a project move works with. */
interface MovePaths {
  sourceRepo: string;
  destRepo: string;
  /** `<dest root>/.tmp/move-<id>`: everything in flight, removed on failure. */
  tmp: string;
  tmpRepo: string;
  tmpLfs: string;
}

function movePaths(storages: Storages, move: StorageMove): MovePaths {
  const tmp = path.join(storages.root(move.destination_storage_name), TMP_DIR, `move-${move.id}`);
  return {
    sourceRepo: storages.repositoryPath(move.source_storage_name, move.container_id),
    destRepo: storages.repositoryPath(move.destination_storage_name, move.container_id),
    tmp,
    tmpRepo: path.join(tmp, 'repository.git'),
    tmpLfs: path.join(tmp, 'lfs'),
  };
}

/**
 * Runs (or resumes) a move to its end: scheduled → started → replicated → finished. A move found
 * `started` was interrupted: its partial destination is discarded and the copy starts over. A
 * move found `replicated` only lacks the removal of its source.
 */
export async function runMove(deps: Deps, moveId: number, options: RunMoveOptions): Promise<void> {
  const move = await findMove(deps.db, moveId);
  if (!move) return;
  const log = options.log.child({ move: move.id, [move.container_type]: move.container_id });
  if (move.state === MoveState.scheduled) {
    if (!(await transitionMove(deps.db, move.id, [MoveState.scheduled], MoveState.started, { step: 'started' })))
      return;
    log.info({ from: move.source_storage_name, to: move.destination_storage_name }, 'repository storage move started');
    crashPoint('started');
  } else if (move.state === MoveState.started) {
    log.warn({ attempt: options.attempt, step: move.step }, 'resuming an interrupted repository storage move');
    await rollbackDestination(deps, move, log);
  } else if (move.state !== MoveState.replicated) {
    return;
  }
  const current = (await findMove(deps.db, moveId)) as StorageMove;
  if (current.state === MoveState.started) {
    try {
      await replicate(deps, current, log, options.signal);
    } catch (error) {
      if (error instanceof MoveInterrupted) throw error;
      const message = moveFailureMessage(current, error);
      log.error({ err: error }, 'repository storage move failed');
      await failMove(deps, current, message, log);
      return;
    }
  }
  await cleanup(deps, (await findMove(deps.db, moveId)) as StorageMove, log);
}

/**
 * What a failed move tells the administrator: a destination that refused the copy (read-only,
 * full) said plainly instead of the errno text of whichever file it refused.
 */
function moveFailureMessage(move: StorageMove, error: unknown): string {
  const fault = storageFault(error);
  if (fault === 'full') return `The destination storage ${move.destination_storage_name} is full`;
  if (fault === 'read_only') return `The destination storage ${move.destination_storage_name} is read-only`;
  return error instanceof Error ? error.message : String(error);
}

/**
 * Ends a move that cannot go on: an unfinished copy is discarded, the move fails and the
 * repository is writable on its source again; a replicated move becomes `cleanup failed`.
 */
export async function failMove(deps: Deps, move: StorageMove, message: string, log: Logger): Promise<void> {
  if (move.state === MoveState.replicated) {
    await transitionMove(deps.db, move.id, [MoveState.replicated], MoveState.cleanupFailed, { error_message: message });
    return;
  }
  if (![MoveState.initial, MoveState.scheduled, MoveState.started].includes(move.state as 1 | 2 | 3)) return;
  await rollbackDestination(deps, move, log).catch((error: unknown) =>
    log.error({ err: error }, 'could not remove the partial copy on the destination'),
  );
  await deps.db.transaction().execute(async (tx) => {
    const failed = await tx
      .updateTable('repository_storage_moves')
      .set({ state: MoveState.failed, error_message: message, step: null, updated_at: sql<Date>`now()` })
      .where('id', '=', move.id)
      .where('state', 'in', [MoveState.initial, MoveState.scheduled, MoveState.started])
      .executeTakeFirst();
    if (Number(failed.numUpdatedRows) === 1 && move.container_type === 'project') {
      await tx
        .updateTable('projects')
        .set({ repository_read_only: false })
        .where('id', '=', move.container_id)
        .where('repository_storage', '=', move.source_storage_name)
        .execute();
    }
  });
}

/**
 * Removes whatever an unfinished move put on its destination, but only while the database still
 * points the project at the source (so the destination copy is not the authoritative one).
 */
async function rollbackDestination(deps: Deps, move: StorageMove, log: Logger): Promise<void> {
  if (move.container_type !== 'project') return;
  const project = await deps.db
    .selectFrom('projects')
    .select(['repository_storage'])
    .where('id', '=', move.container_id)
    .executeTakeFirst();
  if (project && project.repository_storage === move.destination_storage_name) return;
  const paths = movePaths(deps.storages, move);
  await fs.rm(paths.tmp, { recursive: true, force: true });
  if (project && (await pathExists(paths.destRepo))) {
    log.info({ path: paths.destRepo }, 'removing the unfinished copy on the destination');
    await fs.rm(paths.destRepo, { recursive: true, force: true });
  }
  await removeLfsObjectsOf(deps, move, move.destination_storage_name);
}

/** Removes the project's LFS objects from one storage, keeping those another project there still needs. */
async function removeLfsObjectsOf(deps: Deps, move: StorageMove, storage: string): Promise<void> {
  const objects = await projectLfsObjects(deps.db, move.container_id);
  const needed = await lfsOidsNeededOn(
    deps.db,
    storage,
    objects.map((o) => o.oid),
    move.container_id,
    move.id,
  );
  for (const { oid } of objects) {
    if (!needed.has(oid)) await fs.rm(deps.storages.lfsObjectPath(storage, oid), { force: true });
  }
}

/** `<oid> <ref>` lines and the HEAD target: what must be equal on both sides. */
async function refSnapshot(gitDir: string): Promise<string> {
  const refs = await runGit({
    gitDir,
    subcommand: 'for-each-ref',
    flags: ['--format=%(objectname) %(refname)'],
  });
  const head = await fs.readFile(path.join(gitDir, 'HEAD'), 'utf8');
  return `HEAD ${head.trim()}\n${refs.stdout.toString('utf8')}`;
}

/** Loose plus packed object count (`git count-objects -v`). */
async function objectCount(gitDir: string): Promise<number> {
  const out = (await runGit({ gitDir, subcommand: 'count-objects', flags: ['-v'] })).stdout.toString('utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(out)?.[1] ?? 0);
  return field('count') + field('in-pack');
}

/**
 * Waits until writes that began before the repository became read-only are done (GitLab waits
 * on its reference counter); times out with GitLab's message. Every Depot writer holds a write
 * lease from before its first byte, taken atomically with the read-only check, so no live lease
 * means no Depot write is under way or can start (and what crashed writers left is cleared). The
 * lock and quarantine check stays for git processes that are not Depot writers (an
 * administrator's git on the storage).
 */
async function waitForWritesToDrain(
  deps: Deps,
  projectId: number,
  gitDir: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  const deadline = Date.now() + PUSH_DRAIN_TIMEOUT_MS;
  for (;;) {
    checkSignal(signal);
    if ((await writesInProgress(deps, projectId, gitDir)) === 0 && (await writeLeftovers(gitDir)).length === 0) {
      return;
    }
    if (Date.now() > deadline) throw new Error('Timeout waiting for project repository pushes');
    await new Promise((resolve) => setTimeout(resolve, PUSH_DRAIN_POLL_MS));
  }
}

/** Read size for hashing: larger chunks hash faster than the stream default of 64 KiB. */
const HASH_CHUNK_BYTES = 1024 * 1024;

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: HASH_CHUNK_BYTES })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** True when both names are the same inode (a hard link): the bytes are identical by construction. */
async function sameFile(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([fs.stat(a), fs.stat(b)]);
  return x.dev === y.dev && x.ino === y.ino;
}

/**
 * `DEPOT_STORAGE_MOVE_COPY=copy` makes every move copy bytes even between storages on one
 * filesystem (where it otherwise hard-links, see TransferMode).
 */
export function storageMoveTransferMode(): TransferMode {
  return process.env.DEPOT_STORAGE_MOVE_COPY === 'copy' ? 'copy' : 'auto';
}

/** Writes progress to the database (throttled) and the log (every few seconds). */
class ProgressReporter {
  private lastWrite = 0;
  private lastLog = 0;
  private pending: Promise<void> = Promise.resolve();
  copied = 0;

  constructor(
    private readonly deps: Deps,
    private readonly moveId: number,
    readonly total: number,
    private readonly log: Logger,
  ) {}

  update(copied: number): void {
    this.copied = copied;
    const now = Date.now();
    if (now - this.lastWrite >= PROGRESS_WRITE_MS) {
      this.lastWrite = now;
      this.pending = this.pending
        .then(() => setMoveProgress(this.deps.db, this.moveId, { bytesCopied: this.copied }))
        .catch(() => {});
    }
    if (now - this.lastLog >= PROGRESS_LOG_MS) {
      this.lastLog = now;
      this.log.info(
        { bytes_copied: copied, bytes_total: this.total, percent: percent(copied, this.total) },
        'repository storage move progress',
      );
    }
  }

  async flush(): Promise<void> {
    await this.pending;
    await setMoveProgress(this.deps.db, this.moveId, { bytesCopied: this.copied });
    this.log.info(
      { bytes_copied: this.copied, bytes_total: this.total, percent: percent(this.copied, this.total) },
      'repository storage move copied',
    );
  }
}

const percent = (done: number, total: number) => (total === 0 ? 100 : Math.floor((done / total) * 1000) / 10);

/**
 * started → replicated: copy into a temporary directory on the destination, fsync, verify,
 * rename into place, then switch the project's storage and make it writable in one transaction.
 */
async function replicate(deps: Deps, move: StorageMove, log: Logger, signal: AbortSignal | undefined): Promise<void> {
  if (move.container_type !== 'project') {
    // No repository of this kind exists in Depot yet: there is nothing to copy.
    await transitionMove(deps.db, move.id, [MoveState.started], MoveState.replicated, { step: 'replicated' });
    return;
  }
  const paths = movePaths(deps.storages, move);
  await setMoveProgress(deps.db, move.id, { step: 'waiting for writes' });
  await waitForWritesToDrain(deps, move.container_id, paths.sourceRepo, signal);
  const hasRepository = await pathExists(path.join(paths.sourceRepo, 'HEAD'));
  // A directory that is not a repository is not ours to judge: keep it where it is.
  if (!hasRepository && (await pathExists(paths.sourceRepo))) {
    throw new Error(`The source repository on ${move.source_storage_name} is not a valid repository`);
  }
  const sourceRefs = hasRepository ? await refSnapshot(paths.sourceRepo) : null;

  const lfs = await projectLfsObjects(deps.db, move.container_id);
  const lfsToCopy: { oid: string; size: number; from: string; to: string }[] = [];
  for (const object of lfs) {
    const from = deps.storages.lfsObjectPath(move.source_storage_name, object.oid);
    if (!(await pathExists(from))) continue; // linked but never uploaded: nothing to carry
    const size = (await fs.stat(from)).size;
    lfsToCopy.push({ oid: object.oid, size, from, to: path.join(paths.tmpLfs, object.oid) });
  }
  const repoBytes = hasRepository ? await directorySize(paths.sourceRepo) : 0;
  const total = repoBytes + lfsToCopy.reduce((sum, o) => sum + o.size, 0);
  await setMoveProgress(deps.db, move.id, { step: 'copying', bytesTotal: total, bytesCopied: 0 });
  const progress = new ProgressReporter(deps, move.id, total, log);
  const timings: Record<string, number> = {};
  let mark = performance.now();
  const lap = (name: string) => {
    const now = performance.now();
    timings[name] = Math.round(now - mark);
    mark = now;
  };

  // Copy (the repository and the LFS objects side by side), each file fsynced.
  await fs.rm(paths.tmp, { recursive: true, force: true });
  // One level at a time: Node's recursive mkdir reports a read-only destination as ENOENT.
  await createDirs(paths.tmpLfs);
  const mode = storageMoveTransferMode();
  let repoDone = 0;
  let lfsDone = 0;
  let copiedFiles = 0;
  const linkedLfs = new Set<string>();
  const digests = new Map<string, Promise<string>>();
  await Promise.all([
    hasRepository
      ? copyTreeDurably(paths.sourceRepo, paths.tmpRepo, {
          mode,
          onProgress: (bytes) => {
            repoDone = bytes;
            progress.update(repoDone + lfsDone);
          },
          check: () => {
            checkSignal(signal);
            copiedFiles += 1;
            if (copiedFiles === 2) crashPoint('copying');
          },
        })
      : Promise.resolve(0),
    (async () => {
      for (const object of lfsToCopy) {
        checkSignal(signal);
        const before = lfsDone;
        const linked = await transferFileDurably(object.from, object.to, object.size, mode, (bytes) => {
          lfsDone = before + bytes;
          progress.update(repoDone + lfsDone);
        });
        if (linked) linkedLfs.add(object.oid);
        // Hash the fsynced copy while the next files copy (the kernel copies, this thread hashes).
        else
          digests.set(
            object.oid,
            sha256File(object.to).catch(() => 'unreadable'),
          );
        lfsDone = before + object.size;
      }
      await fsyncPath(paths.tmpLfs);
    })(),
  ]);
  await fsyncPath(paths.tmp);
  await progress.flush();
  lap('copy_ms');
  crashPoint('copied');

  // Verify: the same refs and HEAD on both sides (and the source unchanged since the copy
  // began), a connected object graph and the same object count on the copy, every LFS object
  // either the very same file (linked) or bytes whose SHA-256 is its oid.
  await setMoveProgress(deps.db, move.id, { step: 'verifying' });
  const verifyRepository = async () => {
    if (!hasRepository) return;
    const [copyRefs, nowRefs, connected, copyCount, sourceCount] = await Promise.all([
      refSnapshot(paths.tmpRepo),
      refSnapshot(paths.sourceRepo),
      runGit({
        gitDir: paths.tmpRepo,
        subcommand: 'fsck',
        flags: ['--connectivity-only', '--no-progress', '--no-dangling'],
        timeoutMs: 30 * 60_000,
      }).then(
        () => true,
        () => false,
      ),
      objectCount(paths.tmpRepo),
      objectCount(paths.sourceRepo),
    ]);
    if (copyRefs !== sourceRefs || nowRefs !== sourceRefs) {
      throw new Error(
        `Failed to verify project repository checksum from ${move.source_storage_name} to ${move.destination_storage_name}`,
      );
    }
    if (!connected) {
      throw new Error(`Failed to verify project repository connectivity on ${move.destination_storage_name}`);
    }
    if (copyCount !== sourceCount) {
      throw new Error(
        `Failed to verify project repository object count from ${move.source_storage_name} to ${move.destination_storage_name}`,
      );
    }
  };
  const verifyLfs = async () => {
    for (const object of lfsToCopy) {
      const same = linkedLfs.has(object.oid) && (await sameFile(object.from, object.to));
      if (!same && (await (digests.get(object.oid) ?? sha256File(object.to))) !== object.oid) {
        throw new Error(`Failed to verify LFS object ${object.oid} on ${move.destination_storage_name}`);
      }
    }
  };
  await Promise.all([verifyRepository(), verifyLfs()]);
  lap('verify_ms');
  crashPoint('verified');

  // Rename into place. Whatever sits at the final path is not authoritative (the database
  // points at the source): an earlier unfinished move left it.
  await setMoveProgress(deps.db, move.id, { step: 'renaming' });
  checkSignal(signal);
  if (hasRepository) {
    if (await pathExists(paths.destRepo)) {
      const stale = path.join(paths.tmp, 'stale.git');
      await renameDurably(paths.destRepo, stale);
      await fs.rm(stale, { recursive: true, force: true });
    }
    await renameDurably(paths.tmpRepo, paths.destRepo);
  }
  // LFS objects: every rename first, then each directory that changed fsynced once.
  const lfsDirs = new Set<string>();
  for (const object of lfsToCopy) {
    const target = deps.storages.lfsObjectPath(move.destination_storage_name, object.oid);
    for (const dir of await createDirs(path.dirname(target))) lfsDirs.add(dir);
    await fs.rename(object.to, target);
    lfsDirs.add(path.dirname(target));
  }
  if (lfsToCopy.length > 0) lfsDirs.add(paths.tmpLfs);
  await Promise.all([...lfsDirs].map(fsyncPath));
  lap('rename_ms');
  crashPoint('renamed');

  // Switch the project in the same transaction as the state change.
  await deps.db.transaction().execute(async (tx) => {
    const switched = await tx
      .updateTable('projects')
      .set({
        repository_storage: move.destination_storage_name,
        repository_read_only: false,
        updated_at: deps.clock.now(),
      })
      .where('id', '=', move.container_id)
      .where('repository_storage', '=', move.source_storage_name)
      .executeTakeFirst();
    if (Number(switched.numUpdatedRows) !== 1) throw new Error('The project is no longer on the source storage');
    const moved = await tx
      .updateTable('repository_storage_moves')
      .set({ state: MoveState.replicated, step: 'replicated', updated_at: sql<Date>`now()` })
      .where('id', '=', move.id)
      .where('state', '=', MoveState.started)
      .executeTakeFirst();
    if (Number(moved.numUpdatedRows) !== 1) throw new Error('The move is no longer started');
  });
  evictRepository(paths.sourceRepo);
  lap('switch_ms');
  log.info({ to: move.destination_storage_name, ...timings }, 'repository storage move replicated; project switched');
  crashPoint('replicated');
}

/**
 * replicated → finished: remove the source copy (and LFS objects no other project on the
 * source needs). If the source changed after the copy (a push that began before read-only and
 * ended late), it is kept and the move is `cleanup failed`, so nothing is lost.
 */
async function cleanup(deps: Deps, move: StorageMove, log: Logger): Promise<void> {
  if (move.state !== MoveState.replicated) return;
  try {
    if (move.container_type === 'project') {
      const paths = movePaths(deps.storages, move);
      await setMoveProgress(deps.db, move.id, { step: 'cleanup' });
      if (await pathExists(path.join(paths.sourceRepo, 'HEAD'))) {
        const [source, dest] = await Promise.all([refSnapshot(paths.sourceRepo), refSnapshot(paths.destRepo)]);
        if (source !== dest) {
          throw new Error(
            `The source repository on ${move.source_storage_name} changed during the move; it was kept for inspection`,
          );
        }
      }
      // One rename takes the whole source out of place, so an interrupted removal never leaves a
      // half-deleted repository at the source path; the trash is emptied now or on resume.
      const trash = path.join(deps.storages.root(move.source_storage_name), TMP_DIR, `removed-move-${move.id}.git`);
      evictRepository(paths.sourceRepo);
      if (await pathExists(paths.sourceRepo)) await renameDurably(paths.sourceRepo, trash);
      await fs.rm(trash, { recursive: true, force: true });
      await removeLfsObjectsOf(deps, move, move.source_storage_name);
      await fs.rm(paths.tmp, { recursive: true, force: true });
      crashPoint('cleaned');
    }
    await transitionMove(deps.db, move.id, [MoveState.replicated], MoveState.finished, { step: null });
    log.info('repository storage move finished');
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    log.error({ err: error }, 'repository storage move could not remove the source copy');
    await transitionMove(deps.db, move.id, [MoveState.replicated], MoveState.cleanupFailed, {
      error_message: message,
      step: null,
    });
  }
}
