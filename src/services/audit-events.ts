import type { Selectable } from 'kysely';
import type { Db } from '../db/database.js';
import type { AuditEventsTable } from '../db/schema.js';

/** Who made a change, as the audit trail names them. */
export interface AuditActor {
  id: number;
  name: string;
  /** The caller's address, when the change came through HTTP. */
  ipAddress?: string | undefined;
}

/** One attribute's change: secrets arrive already masked. */
export interface AuditChange {
  change: string;
  from: unknown;
  to: unknown;
}

export interface AuditTarget {
  entityId: number;
  entityType: string;
  eventName: string;
  targetType: string;
  targetId: number | string;
  targetDetails: string;
  changes: AuditChange[];
}

export type AuditEvent = Selectable<AuditEventsTable>;

/**
 * One audit event per changed attribute, in the caller's transaction (GitLab's
 * `Audit::Changes`: `change`, `from`, `to` with the author and target in `details`).
 */
export async function recordAuditEvents(db: Db, now: Date, actor: AuditActor, target: AuditTarget): Promise<void> {
  if (target.changes.length === 0) return;
  await db
    .insertInto('audit_events')
    .values(
      target.changes.map((c) => ({
        author_id: actor.id,
        entity_id: target.entityId,
        entity_type: target.entityType,
        event_name: target.eventName,
        created_at: now,
        details: JSON.stringify({
          change: c.change,
          from: c.from,
          to: c.to,
          author_name: actor.name,
          author_class: 'User',
          target_id: target.targetId,
          target_type: target.targetType,
          target_details: target.targetDetails,
          ...(actor.ipAddress ? { ip_address: actor.ipAddress } : {}),
        }),
      })),
    )
    .execute();
}

export interface AuditEventFilter {
  entityType?: string | undefined;
  entityId?: number | undefined;
  createdAfter?: Date | undefined;
  createdBefore?: Date | undefined;
}

function filtered(db: Db, filter: AuditEventFilter) {
  let query = db.selectFrom('audit_events');
  if (filter.entityType !== undefined) query = query.where('entity_type', '=', filter.entityType);
  if (filter.entityId !== undefined) query = query.where('entity_id', '=', filter.entityId);
  if (filter.createdAfter !== undefined) query = query.where('created_at', '>=', filter.createdAfter);
  if (filter.createdBefore !== undefined) query = query.where('created_at', '<=', filter.createdBefore);
  return query;
}

/** A page of the trail, newest first (GitLab orders audit events by id descending). */
export function listAuditEvents(
  db: Db,
  filter: AuditEventFilter,
  window: { limit: number; offset: number },
): Promise<AuditEvent[]> {
  return filtered(db, filter).selectAll().orderBy('id', 'desc').limit(window.limit).offset(window.offset).execute();
}

/** How many events match, counted up to `limit`. */
export async function countAuditEvents(db: Db, filter: AuditEventFilter, limit: number): Promise<number> {
  const row = await db
    .selectFrom(filtered(db, filter).select('id').limit(limit).as('matching'))
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

export function findAuditEvent(db: Db, id: number): Promise<AuditEvent | undefined> {
  return db.selectFrom('audit_events').selectAll().where('id', '=', id).executeTakeFirst();
}
