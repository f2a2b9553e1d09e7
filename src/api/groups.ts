import { z } from 'zod';
import { countGroups, type GroupFilter, listGroups, subtreeIds } from '../db/queries/namespaces.js';
import { countProjects, listProjects, type ProjectFilter } from '../db/queries/projects.js';
import type { Namespace } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, badRequestMessage, forbidden, notFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { rubyInspectErrors } from '../lib/ruby-inspect.js';
import { loadGroupPolicy } from '../policies/abilities.js';
import { presentGroup, presentGroupDetail } from '../presenters/group.js';
import { presentBasicProject, presentProject } from '../presenters/project.js';
import { registrationTokens } from '../services/ci/runners.js';
import { today } from '../services/deps.js';
import { createGroup, deleteGroup, findGroup, type GroupInput, updateGroup } from '../services/groups.js';
import { buildProjectViews, namespaceFullNames } from '../services/project-views.js';
import { VISIBILITIES } from '../services/visibility.js';
import { accepted, checkUnmodifiedSince, created, currentUser, loadGroup } from './helpers.js';

/** Gitlab::Access.all_values: the levels `min_access_level` accepts. */
const MIN_ACCESS_LEVELS = [10, 15, 20, 30, 40, 50] as const;
const minAccessLevel = () => p.int().pipe(z.literal(MIN_ACCESS_LEVELS)).optional();

/** Anonymous group lists refuse offsets past this (GitLab's offset_pagination_limit). */
const ANONYMOUS_OFFSET_LIMIT_ROWS = 50_000;

/** Orderings GET /groups/:id/projects accepts (a subset of GET /projects'). */
const GROUP_PROJECT_ORDERS = [
  'id',
  'name',
  'path',
  'created_at',
  'updated_at',
  'last_activity_at',
  'similarity',
  'star_count',
] as const;

const listParams = {
  statistics: p.bool().default(false),
  archived: p.bool().optional(),
  skip_groups: p.array(p.intItem()).optional(),
  all_available: p.bool().optional(),
  visibility: p.enum(VISIBILITIES).optional(),
  search: p.string().optional(),
  owned: p.bool().default(false),
  order_by: p.enum(['name', 'path', 'id', 'similarity']).default('name'),
  sort: p.enum(['asc', 'desc']).default('asc'),
  min_access_level: minAccessLevel(),
  top_level_only: p.bool().optional(),
  ...pagination(),
};

const groupFields = {
  description: p.string().optional(),
  visibility: p.enum(VISIBILITIES).optional(),
  share_with_group_lock: p.bool().optional(),
  require_two_factor_authentication: p.bool().optional(),
  two_factor_grace_period: p.int().optional(),
  project_creation_level: p.enum(['noone', 'owner', 'maintainer', 'developer', 'administrator']).optional(),
  subgroup_creation_level: p.enum(['owner', 'maintainer']).optional(),
  // GitLab maps a null emails_disabled to emails enabled.
  emails_disabled: p.bool().nullable().optional(),
  emails_enabled: p.bool().optional(),
  mentions_disabled: p.bool().optional(),
  lfs_enabled: p.bool().optional(),
  request_access_enabled: p.bool().optional(),
  default_branch: p.string().optional(),
};

const createParams = z.object({ name: p.string(), path: p.string(), parent_id: p.int().optional(), ...groupFields });
const updateParams = z.object({
  id: p.string(),
  name: p.string().optional(),
  path: p.string().optional(),
  ...groupFields,
});

const projectListParams = z.object({
  id: p.string(),
  archived: p.bool().optional(),
  visibility: p.enum(VISIBILITIES).optional(),
  search: p.string().optional(),
  active: p.bool().optional(),
  order_by: p.enum(GROUP_PROJECT_ORDERS).default('created_at'),
  sort: p.enum(['asc', 'desc']).default('desc'),
  simple: p.bool().default(false),
  owned: p.bool().default(false),
  starred: p.bool().default(false),
  with_shared: p.bool().default(true),
  include_subgroups: p.bool().default(false),
  include_ancestor_groups: p.bool().default(false),
  min_access_level: minAccessLevel(),
  ...pagination(),
});

type GroupFieldParams = { [K in keyof typeof groupFields]?: z.output<(typeof groupFields)[K]> };

function groupInput(params: GroupFieldParams & { name?: string; path?: string }): GroupInput {
  const { emails_disabled, emails_enabled, default_branch, ...rest } = params;
  const input: GroupInput = { ...rest };
  if (emails_enabled !== undefined) input.emails_enabled = emails_enabled;
  else if (emails_disabled !== undefined) input.emails_enabled = !emails_disabled;
  // An empty default branch removes the setting.
  if (default_branch !== undefined) input.default_branch = default_branch === '' ? null : default_branch;
  return input;
}

async function presentGroups(ctx: AppContext, groups: Namespace[]) {
  const names = await namespaceFullNames(ctx.state.deps, groups);
  const pc = { baseUrl: ctx.state.deps.config.baseUrl };
  return groups.map((g) => presentGroup(g, pc, names.get(g.id) ?? g.name));
}

/** Projects of the group (not of subgroups) the caller may see, for GroupDetail. */
async function detailProjects(ctx: AppContext, group: Namespace) {
  const deps = ctx.state.deps;
  const user = ctx.state.actor.user;
  const filter: ProjectFilter = {
    viewer: viewerOf(ctx),
    namespaceIds: [group.id],
    orderBy: 'id',
    sort: 'desc',
  };
  const projects = await listProjects(deps.db, filter, { limit: 100, offset: 0 });
  const views = await buildProjectViews(deps, user, projects);
  return views.map((v) => presentProject(v, { baseUrl: deps.config.baseUrl }));
}

export function viewerOf(ctx: AppContext) {
  const user = ctx.state.actor.user;
  return {
    userId: user?.id ?? null,
    admin: user?.admin ?? false,
    external: user?.external ?? false,
    today: today(ctx.state.deps),
  };
}

/**
 * One page of a group list. Without `all_available`, signed-in users who are not administrators
 * see only the groups related to them by membership (GitLab's GroupsFinder); anonymous callers
 * see public groups.
 */
async function listGroupPage(
  ctx: AppContext,
  params: z.output<z.ZodObject<typeof listParams>>,
  extra: Partial<GroupFilter>,
) {
  const deps = ctx.state.deps;
  const viewer = viewerOf(ctx);
  const allAvailable = params.all_available ?? viewer.admin;
  const filter: GroupFilter = {
    viewer,
    owned: params.owned,
    membership: !allAvailable,
    minAccessLevel: params.min_access_level,
    search: params.search,
    visibility: params.visibility,
    skipIds: params.skip_groups,
    topLevelOnly: params.top_level_only,
    archived: params.archived,
    orderBy: params.order_by === 'similarity' && !params.search ? 'name' : params.order_by,
    sort: params.sort,
    ...extra,
  };
  const groups = await paginateQuery(
    ctx,
    deps.config.baseUrl,
    params,
    (w) => listGroups(deps.db, filter, w),
    (cap) => countGroups(deps.db, filter, cap),
  );
  ctx.body = await presentGroups(ctx, groups);
}

export function registerGroupRoutes(api: ApiRouter): void {
  api.get('/groups', { summary: 'List groups', params: z.object(listParams) }, async (ctx, params) => {
    // Anonymous lists are keyset-capable in GitLab, which caps their offsets.
    if (!ctx.state.actor.user && params.page * params.per_page > ANONYMOUS_OFFSET_LIMIT_ROWS) {
      throw new ApiError(405, {
        error: `Offset pagination has a maximum allowed offset of ${ANONYMOUS_OFFSET_LIMIT_ROWS} for requests that return objects of type Group. Remaining records can be retrieved using keyset pagination.`,
      });
    }
    await listGroupPage(ctx, params, {});
  });

  api.get(
    '/groups/:id',
    { summary: 'A group', params: z.object({ id: p.string(), with_projects: p.bool().default(true) }) },
    async (ctx, params) => {
      const { group, policy } = await loadGroup(ctx, params.id);
      const names = await namespaceFullNames(ctx.state.deps, [group]);
      const runnersToken = policy.can('admin_group')
        ? (await registrationTokens(ctx.state.deps, 'group', [group.id])).get(group.id)
        : undefined;
      ctx.body = presentGroupDetail(
        group,
        { baseUrl: ctx.state.deps.config.baseUrl },
        names.get(group.id) ?? group.name,
        {
          ...(params.with_projects ? { projects: await detailProjects(ctx, group) } : {}),
          ...(runnersToken !== undefined ? { runnersToken } : {}),
        },
      );
    },
  );

  api.post('/groups', { summary: 'Create a group', auth: 'required', params: createParams }, async (ctx, params) => {
    const user = currentUser(ctx);
    const deps = ctx.state.deps;
    const { parent_id, ...fields } = params;
    let parent: Namespace | null = null;
    if (parent_id !== undefined) {
      const found = await findGroup(deps, String(parent_id));
      const policy = found ? await loadGroupPolicy(deps, user, found) : undefined;
      if (!found || !policy?.can('read_group')) throw notFound('Group');
      policy.authorize('create_subgroup');
      parent = found;
    } else if (!user.admin && !user.can_create_group) {
      throw forbidden();
    }
    let group: Namespace;
    try {
      group = await createGroup(deps, user, { ...groupInput(fields), name: fields.name, path: fields.path }, parent);
    } catch (error) {
      // GitLab reports a failed group save as one message with the errors hash inspected.
      if (error instanceof ApiError && error.status === 400 && typeof error.body.message === 'object') {
        throw badRequestMessage(
          `Failed to save group ${rubyInspectErrors(error.body.message as Record<string, string[]>)}`,
        );
      }
      throw error;
    }
    const names = await namespaceFullNames(deps, [group]);
    created(ctx, presentGroupDetail(group, { baseUrl: deps.config.baseUrl }, names.get(group.id) ?? group.name, {}));
  });

  api.put('/groups/:id', { summary: 'Update a group', auth: 'required', params: updateParams }, async (ctx, params) => {
    const { group, policy } = await loadGroup(ctx, params.id);
    policy.authorize('admin_group');
    const { id: _id, ...fields } = params;
    const updated = await updateGroup(ctx.state.deps, group, groupInput(fields), currentUser(ctx));
    const names = await namespaceFullNames(ctx.state.deps, [updated]);
    ctx.body = presentGroupDetail(
      updated,
      { baseUrl: ctx.state.deps.config.baseUrl },
      names.get(updated.id) ?? updated.name,
      {
        projects: await detailProjects(ctx, updated),
      },
    );
  });

  api.delete(
    '/groups/:id',
    { summary: 'Delete a group', auth: 'required', params: z.object({ id: p.string() }) },
    async (ctx, params) => {
      const { group, policy } = await loadGroup(ctx, params.id);
      policy.authorize('remove_group');
      checkUnmodifiedSince(ctx, group.updated_at);
      await deleteGroup(ctx.state.deps, group);
      accepted(ctx);
    },
  );

  api.get(
    '/groups/:id/subgroups',
    { summary: 'Subgroups of a group', params: z.object({ id: p.string(), ...listParams }) },
    async (ctx, params) => {
      const { group } = await loadGroup(ctx, params.id);
      await listGroupPage(ctx, params, { parentId: group.id });
    },
  );

  api.get(
    '/groups/:id/descendant_groups',
    { summary: 'Descendant groups of a group', params: z.object({ id: p.string(), ...listParams }) },
    async (ctx, params) => {
      const { group } = await loadGroup(ctx, params.id);
      await listGroupPage(ctx, params, { descendantsOf: group.id });
    },
  );

  api.get(
    '/groups/:id/projects',
    { summary: 'Projects of a group', params: projectListParams },
    async (ctx, params) => {
      const { group } = await loadGroup(ctx, params.id);
      const deps = ctx.state.deps;
      const namespaceIds = params.include_subgroups ? await subtreeIds(deps.db, group.id) : [group.id];
      if (params.include_ancestor_groups) namespaceIds.push(...group.traversal_ids.filter((id) => id !== group.id));
      // `active` means not archived; asking for active and archived at once matches nothing.
      const archived = params.active === undefined ? params.archived : !params.active;
      if (params.active !== undefined && params.archived !== undefined && params.archived === params.active) {
        namespaceIds.length = 0;
      }
      // Depot has no stars yet: a signed-in caller has starred nothing (GitLab ignores it for anonymous callers).
      if (params.starred && ctx.state.actor.user) namespaceIds.length = 0;
      // Similarity needs a search; without one GitLab orders by name.
      const bySimilarityWithoutSearch = params.order_by === 'similarity' && !params.search;
      const filter: ProjectFilter = {
        viewer: viewerOf(ctx),
        namespaceIds,
        archived,
        visibility: params.visibility,
        search: params.search,
        owned: params.owned,
        minAccessLevel: params.min_access_level,
        orderBy: params.order_by === 'created_at' ? 'id' : bySimilarityWithoutSearch ? 'name' : params.order_by,
        sort: bySimilarityWithoutSearch ? 'asc' : params.sort,
      };
      const projects = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listProjects(deps.db, filter, w),
        (cap) => countProjects(deps.db, filter, cap),
      );
      const views = await buildProjectViews(deps, ctx.state.actor.user, projects);
      const pc = { baseUrl: deps.config.baseUrl };
      ctx.body = views.map((v) => (params.simple ? presentBasicProject(v, pc) : presentProject(v, pc)));
    },
  );
}
