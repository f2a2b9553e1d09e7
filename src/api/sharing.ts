import { z } from 'zod';
import { countProjectGroups, listProjectGroups, type ProjectGroupsFilter } from '../db/queries/group-links.js';
import { findProjectById } from '../db/queries/projects.js';
import type { Namespace } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { notFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { isValidDate } from '../lib/clock.js';
import { loadGroupPolicy } from '../policies/abilities.js';
import { presentPublicGroupDetails } from '../presenters/group.js';
import { presentProject, presentProjectGroupLink, presentProjectStorage } from '../presenters/project.js';
import { findGroup, findNamespace } from '../services/groups.js';
import { buildProjectViews, namespaceFullNames } from '../services/project-views.js';
import { shareGroup, shareProject, unshareGroup, unshareProject } from '../services/sharing.js';
import { transferGroup, transferProject } from '../services/transfers.js';
import { Storages } from '../storage/storages.js';
import { groupDetail, viewerOf } from './groups.js';
import { created, currentUser, loadGroup, loadProject, noContent } from './helpers.js';

/** Gitlab::Access.all_values: the levels a group link may grant. */
const LINK_ACCESS_LEVELS = [10, 15, 20, 30, 40, 50] as const;
const linkAccess = () => p.int().pipe(z.literal(LINK_ACCESS_LEVELS));

/** Grape's Date for `expires_at`: a `YYYY-MM-DD` date (a timestamp's date is kept); empty is none. */
const expiresAtParam = () =>
  z.preprocess(
    (v) => (v === '' || v === null ? null : typeof v === 'number' ? String(v) : v),
    z
      .string()
      .refine((s) => isValidDate(s.slice(0, 10)) && (s.length === 10 || !Number.isNaN(Date.parse(s))))
      .transform((s) => s.slice(0, 10))
      .nullable(),
  );

const shareParams = z.object({
  id: p.string(),
  group_id: p.int(),
  group_access: linkAccess(),
  expires_at: expiresAtParam().optional(),
});

const projectGroupsParams = z.object({
  id: p.string(),
  search: p.string().optional(),
  skip_groups: p.array(p.intItem()).optional(),
  with_shared: p.bool().default(false),
  shared_visible_only: p.bool().default(false),
  shared_min_access_level: linkAccess().optional(),
  ...pagination(),
});

/**
 * GitLab's `find_namespace!`: a namespace by id or path that the caller may read (their own, a
 * group they see; administrators any), or 404 `Namespace Not Found`.
 */
async function findReadableNamespace(ctx: AppContext, id: string): Promise<Namespace> {
  const deps = ctx.state.deps;
  const user = currentUser(ctx);
  const namespace = await findNamespace(deps, id);
  if (!namespace) throw notFound('Namespace');
  if (user.admin) return namespace;
  const readable =
    namespace.kind === 'user'
      ? namespace.owner_id === user.id
      : (await loadGroupPolicy(deps, user, namespace)).can('read_group');
  if (!readable) throw notFound('Namespace');
  return namespace;
}

export function registerSharingRoutes(api: ApiRouter): void {
  api.put(
    '/projects/:id/transfer',
    {
      summary: 'Transfer a project to another namespace',
      auth: 'required',
      params: z.object({ id: p.string(), namespace: p.string() }),
      tags: ['projects'],
    },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      // GitLab's change_namespace: Owners of the project (and administrators).
      policy.authorize('remove_project');
      const target = await findReadableNamespace(ctx, params.namespace);
      await transferProject(deps, user, project, target);
      const moved = await findProjectById(deps.db, project.id);
      if (!moved) throw notFound('Project');
      const [view] = await buildProjectViews(deps, user, [moved]);
      ctx.body = presentProject(
        view as NonNullable<typeof view>,
        { baseUrl: deps.config.baseUrl },
        { withImportError: true },
      );
    },
  );

  api.get(
    '/projects/:id/groups',
    { summary: 'Ancestor and shared groups of a project', params: projectGroupsParams, tags: ['projects'] },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, namespace } = await loadProject(ctx, params.id);
      const filter: ProjectGroupsFilter = {
        viewer: viewerOf(ctx),
        ancestorIds: namespace.kind === 'group' ? namespace.traversal_ids : [],
        projectId: project.id,
        withShared: params.with_shared,
        sharedVisibleOnly: params.shared_visible_only,
        sharedMinAccessLevel: params.shared_min_access_level,
        search: params.search,
        skipIds: params.skip_groups,
      };
      const groups = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listProjectGroups(deps.db, filter, w),
        (cap) => countProjectGroups(deps.db, filter, cap),
      );
      const names = await namespaceFullNames(deps, groups);
      const pc = { baseUrl: deps.config.baseUrl };
      ctx.body = groups.map((g) => presentPublicGroupDetails(g, pc, names.get(g.id) ?? g.name));
    },
  );

  api.get(
    '/projects/:id/storage',
    {
      summary: 'Where a project is stored',
      auth: 'required',
      admin: true,
      params: z.object({ id: p.string() }),
      tags: ['projects'],
    },
    async (ctx, params) => {
      const { project } = await loadProject(ctx, params.id);
      ctx.body = presentProjectStorage(project, Storages.hashedPath(project.id));
    },
  );

  api.post(
    '/projects/:id/share',
    { summary: 'Share a project with a group', auth: 'required', params: shareParams, tags: ['projects'] },
    async (ctx, params) => {
      const { project, namespace, policy } = await loadProject(ctx, params.id);
      policy.authorize('admin_project');
      const link = await shareProject(ctx.state.deps, currentUser(ctx), project, namespace, params.group_id, {
        groupAccess: params.group_access,
        expiresAt: params.expires_at ?? null,
      });
      created(ctx, presentProjectGroupLink(link));
    },
  );

  api.delete(
    '/projects/:id/share/:group_id',
    {
      summary: 'Stop sharing a project with a group',
      auth: 'required',
      params: z.object({ id: p.string(), group_id: p.int() }),
      tags: ['projects'],
    },
    async (ctx, params) => {
      const { project, namespace, policy } = await loadProject(ctx, params.id);
      policy.authorize('admin_project');
      const removed = await unshareProject(ctx.state.deps, currentUser(ctx), project, namespace, params.group_id);
      if (!removed) throw notFound('Group Link');
      noContent(ctx);
    },
  );

  api.post(
    '/groups/:id/transfer',
    {
      summary: 'Move a group under another group, or to the top level',
      auth: 'required',
      params: z.object({ id: p.string(), group_id: p.int().optional() }),
      tags: ['groups'],
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { group, policy } = await loadGroup(ctx, params.id);
      policy.authorize('admin_group');
      let parent: Namespace | null = null;
      if (params.group_id !== undefined) parent = (await loadGroup(ctx, String(params.group_id))).group;
      const moved = await transferGroup(deps, currentUser(ctx), group, parent);
      created(ctx, await groupDetail(ctx, moved, false));
    },
  );

  api.post(
    '/groups/:id/share',
    { summary: 'Share a group with a group', auth: 'required', params: shareParams, tags: ['groups'] },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { group } = await loadGroup(ctx, params.id);
      const invited = await findGroup(deps, String(params.group_id));
      const invitedPolicy = invited ? await loadGroupPolicy(deps, ctx.state.actor.user, invited) : undefined;
      if (!invited || !invitedPolicy?.can('read_group')) throw notFound('Group');
      await shareGroup(deps, currentUser(ctx), group, invited, {
        groupAccess: params.group_access,
        expiresAt: params.expires_at ?? null,
      });
      created(ctx, await groupDetail(ctx, group, false));
    },
  );

  api.delete(
    '/groups/:id/share/:group_id',
    {
      summary: 'Stop sharing a group with a group',
      auth: 'required',
      params: z.object({ id: p.string(), group_id: p.int() }),
      tags: ['groups'],
    },
    async (ctx, params) => {
      const { group, policy } = await loadGroup(ctx, params.id);
      policy.authorize('admin_group');
      if (!(await unshareGroup(ctx.state.deps, group, params.group_id))) throw notFound('Group Link');
      noContent(ctx);
    },
  );
}
