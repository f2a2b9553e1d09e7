import type { Deps } from '../services/deps.js';
import { DORMANT_USERS_HOUR_UTC, DORMANT_USERS_MINUTE_UTC, deactivateDormantUsers } from '../services/user-activity.js';
import { databaseNow, type RecurringSchedule, recurringJob, scheduleNextRun } from './recurring.js';

export const DORMANT_USERS_SCHEDULE: RecurringSchedule = {
  kind: 'deactivate_dormant_users',
  hourUtc: DORMANT_USERS_HOUR_UTC,
  minuteUtc: DORMANT_USERS_MINUTE_UTC,
};

/**
 * Deactivates dormant users when the instance asks for it (the setting is read on each run, so
 * turning it on or off needs no restart), then queues tomorrow's run.
 */
export const dormantUsersJob = recurringJob(DORMANT_USERS_SCHEDULE, async (ctx) => {
  const deactivated = await deactivateDormantUsers(ctx.deps);
  ctx.log.info({ deactivated }, 'dormant users checked');
});

/** Queues the first run of the dormant-user job (idempotent; called when the server starts). */
export async function scheduleDormantUsersJob(deps: Deps): Promise<void> {
  await scheduleNextRun(deps.db, DORMANT_USERS_SCHEDULE, await databaseNow(deps.db));
}
