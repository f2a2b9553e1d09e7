import type { Deps } from '../services/deps.js';
import {
  DELIVERY_MAX_ATTEMPTS,
  deliverWebhook,
  fanOutHooks,
  INTEGRATION_DELIVERY_JOB,
  pruneDeliveryLog,
  runPushHooks,
  WEBHOOK_DELIVERY_JOB,
} from '../services/hook-delivery.js';
import type { PushChange } from '../services/hook-payloads.js';
import { deliverIntegration } from '../services/integration-delivery.js';
import { MERGE_REQUEST_HOOKS_JOB, runMergeRequestHooks } from '../services/merge-request-hooks.js';
import { PIPELINE_HOOKS_JOB, runPipelineHooks } from '../services/pipeline-hooks.js';
import { type HookTrigger, PROJECT_HOOKS_JOB, PUSH_HOOKS_JOB } from '../services/webhooks.js';
import { databaseNow, type RecurringSchedule, recurringJob, scheduleNextRun } from './recurring.js';
import type { JobKind } from './worker.js';

/** The delivery log's daily pruning, at 04:40 UTC (away from the other daily jobs). */
export const DELIVERY_LOG_PRUNE_SCHEDULE: RecurringSchedule = {
  kind: 'hook_delivery_log_prune',
  hourUtc: 4,
  minuteUtc: 40,
};

/** Deletes delivery log rows past their retention, then queues tomorrow's run. */
export const deliveryLogPruneJob = recurringJob(DELIVERY_LOG_PRUNE_SCHEDULE, async (ctx) => {
  const deleted = await pruneDeliveryLog(ctx.deps, ctx.signal);
  ctx.log.info({ deleted }, 'old webhook and integration deliveries deleted from the log');
});

/** Queues the first run of the delivery log pruning (idempotent; called when the server starts). */
export async function scheduleHookJobs(deps: Deps): Promise<void> {
  await scheduleNextRun(deps.db, DELIVERY_LOG_PRUNE_SCHEDULE, await databaseNow(deps.db));
}

/** An event of a project: one delivery job per webhook and integration that wants it. */
export const projectHooksJob: JobKind = {
  kind: PROJECT_HOOKS_JOB,
  forgetDone: true,
  async run(ctx) {
    const p = ctx.job.payload;
    await fanOutHooks(ctx.deps, Number(p.project_id), [
      {
        trigger: p.trigger as HookTrigger,
        data: p.data as Record<string, unknown>,
        branch: typeof p.branch === 'string' ? p.branch : null,
      },
    ]);
  },
};

/** A push: its payloads built from the repository, then fanned out. */
export const pushHooksJob: JobKind = {
  kind: PUSH_HOOKS_JOB,
  forgetDone: true,
  async run(ctx) {
    const p = ctx.job.payload;
    await runPushHooks(ctx.deps, Number(p.project_id), Number(p.user_id), p.changes as PushChange[]);
  },
};

/** A merge request event: its payload built in the background, then fanned out. */
export const mergeRequestHooksJob: JobKind = {
  kind: MERGE_REQUEST_HOOKS_JOB,
  forgetDone: true,
  async run(ctx) {
    const p = ctx.job.payload;
    await runMergeRequestHooks(ctx.deps, Number(p.merge_request_id), String(p.action), Number(p.user_id));
  },
};

/** A pipeline's status change: its payload built in the background, then fanned out. */
export const pipelineHooksJob: JobKind = {
  kind: PIPELINE_HOOKS_JOB,
  forgetDone: true,
  async run(ctx) {
    const p = ctx.job.payload;
    await runPipelineHooks(ctx.deps, Number(p.pipeline_id), String(p.status));
  },
};

/** One payload to one webhook; retried with the queue's back-off, each try in the delivery log. */
export const webhookDeliveryJob: JobKind = {
  kind: WEBHOOK_DELIVERY_JOB,
  forgetDone: true,
  async run(ctx) {
    const p = ctx.job.payload;
    await deliverWebhook(
      ctx.deps,
      {
        hookId: Number(p.hook_id),
        trigger: p.trigger as HookTrigger,
        eventId: String(p.event_id),
        idempotencyKey: String(p.idempotency_key),
        data: p.data,
      },
      ctx.attempt,
      ctx.job.max_attempts ?? DELIVERY_MAX_ATTEMPTS,
    );
  },
};

/** One event to one integration (chat message, e-mail, build trigger). */
export const integrationDeliveryJob: JobKind = {
  kind: INTEGRATION_DELIVERY_JOB,
  forgetDone: true,
  async run(ctx) {
    const p = ctx.job.payload;
    await deliverIntegration(
      ctx.deps,
      {
        integrationId: Number(p.integration_id),
        trigger: p.trigger as HookTrigger,
        branch: typeof p.branch === 'string' ? p.branch : null,
        data: p.data as Record<string, unknown>,
      },
      ctx.attempt,
      ctx.job.max_attempts ?? DELIVERY_MAX_ATTEMPTS,
    );
  },
};

export const HOOK_JOB_KINDS: JobKind[] = [
  projectHooksJob,
  pushHooksJob,
  mergeRequestHooksJob,
  pipelineHooksJob,
  webhookDeliveryJob,
  integrationDeliveryJob,
  deliveryLogPruneJob,
];
