import type { Kysely } from 'kysely';
import type { Db } from '../db/database.js';
import type { DB } from '../db/schema.js';
import { archiveCache } from '../storage/archive-cache.js';
import { enqueueJob } from './queue.js';
import { queueNextRun, type RecurringSchedule, recurringJob } from './recurring.js';
import type { JobKind } from './worker.js';

/** GitLab's RepositoryArchiveCacheWorker runs at minute 0 of every hour (cron `0 * * * *`). */
export const ARCHIVE_CACHE_CLEANUP_SCHEDULE: RecurringSchedule = { kind: 'archive_cache_cleanup', minuteUtc: 0 };
export const ARCHIVE_CACHE_PURGE_JOB = 'archive_cache_purge';

/** Deletes cached archives older than two hours and what crashed generations left, then queues the next hour's run. */
export const archiveCacheCleanupJob = recurringJob(
  ARCHIVE_CACHE_CLEANUP_SCHEDULE,
  async (ctx) => {
    const removed = await archiveCache(ctx.deps.config).sweep(ctx.deps.clock.now());
    ctx.log.info({ removed }, 'old cached archives deleted');
  },
  {
    forgetDone: true,
    // Every worker start makes sure the next run is queued (idempotent): the chain starts itself.
    async recover(deps) {
      await queueNextRun(deps, ARCHIVE_CACHE_CLEANUP_SCHEDULE);
      return 0;
    },
  },
);

/** Deletes the cached archives of deleted projects. */
export const archiveCachePurgeJob: JobKind = {
  kind: ARCHIVE_CACHE_PURGE_JOB,
  forgetDone: true,
  async run(ctx) {
    const ids = (ctx.job.payload.project_ids as unknown[]).map(Number).filter(Number.isSafeInteger);
    const cache = archiveCache(ctx.deps.config);
    let removed = 0;
    for (const id of ids) removed += await cache.purgeProject(id);
    ctx.log.info({ projects: ids, removed }, 'cached archives of deleted projects deleted');
  },
};

/** Queues the deletion of projects' cached archives; pass the transaction that deletes the projects. */
export async function purgeCachedArchivesLater(db: Kysely<DB> | Db, projectIds: number[]): Promise<void> {
  if (projectIds.length > 0) await enqueueJob(db, ARCHIVE_CACHE_PURGE_JOB, { project_ids: projectIds });
}
