import type { Kysely } from 'kysely';
import type { Db } from '../db/database.js';
import type { DB } from '../db/schema.js';
import { pruneOldEvents, purgeProjectEvents } from '../services/events.js';
import { enqueueJob } from './queue.js';
import { queueNextRun, type RecurringSchedule, recurringJob } from './recurring.js';
import { JobInterrupted, type JobKind } from './worker.js';

/** GitLab's PruneOldEventsWorker runs every few hours; hourly here, nearly free when nothing is old. */
export const EVENTS_RETENTION_SCHEDULE: RecurringSchedule = { kind: 'events_retention', minuteUtc: 40 };
export const EVENTS_PURGE_JOB = 'events_purge';

/** Deletes events older than the retention limit, then queues the next run. */
export const eventsRetentionJob = recurringJob(
  EVENTS_RETENTION_SCHEDULE,
  async (ctx) => {
    const removed = await pruneOldEvents(ctx.deps, ctx.signal);
    ctx.log.info({ removed }, 'old events removed');
  },
  {
    forgetDone: true,
    // Every worker start makes sure the next run is queued (idempotent): the chain starts itself.
    async recover(deps) {
      await queueNextRun(deps, EVENTS_RETENTION_SCHEDULE);
      return 0;
    },
  },
);

/** Deletes the events of deleted projects. */
export const eventsPurgeJob: JobKind = {
  kind: EVENTS_PURGE_JOB,
  forgetDone: true,
  async run(ctx) {
    const ids = (ctx.job.payload.project_ids as unknown[]).map(Number).filter(Number.isSafeInteger);
    const removed = await purgeProjectEvents(ctx.deps, ids, ctx.signal);
    // Deletion is idempotent: an interrupted purge runs again from where the rows stop.
    if (ctx.signal.aborted) throw new JobInterrupted();
    ctx.log.info({ projects: ids, removed }, 'events of deleted projects removed');
  },
};

/** Queues the removal of deleted projects' events; pass the transaction that deletes the projects. */
export async function purgeProjectEventsLater(db: Kysely<DB> | Db, projectIds: number[]): Promise<void> {
  if (projectIds.length > 0) await enqueueJob(db, EVENTS_PURGE_JOB, { project_ids: projectIds });
}
