import { sql } from 'kysely';
import { z } from 'zod';
import { groupAccessLevel } from '../db/queries/access.js';
import { namespacesOfUser } from '../db/queries/namespaces.js';
import type { Namespace } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { notFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { AccessLevel } from '../policies/access-levels.js';
import { type NamespaceCounts, presentNamespace } from '../presenters/namespace.js';
import { today } from '../services/deps.js';
import { findNamespace } from '../services/groups.js';
import { currentUser } from './helpers.js';

const listParams = z.object({
  search: p.string().optional(),
  owned_only: p.bool().default(false),
  top_level_only: p.bool().default(false),
  ...pagination(),
});

/** Member and project counts of a group subtree, for owners (Namespace entity). */
async function countsFor(ctx: AppContext, ns: Namespace): Promise<NamespaceCounts | null> {
  const user = currentUser(ctx);
  const deps = ctx.state.deps;
  if (ns.kind !== 'group') return null;
  const level = user.admin
    ? AccessLevel.ADMIN
    : await groupAccessLevel(deps.db, user.id, ns.traversal_ids, today(deps));
  if (level < AccessLevel.OWNER) return null;
  const { rows } = await sql<{ members: number; projects: number }>`SELECT
      (SELECT count(DISTINCT m.user_id)::int FROM members m JOIN namespaces d ON m.source_type = 'group' AND d.id = m.source_id
        WHERE ${ns.id} = ANY(d.traversal_ids) AND m.requested_at IS NULL) AS members,
      (SELECT count(*)::int FROM projects pr JOIN namespaces d ON d.id = pr.namespace_id
        WHERE ${ns.id} = ANY(d.traversal_ids)) AS projects`.execute(deps.db);
  return { membersCountWithDescendants: rows[0]?.members ?? 0, projectsCount: rows[0]?.projects ?? 0 };
}

export function registerNamespaceRoutes(api: ApiRouter): void {
  api.get(
    '/namespaces',
    { summary: 'Namespaces of the signed-in user', auth: 'required', params: listParams },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const deps = ctx.state.deps;
      const viewer = { userId: user.id, admin: user.admin, external: user.external, today: today(deps) };
      const query = () => {
        let q = namespacesOfUser(deps.db, viewer, params.search, params.owned_only);
        if (params.top_level_only) q = q.where('g.parent_id', 'is', null);
        return q;
      };
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => query().selectAll('g').orderBy('g.id', 'asc').limit(w.limit).offset(w.offset).execute(),
        async (cap) =>
          (
            await deps.db
              .selectFrom(query().select('g.id').limit(cap).as('t'))
              .select(sql<number>`count(*)::int`.as('n'))
              .executeTakeFirstOrThrow()
          ).n,
      );
      const pc = { baseUrl: deps.config.baseUrl };
      ctx.body = await Promise.all(rows.map(async (ns) => presentNamespace(ns, pc, await countsFor(ctx, ns))));
    },
  );

  api.get(
    '/namespaces/:id',
    { summary: 'A namespace', auth: 'required', params: z.object({ id: p.string() }) },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const deps = ctx.state.deps;
      const ns = await findNamespace(deps, params.id);
      if (!ns) throw notFound('Namespace');
      // Only members see a namespace here (GitLab's read_namespace_via_membership).
      if (!user.admin) {
        const member =
          ns.kind === 'user'
            ? ns.owner_id === user.id
            : (await groupAccessLevel(deps.db, user.id, ns.traversal_ids, today(deps))) >= AccessLevel.GUEST;
        if (!member) throw notFound('Namespace');
      }
      ctx.body = presentNamespace(ns, { baseUrl: deps.config.baseUrl }, await countsFor(ctx, ns));
    },
  );
}
