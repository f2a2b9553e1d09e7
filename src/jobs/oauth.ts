import type { Deps } from '../services/deps.js';
import { OAUTH_PRUNE_HOUR_UTC, OAUTH_PRUNE_MINUTE_UTC, pruneOauthRecords } from '../services/oauth-pruning.js';
import { databaseNow, type RecurringSchedule, recurringJob, scheduleNextRun } from './recurring.js';

export const OAUTH_PRUNE_SCHEDULE: RecurringSchedule = {
  kind: 'oauth_prune',
  hourUtc: OAUTH_PRUNE_HOUR_UTC,
  minuteUtc: OAUTH_PRUNE_MINUTE_UTC,
};

/** Deletes expired authorization codes and dead revoked tokens, then queues tomorrow's run. */
export const oauthPruneJob = recurringJob(OAUTH_PRUNE_SCHEDULE, async (ctx) => {
  const pruned = await pruneOauthRecords(ctx.deps, ctx.signal);
  ctx.log.info(pruned, 'expired OAuth grants and dead tokens deleted');
});

/** Queues the first run of the OAuth pruning job (idempotent; called when the server starts). */
export async function scheduleOauthJobs(deps: Deps): Promise<void> {
  await scheduleNextRun(deps.db, OAUTH_PRUNE_SCHEDULE, await databaseNow(deps.db));
}
