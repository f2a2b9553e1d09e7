import type { Db } from '../db/database.js';
import { insertEvent } from '../db/queries/events.js';
import type { MergeRequest, User } from '../db/schema.js';

export type MergeRequestAction = 'created' | 'closed' | 'reopened' | 'merged' | 'approved';

/**
 * Records a merge request's activity event; call it with the transaction of the change. The one
 * place merge request events are written: when the events table gains `target_iid` (issue 17),
 * it is set here from `mr.iid`.
 */
export async function recordMergeRequestEvent(
  db: Db,
  action: MergeRequestAction,
  user: User,
  mr: MergeRequest,
  at: Date,
): Promise<void> {
  await insertEvent(db, {
    action,
    author_id: user.id,
    project_id: mr.target_project_id,
    target_type: 'MergeRequest',
    target_id: mr.id,
    target_title: mr.title,
    push_data: JSON.stringify(null),
    created_at: at,
  });
}
