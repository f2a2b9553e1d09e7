import { isoTime } from '../lib/clock.js';
import type { AuditEvent } from '../services/audit-events.js';

/** GitLab's AuditEvent entity (instance audit events API). */
export function presentAuditEvent(event: AuditEvent) {
  return {
    id: event.id,
    author_id: event.author_id,
    entity_id: event.entity_id,
    entity_type: event.entity_type,
    event_name: event.event_name,
    details: event.details,
    created_at: isoTime(event.created_at),
  };
}
