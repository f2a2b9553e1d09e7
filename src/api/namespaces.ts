import { z } from 'zod';
import { countUpTo } from '../db/queries/count.js';
import { childPathTaken, groupSubtreeCounts, namespacesOfUser } from '../db/queries/namespaces.js';
import { findUsersByIds } from '../db/queries/users.js';
import type { Namespace, User } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { notFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { toDbId } from '../lib/ids.js';
import { loadGroupPolicy } from '../policies/abilities.js';
import { AccessLevel } from '../policies/access-levels.js';
import { type NamespaceCounts, presentNamespace } from '../presenters/namespace.js';
import { today } from '../services/deps.js';
import { findNamespace } from '../services/groups.js';
import { currentUser } from './helpers.js';

const listParams = z.object({
  search: p.string().optional(),
  owned_only: p.bool().optional(),
  top_level_only: p.bool().default(false),
  full_path_search: p.bool().default(false),
  ...pagination(),
});

/** Member and project counts of a group subtree, shown only to those who administer it. */
async function countsFor(ctx: AppContext, user: User, ns: Namespace): Promise<NamespaceCounts | null> {
  const deps = ctx.state.deps;
  if (ns.kind !== 'group' || !(await loadGroupPolicy(deps, user, ns)).can('admin_group')) return null;
  const counts = await groupSubtreeCounts(deps.db, ns.id, today(deps));
  return { membersCountWithDescendants: counts.members, projectsCount: counts.projects };
}

/** Owners of the user namespaces among `namespaces`, by user id (their avatar is the namespace's). */
async function ownersOf(ctx: AppContext, namespaces: Namespace[]): Promise<Map<number, User>> {
  const ids = namespaces.filter((ns) => ns.kind === 'user' && ns.owner_id !== null).map((ns) => ns.owner_id as number);
  const users = await findUsersByIds(ctx.state.deps.db, ids);
  return new Map(users.map((u) => [u.id, u]));
}

async function present(ctx: AppContext, user: User, namespaces: Namespace[]) {
  const pc = { baseUrl: ctx.state.deps.config.baseUrl };
  const owners = await ownersOf(ctx, namespaces);
  return Promise.all(
    namespaces.map(async (ns) =>
      presentNamespace(ns, pc, await countsFor(ctx, user, ns), ns.owner_id ? owners.get(ns.owner_id) : undefined),
    ),
  );
}

/** GitLab's Gitlab::Slug::Path: runs of other characters become `-`, and the ends are trimmed. */
function slugPath(path: string): string {
  return path
    .replace(/[^a-zA-Z0-9_.-]+/g, '-')
    .replace(/^[^a-zA-Z0-9]+/, '')
    .replace(/(\.git|\.atom)+$/i, '')
    .replace(/[^a-zA-Z0-9]+$/, '');
}

/** Suggestions are `<path>1`, `<path>2`... up to this many tries (Namespaces::RandomizedSuffixPath). */
const SUGGESTION_TRIES = 4;

/** A free path like `path` among the namespaces of `parentId` (GitLab's `Namespace.clean_path`). */
async function suggestPath(ctx: AppContext, parentId: number | null, path: string): Promise<string> {
  const base = slugPath(path);
  const db = ctx.state.deps.db;
  if (!(await childPathTaken(db, parentId, base, true))) return base;
  for (let count = 1; ; count++) {
    const candidate =
      count <= SUGGESTION_TRIES ? `${base}${count}` : `${base}${Math.floor(Math.random() * 1e6).toString(36)}`;
    if (!(await childPathTaken(db, parentId, candidate, true))) return candidate;
  }
}

export function registerNamespaceRoutes(api: ApiRouter): void {
  api.get(
    '/namespaces',
    { summary: 'Namespaces of the signed-in user', auth: 'required', params: listParams },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const deps = ctx.state.deps;
      const filter = {
        viewer: { userId: user.id, admin: user.admin, external: user.external, today: today(deps) },
        search: params.search,
        fullPathSearch: params.full_path_search,
        ownedOnly: params.owned_only === true,
        topLevelOnly: params.top_level_only,
      };
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) =>
          namespacesOfUser(deps.db, filter)
            .selectAll('g')
            .orderBy('g.id', 'asc')
            .limit(w.limit)
            .offset(w.offset)
            .execute(),
        (cap) => countUpTo(deps.db, namespacesOfUser(deps.db, filter).select('g.id'), cap),
      );
      ctx.body = await present(ctx, user, rows);
    },
  );

  api.get(
    '/namespaces/:id',
    { summary: 'A namespace', auth: 'required', params: z.object({ id: p.string() }) },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const ns = await findNamespace(ctx.state.deps, params.id);
      if (!ns) throw notFound('Namespace');
      // Only members see a namespace here (GitLab's read_namespace_via_membership, Guest and up,
      // inherited from ancestors): a public group is not enough.
      const member =
        ns.kind === 'user'
          ? user.admin || ns.owner_id === user.id
          : (await loadGroupPolicy(ctx.state.deps, user, ns)).level >= AccessLevel.GUEST;
      if (!member) throw notFound('Namespace');
      ctx.body = (await present(ctx, user, [ns]))[0];
    },
  );

  api.get(
    '/namespaces/:id/exists',
    {
      summary: 'Whether a namespace path is taken',
      auth: 'required',
      params: z.object({ id: p.string(), parent_id: p.int().optional() }),
    },
    async (ctx, params) => {
      const parentId = params.parent_id === undefined ? null : toDbId(params.parent_id);
      // A parent id no row can have holds nothing.
      const exists =
        (params.parent_id === undefined || parentId !== null) &&
        (await childPathTaken(ctx.state.deps.db, parentId, params.id));
      ctx.body = { exists, suggests: exists ? [await suggestPath(ctx, parentId, params.id)] : [] };
    },
  );
}
