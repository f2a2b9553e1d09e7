import type { Db } from '../db/database.js';
import type { Viewer } from '../db/queries/access.js';
import {
  countEvents,
  deleteExpiredEvents,
  deleteProjectEvents,
  type EventFilter,
  type EventSource,
  insertEvent,
  listEvents,
} from '../db/queries/events.js';
import { findProjectWithNamespace } from '../db/queries/projects.js';
import type { Event, User } from '../db/schema.js';
import { loadProjectPolicy, type ProjectAbility, type ProjectPolicy } from '../policies/abilities.js';
import type { Deps } from './deps.js';

/** GitLab's Event actions (`Event.actions`), the values of the `action` filter. */
export const EVENT_ACTIONS = [
  'created',
  'updated',
  'closed',
  'reopened',
  'pushed',
  'commented',
  'merged',
  'joined',
  'left',
  'destroyed',
  'expired',
  'approved',
] as const;
export type EventAction = (typeof EVENT_ACTIONS)[number];

/** The `target_type` filter's keys (spec part 2) and the class names events store. */
export const EVENT_TARGET_TYPES = {
  issue: 'Issue',
  milestone: 'Milestone',
  merge_request: 'MergeRequest',
  note: 'Note',
  project: 'Project',
  snippet: 'Snippet',
  user: 'User',
} as const;
export type EventTargetKey = keyof typeof EVENT_TARGET_TYPES;
export type EventTargetType = (typeof EVENT_TARGET_TYPES)[EventTargetKey];

/** What another module passes to record one of its events. */
export interface RecordEventInput {
  action: EventAction;
  /** Who did it. */
  authorId: number;
  projectId: number;
  /** The thing acted on (a merge request, a note...); none for project-level events. */
  target?: { type: EventTargetType; id: number; iid?: number | null; title?: string | null };
  /** When it happened: pass the same `deps.clock.now()` the change itself used. */
  at: Date;
}

/**
 * Records one activity event. Call it with the transaction that makes the change, so the event
 * exists exactly when the change does (DESIGN.md, Events). Merge requests record `created`,
 * `closed`, `reopened`, `merged` and `approved` with `target: {type: 'MergeRequest', id, title}`;
 * comments record `commented` with a `Note` target. Pushes go through recordRefChanges
 * (services/push-events.ts), which writes `push_data`.
 */
export async function recordEvent(db: Db, input: RecordEventInput): Promise<void> {
  await insertEvent(db, {
    action: input.action,
    author_id: input.authorId,
    project_id: input.projectId,
    target_type: input.target?.type ?? null,
    target_id: input.target?.id ?? null,
    target_iid: input.target?.iid ?? null,
    target_title: input.target?.title ?? null,
    push_data: JSON.stringify(null),
    created_at: input.at,
  });
}

/**
 * What a caller must be allowed on an event's project to see the event (GitLab's
 * Event#capabilities): pushes need the code, the rest the project. Modules whose targets have
 * their own feature access (merge requests, issues) refine this when they land.
 */
function abilityFor(event: Event): ProjectAbility {
  return event.action === 'pushed' ? 'read_code' : 'read_project';
}

export interface EventQuery {
  source: EventSource;
  viewer: Viewer;
  user: User | null;
  action?: EventAction;
  targetType?: EventTargetKey;
  before?: string;
  after?: string;
  sort: 'asc' | 'desc';
}

/** The filter the queries take, with the API's target key mapped to the stored type. */
export function eventFilter(query: EventQuery): EventFilter {
  return {
    source: query.source,
    viewer: query.viewer,
    action: query.action,
    targetType: query.targetType === undefined ? undefined : EVENT_TARGET_TYPES[query.targetType],
    before: query.before,
    after: query.after,
    sort: query.sort,
  };
}

/** One page of a feed and a capped count of the whole feed. */
export function eventPage(deps: Deps, query: EventQuery) {
  const filter = eventFilter(query);
  return {
    rows: (window: { limit: number; offset: number }) => listEvents(deps.db, filter, window),
    count: (cap: number) => countEvents(deps.db, filter, cap),
  };
}

/**
 * Drops the events of a page the caller may not see (GitLab filters after pagination, so a page
 * can come back short). `known` holds policies already loaded (the project of a project feed).
 */
export async function visibleEvents(
  deps: Deps,
  user: User | null,
  events: Event[],
  known: ProjectPolicy[] = [],
): Promise<Event[]> {
  const policies = new Map<number, ProjectPolicy | null>(known.map((p) => [p.project.id, p]));
  for (const id of new Set(events.map((e) => e.project_id))) {
    if (id === null || policies.has(id)) continue;
    const found = await findProjectWithNamespace(deps.db, { id });
    policies.set(id, found ? await loadProjectPolicy(deps, user, found.project, found.namespace) : null);
  }
  return events.filter((event) => {
    const policy = event.project_id === null ? null : policies.get(event.project_id);
    return policy ? policy.can(abilityFor(event)) : false;
  });
}

/** GitLab's `read_user_profile`: a private profile's activity is for its owner and administrators. */
export function canReadProfile(viewer: User | null, user: User): boolean {
  return !user.private_profile || viewer?.id === user.id || viewer?.admin === true;
}

/** Spec part 2, Limits: events older than this are removed. */
export const EVENT_RETENTION_YEARS = 3;
/** Rows per DELETE: each batch is its own short statement, so no lock is held for long. */
export const EVENT_DELETE_BATCH_ROWS = 1000;

/** The instant before which events are removed: three calendar years before `now`. */
export function retentionCutoff(now: Date): Date {
  const cutoff = new Date(now.getTime());
  cutoff.setUTCFullYear(cutoff.getUTCFullYear() - EVENT_RETENTION_YEARS);
  return cutoff;
}

/** Removes events past the retention limit in batches; stops early when `signal` aborts. */
export async function pruneOldEvents(deps: Deps, signal?: AbortSignal): Promise<number> {
  const cutoff = retentionCutoff(deps.clock.now());
  let removed = 0;
  while (!signal?.aborted) {
    const n = await deleteExpiredEvents(deps.db, cutoff, EVENT_DELETE_BATCH_ROWS);
    removed += n;
    if (n < EVENT_DELETE_BATCH_ROWS) break;
  }
  return removed;
}

/** Removes the events of deleted projects in batches; stops early when `signal` aborts. */
export async function purgeProjectEvents(deps: Deps, projectIds: number[], signal?: AbortSignal): Promise<number> {
  let removed = 0;
  for (const id of projectIds) {
    while (!signal?.aborted) {
      const n = await deleteProjectEvents(deps.db, id, EVENT_DELETE_BATCH_ROWS);
      removed += n;
      if (n < EVENT_DELETE_BATCH_ROWS) break;
    }
  }
  return removed;
}
