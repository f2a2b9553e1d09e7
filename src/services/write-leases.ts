import { randomBytes } from 'node:crypto';
import os from 'node:os';
import {
  deleteAllWriteLeases,
  deleteWriteLease,
  deleteWriteLeases,
  insertWriteLease,
  leftoverWriteLeases,
  projectWriteLeases,
  renewWriteLease,
} from '../db/queries/write-leases.js';
import type { Project } from '../db/schema.js';
import { removeWriteLeftovers } from '../git/locks.js';
import { forbidden } from '../http/errors.js';
import { processAlive } from '../lib/process-alive.js';
import type { Deps } from './deps.js';

/** GitLab's refusal of a write while a storage move holds the repository. */
export const READ_ONLY_MESSAGE = 'The repository is temporarily read-only. Please try again later.';

/** How often a write under way renews its lease. */
export const WRITE_LEASE_RENEW_MS = 30_000;
/**
 * A lease not renewed for this long is stale: its process is gone (six missed renewals, and
 * longer than any git command's own timeout, GIT_TIMEOUT_MS).
 */
export const WRITE_LEASE_STALE_SECONDS = 180;

/** This process as a lease holder: `<host>:<pid>:<nonce>` (the nonce tells a reused pid apart). */
const HOLDER = `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
/** Numbers this process's acquisitions: each lease's holder is `<HOLDER>:<n>`, unique to it. */
let acquisitions = 0;

export type WriteKind = 'push' | 'api' | 'lfs' | 'maintenance' | 'merge';

export interface WriteLease {
  /** Ends the lease (idempotent); call it when the write has ended, however it ended. */
  release(): Promise<void>;
}

/**
 * GitLab's reference counter of git transfers (Gitlab::ReferenceCounter), on the database: takes
 * a lease for one write to the project's repository, atomically with the read-only check, before
 * any byte is written. Null when the repository is read-only (a storage move) or no longer on
 * the storage the caller loaded it from. Every repository writer goes through here.
 */
export async function acquireWriteLease(
  deps: Deps,
  project: Pick<Project, 'id' | 'repository_storage'>,
  kind: WriteKind,
): Promise<WriteLease | null> {
  const holder = `${HOLDER}:${++acquisitions}`;
  let id: number | undefined;
  try {
    id = await insertWriteLease(deps.db, { projectId: project.id, storage: project.repository_storage, holder, kind });
  } catch (error) {
    // The database went away with the insert under way: it may have committed with its answer
    // lost. A lease nobody releases would hold storage moves back until it went stale.
    retryRelease(deps, holder, Date.now() + WRITE_LEASE_STALE_SECONDS * 1000);
    throw error;
  }
  if (id === undefined) return null;
  const leaseId = id;
  const timer = setInterval(() => {
    renewWriteLease(deps.db, leaseId).catch((error: unknown) =>
      deps.logger.warn({ err: error, project: project.id }, 'could not renew a write lease'),
    );
  }, WRITE_LEASE_RENEW_MS);
  timer.unref();
  let released: Promise<void> | undefined;
  const lease: WriteLease = {
    release: () => {
      clearInterval(timer);
      released ??= deleteWriteLease(deps.db, holder).catch((error: unknown) => {
        deps.logger.warn({ err: error, project: project.id }, 'could not release a write lease');
        // The database was away (a restart): this live process's lease would hold storage moves
        // back until it went stale, so it is released again in the background once it is back.
        retryRelease(deps, holder, Date.now() + WRITE_LEASE_STALE_SECONDS * 1000);
      });
      return released;
    },
  };
  try {
    await clearCrashedWrites(
      deps,
      project.id,
      deps.storages.repositoryPath(project.repository_storage, project.id),
      id,
    );
  } catch (error) {
    await lease.release();
    throw error;
  }
  return lease;
}

/** How often a lease the database could not delete is tried again. */
const RELEASE_RETRY_MS = 1_000;

function retryRelease(deps: Deps, holder: string, until: number): void {
  if (Date.now() > until) return;
  const timer = setTimeout(() => {
    deleteWriteLease(deps.db, holder).catch(() => retryRelease(deps, holder, until));
  }, RELEASE_RETRY_MS);
  timer.unref();
}

/** Runs `write` under a write lease; refused with GitLab's 403 while the repository is read-only. */
export async function withWriteLease<T>(
  deps: Deps,
  project: Pick<Project, 'id' | 'repository_storage'>,
  kind: WriteKind,
  write: () => Promise<T>,
): Promise<T> {
  const lease = await acquireWriteLease(deps, project, kind);
  if (!lease) throw forbidden(READ_ONLY_MESSAGE);
  try {
    return await write();
  } finally {
    await lease.release();
  }
}

/** A service write `(deps, project, ...)` that runs under a write lease (see withWriteLease). */
export function leasedWrite<A extends unknown[], R>(
  write: (deps: Deps, project: Project, ...rest: A) => Promise<R>,
  kind: WriteKind = 'api',
): (deps: Deps, project: Project, ...rest: A) => Promise<R> {
  return (deps, project, ...rest) => withWriteLease(deps, project, kind, () => write(deps, project, ...rest));
}

/** How many writes of `kind` to the project's repository are under way (crashed ones not counted). */
export async function liveWritesOfKind(deps: Deps, projectId: number, kind: WriteKind): Promise<number> {
  const leases = await projectWriteLeases(deps.db, projectId);
  return leases.filter((lease) => lease.kind === kind && !isStale(lease)).length;
}

/** A lease whose holder cannot still be writing: not renewed for long, or a dead process of this host. */
function isStale(lease: { holder: string; idle_seconds: number }): boolean {
  if (lease.idle_seconds > WRITE_LEASE_STALE_SECONDS) return true;
  const [host, pidText, nonce] = lease.holder.split(':');
  const [myHost, , myNonce] = HOLDER.split(':');
  if (host !== myHost) return false;
  const pid = Number(pidText);
  if (pid === process.pid) return nonce !== myNonce;
  return !Number.isInteger(pid) || pid <= 0 || !processAlive(pid);
}

/**
 * Clears what writers that crashed left in the project's repository, once no other writer is
 * live: their leases, and the ref locks and push quarantines they left, which would otherwise
 * refuse every update of those refs (git reports a lock as a conflict) until STALE_REF_LOCK_MS.
 * Only files older than the lease check go: a writer that took its lease after the check has
 * not started git before it. Returns how many other writers are live (`ownLease` not counted).
 */
async function clearCrashedWrites(deps: Deps, projectId: number, gitDir: string, ownLease?: number): Promise<number> {
  const checkedAt = Date.now();
  const leases = (await projectWriteLeases(deps.db, projectId)).filter((lease) => lease.id !== ownLease);
  const dead = leases.filter(isStale);
  const live = leases.length - dead.length;
  if (dead.length > 0 && live === 0) {
    const removed = await removeWriteLeftovers(gitDir, checkedAt);
    deps.logger.warn(
      { project: projectId, leases: dead, removed },
      'cleared the leftovers of crashed repository writes',
    );
    await deleteWriteLeases(
      deps.db,
      dead.map((l) => l.id),
    );
  }
  return live;
}

/**
 * How many writes to the project's repository are under way (GitLab's
 * `git_transfer_in_progress?`). Crashed writers are not counted, and cleared once no other
 * writer is live.
 */
export function writesInProgress(deps: Deps, projectId: number, gitDir: string): Promise<number> {
  return clearCrashedWrites(deps, projectId, gitDir);
}

/**
 * For the embedded database only, which one process uses at a time: every lease left in it
 * belongs to a process that stopped. Clears them with what their writes left in the
 * repositories.
 */
export async function clearLeftoverWrites(deps: Deps): Promise<number> {
  const leftovers = await leftoverWriteLeases(deps.db);
  const cutoff = Date.now();
  for (const { project_id, repository_storage } of leftovers) {
    if (!deps.storages.has(repository_storage)) continue;
    const gitDir = deps.storages.repositoryPath(repository_storage, project_id);
    const removed = await removeWriteLeftovers(gitDir, cutoff);
    if (removed.length > 0)
      deps.logger.warn({ project: project_id, removed }, 'cleared the leftovers of crashed writes');
  }
  return deleteAllWriteLeases(deps.db);
}
