import { maintainRepository, payloadTask, REPOSITORY_MAINTENANCE_JOB } from '../services/repository-maintenance.js';
import type { JobKind } from './worker.js';

/** Keeps a repository packed (the task its pushes chose) and its commit-graph current after its refs changed. */
export const repositoryMaintenanceJob: JobKind = {
  kind: REPOSITORY_MAINTENANCE_JOB,
  // One after every push: kept, they would pile up in the jobs table.
  forgetDone: true,
  async run(ctx) {
    const projectId = Number(ctx.job.payload.project_id);
    const task = payloadTask(ctx.job.payload);
    const wrote = await maintainRepository(ctx.deps, projectId, task);
    ctx.log.info({ project: projectId, task, wrote }, 'repository maintained');
  },
};
