import type { Db } from '../db/database.js';
import type { MergeRequest, User } from '../db/schema.js';
import { recordEvent } from './events.js';

export type MergeRequestAction = 'created' | 'closed' | 'reopened' | 'merged' | 'approved';

/** Records a merge request's activity event; call it with the transaction of the change. */
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
}
