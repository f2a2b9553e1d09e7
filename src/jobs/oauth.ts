import type { Deps } from '../services/deps.js';
import { OAUTH_PRUNE_HOUR_UTC, OAUTH_PRUNE_MINUTE_UTC, pruneOauthRecords } from '../services/oauth-pruning.js';
import { databaseNow, type RecurringSchedule, scheduleNextRun } from './recurring.js';
import type { JobKind } from './worker.js';

export const OAUTH_PRUNE_SCHEDULE: RecurringSchedule = {
  kind: 'oauth_prune',
  hourUtc: OAUTH_PRUNE_HOUR_UTC,
  minuteUtc: OAUTH_PRUNE_MINUTE_UTC,
};

/** Deletes expired authorization codes and dead revoked tokens, then queues tomorrow's run. */
export const oauthPruneJob: JobKind = {
  kind: OAUTH_PRUNE_SCHEDULE.kind,
  async run(ctx) {
    const pruned = await pruneOauthRecords(ctx.deps, ctx.signal);
    ctx.log.info(pruned, 'expired OAuth grants and dead tokens deleted');
    await scheduleNextRun(ctx.deps.db, OAUTH_PRUNE_SCHEDULE, await databaseNow(ctx.deps.db));
  },
  // A failed day must not end the chain of daily runs.
  async giveUp(ctx) {
    await scheduleNextRun(ctx.deps.db, OAUTH_PRUNE_SCHEDULE, await databaseNow(ctx.deps.db));
  },
};

/** Queues the first run of the OAuth pruning job (idempotent; called when the server starts). */
export async function scheduleOauthJobs(deps: Deps): Promise<void> {
  await scheduleNextRun(deps.db, OAUTH_PRUNE_SCHEDULE, await databaseNow(deps.db));
}
