import type { Deps } from '../services/deps.js';
import { deleteDueEnvironments, stopDueEnvironments } from '../services/environments.js';
import { queueNextRun, type RecurringSchedule, recurringJob } from './recurring.js';

/** Hourly, as GitLab's Environments::AutoStopCronWorker. */
export const ENVIRONMENT_AUTO_STOP_SCHEDULE: RecurringSchedule = { kind: 'environments_auto_stop', minuteUtc: 24 };
/** Hourly, as GitLab's Environments::AutoDeleteCronWorker. */
export const ENVIRONMENT_AUTO_DELETE_SCHEDULE: RecurringSchedule = { kind: 'environments_auto_delete', minuteUtc: 34 };

/** Stops environments whose `auto_stop_in` has run out (their on_stop job runs). */
export const environmentAutoStopJob = recurringJob(ENVIRONMENT_AUTO_STOP_SCHEDULE, async (ctx) => {
  const stopped = await stopDueEnvironments(ctx.deps);
  ctx.log.info({ stopped }, 'environments auto-stopped');
});

/** Deletes the review apps whose scheduled deletion (a week after the clean-up request) is due. */
export const environmentAutoDeleteJob = recurringJob(ENVIRONMENT_AUTO_DELETE_SCHEDULE, async (ctx) => {
  const deleted = await deleteDueEnvironments(ctx.deps);
  ctx.log.info({ deleted }, 'scheduled environment deletions done');
});

/** Queues the first runs (idempotent; called when the server starts). */
export async function scheduleEnvironmentJobs(deps: Deps): Promise<void> {
  await queueNextRun(deps, ENVIRONMENT_AUTO_STOP_SCHEDULE);
  await queueNextRun(deps, ENVIRONMENT_AUTO_DELETE_SCHEDULE);
}
