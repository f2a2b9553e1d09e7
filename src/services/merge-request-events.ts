import type { Db } from '../db/database.js';
import type { MergeRequest, User } from '../db/schema.js';
import { recordEvent } from './events.js';
import { queueMergeRequestHooks } from './merge-request-hooks.js';

export type MergeRequestAction = 'created' | 'closed' | 'reopened' | 'merged' | 'approved';

/** Records a merge request's activity event and queues its hooks; call it with the transaction of the change. */
export async function recordMergeRequestEvent(
  db: Db,
  action: MergeRequestAction,
  user: User,
  mr: MergeRequest,
  at: Date,
): Promise<void> {
  await recordEvent(db, {
    action,
    authorId: user.id,
    projectId: mr.target_project_id,
    target: { type: 'MergeRequest', id: mr.id, iid: mr.iid, title: mr.title },
    at,
  });
  // Webhooks and integrations hear of it in the same transaction (issue 21).
  await queueMergeRequestHooks(db, action, user, mr);
}
