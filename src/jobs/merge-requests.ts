import { findProjectById } from '../db/queries/projects.js';
import { REMOVE_SOURCE_BRANCH_JOB, removeMergedSourceBranch } from '../services/merge-requests.js';
import type { JobKind } from './worker.js';

/**
 * Removes a merged merge request's source branch when the merge asked for it and its process
 * died before doing so itself, or records the removal's push event when it died just after
 * (queued in the merge's transaction; the merge deletes the job once it removed the branch).
 */
export const removeSourceBranchJob: JobKind = {
  kind: REMOVE_SOURCE_BRANCH_JOB,
  forgetDone: true,
  async run(ctx) {
    const { project_id, user_id, branch, head } = ctx.job.payload as {
      project_id: number;
      user_id: number;
      branch: string;
      head: string;
    };
    const project = await findProjectById(ctx.deps.db, project_id);
    const user = await ctx.deps.db.selectFrom('users').selectAll().where('id', '=', user_id).executeTakeFirst();
    if (!project || !user) return;
    const gitDir = ctx.deps.storages.repositoryPath(project.repository_storage, project.id);
    await removeMergedSourceBranch(ctx.deps, project, user, gitDir, branch, head, { afterCrash: true });
    ctx.log.info({ project: project_id, branch }, 'removed the source branch of a merge');
  },
};
