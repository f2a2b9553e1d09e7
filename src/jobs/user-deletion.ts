import { DELETE_USER_JOB, deleteUserNow, requeueUserDeletions } from '../services/user-lifecycle.js';
import type { JobKind } from './worker.js';

/** Deletes a user an administrator removed (GitLab's DeleteUserWorker); safe to run again. */
export const deleteUserJob: JobKind = {
  kind: DELETE_USER_JOB,
  async run(ctx) {
    const userId = Number(ctx.job.payload.user_id);
    const deleted = await deleteUserNow(ctx.deps, userId, ctx.job.payload.hard_delete === true);
    ctx.log.info({ userId, deleted }, 'user deletion done');
  },
  recover: (deps) => requeueUserDeletions(deps),
};
