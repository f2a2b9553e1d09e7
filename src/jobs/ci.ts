import { findProjectById } from '../db/queries/projects.js';
import { failpoint } from '../lib/failpoints.js';
import { failStuckBuilds, removeExpiredArtifacts } from '../services/ci/builds.js';
import { createPushPipeline } from '../services/ci/pipelines.js';
import type { Deps } from '../services/deps.js';
import { queueNextRun, type RecurringSchedule, recurringJob } from './recurring.js';
import type { JobKind } from './worker.js';

/** The job kind that makes the pipeline of a pushed ref (queued by recordRefChanges). */
export const CREATE_PIPELINE_JOB = 'ci_create_pipeline';

/** Makes the pipeline of one pushed ref from the CI file at its new commit. */
export const createPipelineJob: JobKind = {
  kind: CREATE_PIPELINE_JOB,
  forgetDone: true,
  async run(ctx) {
    failpoint('pipeline:after-claim');
    const { project_id, user_id, ref, before, after } = ctx.job.payload as {
      project_id: number;
      user_id: number | null;
      ref: string;
      before: string;
      after: string;
    };
    const project = await findProjectById(ctx.deps.db, project_id);
    if (!project) return;
    const user = user_id
      ? ((await ctx.deps.db.selectFrom('users').selectAll().where('id', '=', user_id).executeTakeFirst()) ?? null)
      : null;
    const result = await createPushPipeline(ctx.deps, project, user, ref, before, after);
    ctx.log.info({ project: project_id, ref, created: result.created }, 'push pipeline');
    failpoint('pipeline:before-job-finish');
  },
};

/** Hourly, as GitLab's StuckCiJobsWorker. */
export const STUCK_BUILDS_SCHEDULE: RecurringSchedule = { kind: 'ci_fail_stuck_jobs', minuteUtc: 7 };

/** Fails jobs stuck pending or running past their timeout, and removes expired artifacts. */
export const stuckBuildsJob = recurringJob(STUCK_BUILDS_SCHEDULE, async (ctx) => {
  const failed = await failStuckBuilds(ctx.deps);
  const expired = await removeExpiredArtifacts(ctx.deps);
  ctx.log.info({ failed, expired }, 'stuck CI jobs and expired artifacts checked');
});

/** Queues the first run of the stuck-jobs check (idempotent; called when the server starts). */
export async function scheduleCiJobs(deps: Deps): Promise<void> {
  await queueNextRun(deps, STUCK_BUILDS_SCHEDULE);
}
