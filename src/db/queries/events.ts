import { type Insertable, type SelectQueryBuilder, sql } from 'kysely';
import type { Db } from '../database.js';
import type { DB, Event, EventsTable } from '../schema.js';
import { activeMembership, projectVisibleTo, type Viewer } from './access.js';
import { countUpTo } from './count.js';

/** Records an activity event; call inside the transaction of the change it describes. */
export async function insertEvent(db: Db, event: Insertable<EventsTable>): Promise<void> {
  await db.insertInto('events').values(event).execute();
}

/** Whose events a feed lists. */
export type EventSource =
  /** One project's events (its visibility was checked by the caller). */
  | { kind: 'project'; projectId: number }
  /** The events a user authored, in projects the viewer may see. */
  | { kind: 'author'; authorId: number }
  /** Every event of the projects a user is a member of (GitLab's `scope=all`). */
  | { kind: 'member'; userId: number };

export interface EventFilter {
  source: EventSource;
  viewer: Viewer;
  action?: string;
  /** The stored target type (`MergeRequest`), already mapped from the API's key. */
  targetType?: string;
  /** `YYYY-MM-DD`: events created before the start of that day (UTC). */
  before?: string;
  /** `YYYY-MM-DD`: events created after the end of that day (UTC). */
  after?: string;
  sort: 'asc' | 'desc';
}

/** An event row with the fields of its project the visibility check needs. */
export type EventRow = Event;

type EventQuery = SelectQueryBuilder<DB & { e: EventsTable }, 'e', object>;

function eventQuery(db: Db, f: EventFilter): EventQuery {
  let q = db.selectFrom('events as e') as unknown as EventQuery;
  const source = f.source;
  if (source.kind === 'project') {
    q = q.where('e.project_id', '=', source.projectId);
  } else {
    // Events of projects the viewer can see only (GitLab's by_current_user_access); events
    // without a project (group memberships) never appear in a user feed.
    q = q.where(
      sql<boolean>`EXISTS (SELECT 1 FROM projects p JOIN namespaces ns ON ns.id = p.namespace_id
        WHERE p.id = e.project_id AND ${projectVisibleTo(f.viewer)})`,
    );
    if (source.kind === 'author') q = q.where('e.author_id', '=', source.authorId);
    else {
      q = q.where(
        sql<boolean>`e.project_id IN (SELECT p.id FROM projects p JOIN namespaces ns ON ns.id = p.namespace_id
          WHERE EXISTS (SELECT 1 FROM members m WHERE m.user_id = ${source.userId}
            AND ${activeMembership(f.viewer.today)} AND m.access_level >= 10
            AND ((m.source_type = 'project' AND m.source_id = p.id)
              OR (m.source_type = 'group' AND m.source_id = ANY(ns.traversal_ids)))))`,
      );
    }
  }
  if (f.action !== undefined) q = q.where('e.action', '=', f.action);
  if (f.targetType !== undefined) q = q.where('e.target_type', '=', f.targetType);
  if (f.before !== undefined) {
    q = q.where(sql<boolean>`e.created_at < (${f.before}::date)::timestamp AT TIME ZONE 'UTC'`);
  }
  if (f.after !== undefined) {
    q = q.where(sql<boolean>`e.created_at >= (${f.after}::date + 1)::timestamp AT TIME ZONE 'UTC'`);
  }
  return q;
}

/** One page of a feed, ordered by id (GitLab orders events by id, not by created_at). */
export function listEvents(db: Db, f: EventFilter, window: { limit: number; offset: number }): Promise<Event[]> {
  return eventQuery(db, f)
    .selectAll('e')
    .orderBy('e.id', f.sort)
    .limit(window.limit)
    .offset(window.offset)
    .execute() as Promise<Event[]>;
}

/** min(number of events of the feed, cap). */
export async function countEvents(db: Db, f: EventFilter, cap: number): Promise<number> {
  return countUpTo(db, eventQuery(db, f).select(sql`1`.as('one')), cap);
}

/**
 * Deletes up to `limit` events created before `cutoff`, or whose project is gone, in one short
 * statement (each batch its own transaction, so no long lock). Returns how many went.
 */
export async function deleteExpiredEvents(db: Db, cutoff: Date, limit: number): Promise<number> {
  const result = await sql`DELETE FROM events WHERE id IN (
      SELECT id FROM events WHERE created_at < ${cutoff} ORDER BY created_at, id LIMIT ${limit}
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/**
 * Deletes up to `limit` events of a deleted project (GitLab's foreign key cascades them with the
 * project; here a job does it in batches so a project deletion stays short). Returns how many went.
 */
export async function deleteProjectEvents(db: Db, projectId: number, limit: number): Promise<number> {
  const result = await sql`DELETE FROM events WHERE id IN (
      SELECT id FROM events WHERE project_id = ${projectId} ORDER BY id LIMIT ${limit}
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
