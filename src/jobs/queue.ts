import os from 'node:os';
import { type Kysely, sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { DB, Job, JobState } from '../db/schema.js';
import { processAlive } from '../lib/process-alive.js';

/**
 * The durable job queue (DESIGN.md §1): jobs are rows, claimed with `FOR UPDATE SKIP LOCKED`
 * so any number of server processes share them. A claimed job carries its worker's identity and
 * a heartbeat; a job whose worker died (stale heartbeat, or a dead process on this host) is
 * claimed again, so nothing is lost on a crash. Handlers must therefore be idempotent.
 */

/** A running job whose heartbeat is older than this belongs to a dead worker. */
export const JOB_LEASE_SECONDS = 60;
export const DEFAULT_MAX_ATTEMPTS = 3;

export interface EnqueueOptions {
  runAt?: Date;
  maxAttempts?: number;
}

type Executor = Kysely<DB> | Db;

/** Adds a job; pass a transaction to make it part of the change that needs it. */
export async function enqueueJob(
  db: Executor,
  kind: string,
  payload: Record<string, unknown>,
  options: EnqueueOptions = {},
): Promise<Job> {
  return db
    .insertInto('jobs')
    .values({
      kind,
      payload: JSON.stringify(payload),
      max_attempts: options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      ...(options.runAt ? { run_at: options.runAt } : {}),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** A worker identity: host, process id and a per-boot nonce (process ids repeat in containers). */
export function workerIdentity(): string {
  return `${os.hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * Claims the oldest runnable job of the given kinds: queued and due, or running under a
 * lease that has expired. Increments `attempts`. Returns undefined when there is none.
 */
export async function claimJob(db: Db, kinds: readonly string[], workerId: string): Promise<Job | undefined> {
  if (kinds.length === 0) return undefined;
  const { rows } = await sql<Job>`
    UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_by = ${workerId},
      locked_at = now(), heartbeat_at = now(), updated_at = now()
    WHERE id = (
      SELECT id FROM jobs
      WHERE kind IN (${sql.join(kinds)})
        AND ((state = 'queued' AND run_at <= now())
          OR (state = 'running' AND heartbeat_at < now() - make_interval(secs => ${JOB_LEASE_SECONDS})))
      ORDER BY id
      LIMIT 1
      FOR UPDATE SKIP LOCKED)
    RETURNING *`.execute(db);
  return rows[0];
}

/** Extends the lease of a job this worker holds. */
export async function heartbeatJob(db: Db, id: number, workerId: string): Promise<void> {
  await db
    .updateTable('jobs')
    .set({ heartbeat_at: sql<Date>`now()` })
    .where('id', '=', id)
    .where('locked_by', '=', workerId)
    .where('state', '=', 'running')
    .execute();
}

/** Marks a job done (or failed for good). */
export async function finishJob(
  db: Db,
  id: number,
  workerId: string,
  state: Extract<JobState, 'done' | 'failed'>,
  error?: string,
): Promise<void> {
  await db
    .updateTable('jobs')
    .set({
      state,
      locked_by: null,
      finished_at: sql<Date>`now()`,
      updated_at: sql<Date>`now()`,
      ...(error !== undefined ? { last_error: error } : {}),
    })
    .where('id', '=', id)
    .where('locked_by', '=', workerId)
    .execute();
}

/** Deletes a job this worker holds (a done job of a kind that keeps no record). */
export async function deleteJob(db: Db, id: number, workerId: string): Promise<void> {
  await db.deleteFrom('jobs').where('id', '=', id).where('locked_by', '=', workerId).execute();
}

/** Deletes a job no worker has claimed yet (work its enqueuer did itself after all). */
export async function deleteQueuedJob(db: Db, id: number): Promise<void> {
  await db.deleteFrom('jobs').where('id', '=', id).where('state', '=', 'queued').execute();
}

/**
 * Puts a job back in the queue to run at `runAt`. `refundAttempt` when the job did not fail but
 * was interrupted by a shutdown.
 */
export async function requeueJob(
  db: Db,
  id: number,
  workerId: string,
  runAt: Date,
  options: { error?: string; refundAttempt?: boolean } = {},
): Promise<void> {
  await db
    .updateTable('jobs')
    .set({
      state: 'queued',
      locked_by: null,
      run_at: runAt,
      updated_at: sql<Date>`now()`,
      ...(options.refundAttempt ? { attempts: sql<number>`greatest(attempts - 1, 0)` } : {}),
      ...(options.error !== undefined ? { last_error: options.error } : {}),
    })
    .where('id', '=', id)
    .where('locked_by', '=', workerId)
    .execute();
}

/**
 * Makes jobs of dead workers claimable at once instead of after the lease: every running job
 * when `exclusive` (this process owns the database, as with embedded PGlite), otherwise those
 * locked by a process of this host that no longer exists (or an earlier boot of this pid).
 * Returns how many were released.
 */
export async function releaseDeadWorkers(db: Db, workerId: string, exclusive: boolean): Promise<number> {
  const running = await db.selectFrom('jobs').select(['id', 'locked_by']).where('state', '=', 'running').execute();
  const [host] = workerId.split(':');
  const dead = running.filter((job) => {
    if (exclusive) return true;
    const [jobHost, pidText, nonce] = (job.locked_by ?? '').split(':');
    if (jobHost !== host) return false;
    const pid = Number(pidText);
    if (pid === process.pid) return nonce !== workerId.split(':')[2];
    return !processAlive(pid);
  });
  if (dead.length === 0) return 0;
  await db
    .updateTable('jobs')
    .set({ state: 'queued', locked_by: null, updated_at: sql<Date>`now()` })
    .where(
      'id',
      'in',
      dead.map((j) => j.id),
    )
    .where('state', '=', 'running')
    .execute();
  return dead.length;
}

/** Jobs waiting or running, by kind and state (for /-/metrics). */
export async function queueDepth(db: Db): Promise<{ kind: string; state: string; count: number }[]> {
  const rows = await db
    .selectFrom('jobs')
    .select(['kind', 'state', (eb) => eb.fn.countAll<number>().as('count')])
    .where('state', 'in', ['queued', 'running'])
    .groupBy(['kind', 'state'])
    .execute();
  return rows.map((r) => ({ kind: r.kind, state: r.state, count: Number(r.count) }));
}
