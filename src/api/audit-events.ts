import { z } from 'zod';
import { notFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentAuditEvent } from '../presenters/audit-event.js';
import { countAuditEvents, findAuditEvent, listAuditEvents } from '../services/audit-events.js';
import { requireAdmin } from './helpers.js';

const listParams = z.object({
  created_after: p.datetime().optional(),
  created_before: p.datetime().optional(),
  entity_type: p.enum(['Project', 'User', 'Group', 'Gitlab::Audit::InstanceScope']).optional(),
  entity_id: p.int().optional(),
  ...pagination(),
});

/** GitLab's instance audit events API (administrators only). */
export function registerAuditEventRoutes(api: ApiRouter): void {
  api.get(
    '/audit_events',
    { summary: 'Instance audit events', auth: 'required', admin: true, tags: ['audit_events'], params: listParams },
    async (ctx, params) => {
      requireAdmin(ctx);
      const { db, config } = ctx.state.deps;
      const filter = {
        entityType: params.entity_type,
        entityId: params.entity_id,
        createdAfter: params.created_after,
        createdBefore: params.created_before,
      };
      const events = await paginateQuery(
        ctx,
        config.baseUrl,
        params,
        (window) => listAuditEvents(db, filter, window),
        (limit) => countAuditEvents(db, filter, limit),
      );
      ctx.body = events.map(presentAuditEvent);
    },
  );

  api.get(
    '/audit_events/:id',
    {
      summary: 'One instance audit event',
      auth: 'required',
      admin: true,
      tags: ['audit_events'],
      params: z.object({ id: p.id() }),
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const event = await findAuditEvent(ctx.state.deps.db, params.id);
      if (!event) throw notFound('Audit Event');
      ctx.body = presentAuditEvent(event);
    },
  );
}
