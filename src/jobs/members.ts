import { BILLABLE_REFRESH_HOUR_UTC, refreshAllBillableMembers } from '../services/billable-members.js';
import type { Deps } from '../services/deps.js';
import { MEMBER_EXPIRY_HOUR_UTC, MEMBER_EXPIRY_MINUTE_UTC, removeExpiredMembers } from '../services/member-expiry.js';
import { databaseNow, type RecurringSchedule, recurringJob, scheduleNextRun } from './recurring.js';

export const BILLABLE_REFRESH_SCHEDULE: RecurringSchedule = {
  kind: 'billable_members_refresh',
  hourUtc: BILLABLE_REFRESH_HOUR_UTC,
  minuteUtc: 0,
};

export const MEMBER_EXPIRY_SCHEDULE: RecurringSchedule = {
  kind: 'member_expiry',
  hourUtc: MEMBER_EXPIRY_HOUR_UTC,
  minuteUtc: MEMBER_EXPIRY_MINUTE_UTC,
};

/** Rebuilds every top-level group's billable-member list, then queues tomorrow's run. */
export const billableMembersRefreshJob = recurringJob(BILLABLE_REFRESH_SCHEDULE, async (ctx) => {
  const groups = await refreshAllBillableMembers(ctx.deps);
  ctx.log.info({ groups }, 'billable members refreshed');
});

/** Removes expired memberships (with `expired` events), then queues tomorrow's run. */
export const memberExpiryJob = recurringJob(MEMBER_EXPIRY_SCHEDULE, async (ctx) => {
  const removed = await removeExpiredMembers(ctx.deps, ctx.signal);
  ctx.log.info({ removed }, 'expired memberships removed');
});

/** Queues the first run of the members' daily jobs (idempotent; called when the server starts). */
export async function scheduleMemberJobs(deps: Deps): Promise<void> {
  const now = await databaseNow(deps.db);
  await scheduleNextRun(deps.db, BILLABLE_REFRESH_SCHEDULE, now);
  await scheduleNextRun(deps.db, MEMBER_EXPIRY_SCHEDULE, now);
}
