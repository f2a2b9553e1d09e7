import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Deps } from '../services/deps.js';
import type { JobContext, JobKind } from './worker.js';

/**
 * A job that runs every day at a fixed UTC time, or every hour at a fixed minute when it has no
 * `hourUtc`, and queues its next run itself.
 */
export interface RecurringSchedule {
  kind: string;
  hourUtc?: number;
  minuteUtc: number;
}

/** The first `hh:mm` UTC strictly after `now`. */
export function nextDailyRun(now: Date, hourUtc: number, minuteUtc: number): Date {
  const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), hourUtc, minuteUtc));
  if (next.getTime() <= now.getTime()) next.setUTCDate(next.getUTCDate() + 1);
  return next;
}

/** The first `hh:mm` of any hour strictly after `now`. */
export function nextHourlyRun(now: Date, minuteUtc: number): Date {
  const next = new Date(now.getTime());
  next.setUTCMinutes(minuteUtc, 0, 0);
  if (next.getTime() <= now.getTime()) next.setUTCHours(next.getUTCHours() + 1);
  return next;
}

/**
 * Queues the next run of a recurring job unless one is already waiting. Two processes starting at
 * the same instant may both queue one; the runs are idempotent and the next time there is one
 * again. `now` is the database's clock.
 */
export async function scheduleNextRun(db: Db, schedule: RecurringSchedule, now: Date): Promise<void> {
  const runAt =
    schedule.hourUtc === undefined
      ? nextHourlyRun(now, schedule.minuteUtc)
      : nextDailyRun(now, schedule.hourUtc, schedule.minuteUtc);
  await sql`INSERT INTO jobs (kind, payload, run_at, max_attempts)
    SELECT ${schedule.kind}, ${JSON.stringify({ recurring: true })}::jsonb, ${runAt}, 3
    WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE kind = ${schedule.kind} AND state = 'queued')`.execute(db);
}

/** Queues the next run of `schedule` after the database's current time (idempotent). */
export async function queueNextRun(deps: Pick<Deps, 'db'>, schedule: RecurringSchedule): Promise<void> {
  await scheduleNextRun(deps.db, schedule, await databaseNow(deps.db));
}

/**
 * The job kind of a recurring schedule: `work`, then the next run is queued; a run that gives up
 * queues the next one too, so a failed day (or hour) does not end the chain. `options` adds
 * the kind's other hooks (`forgetDone`, `recover`).
 */
export function recurringJob(
  schedule: RecurringSchedule,
  work: (ctx: JobContext) => Promise<void>,
  options: Omit<JobKind, 'kind' | 'run' | 'giveUp'> = {},
): JobKind {
  return {
    ...options,
    kind: schedule.kind,
    async run(ctx) {
      await work(ctx);
      await queueNextRun(ctx.deps, schedule);
    },
    async giveUp(ctx) {
      await queueNextRun(ctx.deps, schedule);
    },
  };
}

/** The database's current time (job run times are compared with it). */
export async function databaseNow(db: Db): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(db);
  return new Date(rows[0]?.now ?? Date.now());
}
