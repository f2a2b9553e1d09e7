import type { Event, User } from '../db/schema.js';
import { type PresentContext, presentUserBasic } from './user.js';

interface PushData {
  commit_count: number;
  action: 'created' | 'removed' | 'pushed';
  ref_type: 'branch' | 'tag';
  commit_from: string | null;
  commit_to: string | null;
  ref: string | null;
  commit_title: string | null;
  ref_count: number | null;
}

/** GitLab's Event#action_name: what the activity feed says the author did. */
export function actionName(event: Event): string {
  const push = event.push_data as PushData | null;
  switch (event.action) {
    case 'pushed':
      return push?.action === 'created' ? 'pushed new' : push?.action === 'removed' ? 'deleted' : 'pushed to';
    case 'closed':
      return 'closed';
    case 'merged':
      return 'accepted';
    case 'joined':
      return 'joined';
    case 'left':
      return 'left';
    case 'expired':
      return 'removed due to membership expiration from';
    case 'destroyed':
      return 'destroyed';
    case 'commented':
      return 'commented on';
    case 'approved':
      return 'approved';
    case 'created':
      return event.target_type === null ? 'created' : 'opened';
    default:
      return 'opened';
  }
}

export interface EventPresentOptions extends PresentContext {
  /** Project event lists carry GitLab's legacy `data: null`. */
  projectList?: boolean;
}

/**
 * GitLab's Event entity: `note` (the Note entity, presented by the notes module) for comment
 * events, `author` (UserBasic) when the author exists, `push_data` for pushes.
 */
export function presentEvent(
  event: Event,
  author: User | undefined,
  options: EventPresentOptions,
  extra: { note?: Record<string, unknown> } = {},
) {
  const push = event.push_data as PushData | null;
  return {
    id: event.id,
    title: null,
    project_id: event.project_id,
    action_name: actionName(event),
    target_id: event.target_id,
    // GitLab answers the target's iid when it has one, else its id.
    target_iid: event.target_iid ?? event.target_id,
    target_type: event.target_type,
    author_id: event.author_id,
    target_title: event.target_title,
    created_at: event.created_at.toISOString(),
    ...(extra.note ? { note: extra.note } : {}),
    ...(author ? { author: presentUserBasic(author, options) } : {}),
    // Newer GitLab marks rows brought in by its importers; Depot imports no events.
    imported: false,
    imported_from: 'none',
    ...(event.action === 'pushed' && push
      ? {
          push_data: {
            commit_count: push.commit_count,
            action: push.action,
            ref_type: push.ref_type,
            commit_from: push.commit_from,
            commit_to: push.commit_to,
            ref: push.ref,
            commit_title: push.commit_title,
            ref_count: push.ref_count,
          },
        }
      : {}),
    ...(options.projectList ? { data: null } : {}),
    author_username: author?.username ?? null,
  };
}
