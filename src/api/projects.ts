import { z } from 'zod';
import { findUserNamespace } from '../db/queries/namespaces.js';
import { countProjects, listProjects, PROJECT_ORDER_COLUMNS, type ProjectFilter } from '../db/queries/projects.js';
import type { Namespace, Project, ProjectFeatures } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, badRequest, validationError } from '../http/errors.js';
import { pageUrl, paginateQuery } from '../http/pagination.js';
import { atLeastOneOf, mutuallyExclusive, p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { canCreateProjectIn } from '../policies/abilities.js';
import { presentBasicProject, presentProject, presentProjectWithAccess } from '../presenters/project.js';
import { findNamespace } from '../services/groups.js';
import { buildProjectViews } from '../services/project-views.js';
import {
  createProject,
  deleteProject,
  FEATURE_NAMES,
  type ProjectInput,
  type ProjectSettings,
  updateProject,
} from '../services/projects.js';
import { fitsWithin, VISIBILITIES } from '../services/visibility.js';
import { viewerOf } from './groups.js';
import { accepted, created, currentUser, loadProject } from './helpers.js';

const ACCESS_LEVELS = ['disabled', 'private', 'enabled'] as const;
const PAGES_LEVELS = ['disabled', 'private', 'enabled', 'public'] as const;

/** `<feature>_access_level` params, and the deprecated `<x>_enabled` booleans. */
const featureParams = {
  ...Object.fromEntries(
    FEATURE_NAMES.map((f) => [`${f}_access_level`, p.enum(f === 'pages' ? PAGES_LEVELS : ACCESS_LEVELS).optional()]),
  ),
  issues_enabled: p.bool().optional(),
  merge_requests_enabled: p.bool().optional(),
  wiki_enabled: p.bool().optional(),
  jobs_enabled: p.bool().optional(),
  snippets_enabled: p.bool().optional(),
  container_registry_enabled: p.bool().optional(),
} as Record<string, z.ZodType>;

const DEPRECATED_FEATURE_FLAGS: Record<string, keyof ProjectFeatures> = {
  issues_enabled: 'issues',
  merge_requests_enabled: 'merge_requests',
  wiki_enabled: 'wiki',
  jobs_enabled: 'builds',
  snippets_enabled: 'snippets',
  container_registry_enabled: 'container_registry',
};

const settingParams = {
  only_allow_merge_if_pipeline_succeeds: p.bool().optional(),
  only_allow_merge_if_all_discussions_are_resolved: p.bool().optional(),
  remove_source_branch_after_merge: p.bool().optional(),
  allow_merge_on_skipped_pipeline: p.bool().optional(),
  printing_merge_request_link_enabled: p.bool().optional(),
  merge_method: p.enum(['merge', 'rebase_merge', 'ff']).optional(),
  squash_option: p.enum(['never', 'always', 'default_on', 'default_off']).optional(),
  ci_config_path: p.string().optional(),
  shared_runners_enabled: p.bool().optional(),
  emails_enabled: p.bool().optional(),
  auto_devops_enabled: p.bool().optional(),
  packages_enabled: p.bool().optional(),
  service_desk_enabled: p.bool().optional(),
  autoclose_referenced_issues: p.bool().optional(),
  suggestion_commit_message: p.string().optional(),
  merge_commit_template: p.string().optional(),
  squash_commit_template: p.string().optional(),
  issue_branch_template: p.string().optional(),
  build_timeout: p.int().pipe(z.number().min(600).max(2592000)).optional(),
};

const projectFields = {
  description: p.string().optional(),
  visibility: p.enum(VISIBILITIES).optional(),
  request_access_enabled: p.bool().optional(),
  lfs_enabled: p.bool().optional(),
  topics: p.array(p.string()).optional(),
  tag_list: p.array(p.string()).optional(),
  repository_storage: p.string().optional(),
  ...featureParams,
  ...settingParams,
};

const createParams = z
  .object({
    name: p.string().optional(),
    path: p.string().optional(),
    namespace_id: p.string().optional(),
    default_branch: p.string().optional(),
    initialize_with_readme: p.bool().default(false),
    ...projectFields,
  })
  .superRefine((v, ctx) => atLeastOneOf(v, ['name', 'path'], ctx));

const UPDATE_NAMES = ['name', 'path', 'default_branch', ...Object.keys(projectFields), 'archived'];

const updateParams = z
  .object({
    id: p.string(),
    name: p.string().optional(),
    path: p.string().optional(),
    default_branch: p.string().optional(),
    archived: p.bool().optional(),
    ...projectFields,
  })
  .superRefine((v, ctx) => atLeastOneOf(v, UPDATE_NAMES, ctx));

const listParams = z
  .object({
    order_by: p.enum(PROJECT_ORDER_COLUMNS).default('created_at'),
    sort: p.enum(['asc', 'desc']).default('desc'),
    archived: p.bool().optional(),
    visibility: p.enum(VISIBILITIES).optional(),
    search: p.string().optional(),
    search_namespaces: p.bool().default(false),
    owned: p.bool().default(false),
    starred: p.bool().default(false),
    membership: p.bool().default(false),
    min_access_level: p.int().optional(),
    id_after: p.int().optional(),
    id_before: p.int().optional(),
    last_activity_after: p.datetime().optional(),
    last_activity_before: p.datetime().optional(),
    repository_storage: p.string().optional(),
    topic: p.array(p.string()).optional(),
    simple: p.bool().default(false),
    statistics: p.bool().default(false),
    pagination: p.enum(['offset', 'keyset']).default('offset'),
    ...pagination(),
  })
  .superRefine((v, ctx) => mutuallyExclusive(v, ['id_after', 'id_before'], ctx));

type FieldParams = Record<string, unknown>;

/** Splits flat request params into the service's project input. */
function projectInput(params: FieldParams): ProjectInput {
  const input: ProjectInput = {};
  const features: Partial<ProjectFeatures> = {};
  const settings: ProjectSettings = {};
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined) continue;
    if (key.endsWith('_access_level')) {
      features[key.slice(0, -'_access_level'.length) as keyof ProjectFeatures] = value as string;
    } else if (key in DEPRECATED_FEATURE_FLAGS) {
      const feature = DEPRECATED_FEATURE_FLAGS[key] as keyof ProjectFeatures;
      if (params[`${feature}_access_level`] === undefined) features[feature] = value ? 'enabled' : 'disabled';
    } else if (key in settingParams) {
      (settings as Record<string, unknown>)[key] = value;
    }
  }
  for (const key of [
    'name',
    'path',
    'description',
    'visibility',
    'default_branch',
    'request_access_enabled',
    'lfs_enabled',
    'archived',
  ] as const) {
    if (params[key] !== undefined) (input as Record<string, unknown>)[key] = params[key];
  }
  const topics = (params.topics ?? params.tag_list) as string[] | undefined;
  if (topics !== undefined) input.topics = topics;
  if (Object.keys(features).length > 0) input.features = features;
  if (Object.keys(settings).length > 0) input.settings = settings;
  return input;
}

async function presentOne(ctx: AppContext, projectId: number, withAccess: boolean) {
  const deps = ctx.state.deps;
  const project = await deps.db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', projectId)
    .executeTakeFirstOrThrow();
  const [view] = await buildProjectViews(deps, ctx.state.actor.user, [project]);
  const pc = { baseUrl: deps.config.baseUrl };
  if (!view) throw new Error('project view missing');
  if (!ctx.state.actor.user) return presentBasicProject(view, pc);
  return withAccess ? presentProjectWithAccess(view, pc) : presentProject(view, pc);
}

export function registerProjectRoutes(api: ApiRouter): void {
  api.get('/projects', { summary: 'List projects', params: listParams }, async (ctx, params) => {
    const deps = ctx.state.deps;
    const user = ctx.state.actor.user;
    const admin = user?.admin ?? false;
    const keyset = params.pagination === 'keyset';
    if (keyset && params.order_by !== 'id') {
      throw new ApiError(405, { error: 'Keyset pagination is not yet available for this type of request' });
    }
    const filter: ProjectFilter = {
      viewer: viewerOf(ctx),
      owned: params.owned,
      membership: params.membership,
      minAccessLevel: params.min_access_level,
      search: params.search,
      searchNamespaces: params.search_namespaces,
      visibility: params.visibility,
      archived: params.archived,
      topic: params.topic,
      repositoryStorage: admin ? params.repository_storage : undefined,
      idAfter: params.id_after,
      idBefore: params.id_before,
      lastActivityAfter: params.last_activity_after,
      lastActivityBefore: params.last_activity_before,
      // created_at ordering is GitLab's id ordering; similarity needs a search term.
      orderBy:
        params.order_by === 'created_at' || (params.order_by === 'similarity' && !params.search)
          ? 'id'
          : params.order_by,
      sort: params.sort,
    };
    if (params.starred) filter.namespaceIds = []; // Depot has no stars yet: nothing is starred.
    let projects: Project[];
    if (keyset) {
      projects = await listProjects(deps.db, filter, { limit: params.per_page, offset: 0 });
      ctx.set('X-Per-Page', String(params.per_page));
      const last = projects[projects.length - 1];
      if (last && projects.length === params.per_page) {
        const url = new URL(pageUrl(ctx, deps.config.baseUrl, 1, params.per_page));
        url.searchParams.delete('id_after');
        url.searchParams.delete('id_before');
        url.searchParams.set(params.sort === 'asc' ? 'id_after' : 'id_before', String(last.id));
        url.searchParams.delete('page');
        ctx.set('Link', `<${url.toString()}>; rel="next"`);
      }
    } else {
      projects = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listProjects(deps.db, filter, w),
        (cap) => countProjects(deps.db, filter, cap),
      );
    }
    const views = await buildProjectViews(deps, user, projects);
    const pc = { baseUrl: deps.config.baseUrl };
    ctx.body = views.map((v) =>
      !user || params.simple ? presentBasicProject(v, pc) : presentProjectWithAccess(v, pc),
    );
  });

  api.get(
    '/projects/:id',
    {
      summary: 'A project',
      params: z.object({ id: p.string(), statistics: p.bool().default(false), license: p.bool().default(false) }),
    },
    async (ctx, params) => {
      const { project } = await loadProject(ctx, params.id);
      ctx.body = await presentOne(ctx, project.id, true);
    },
  );

  api.post(
    '/projects',
    { summary: 'Create a project', auth: 'required', params: createParams },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const deps = ctx.state.deps;
      let namespace: Namespace | undefined;
      if (params.namespace_id !== undefined) {
        namespace = await findNamespace(deps, params.namespace_id);
        if (!namespace || !(await canCreateProjectIn(deps, user, namespace))) {
          throw validationError({ namespace: ['is not valid'] });
        }
      } else {
        namespace = await findUserNamespace(deps.db, user.id);
        if (!namespace) throw validationError({ namespace: ['is not valid'] });
      }
      const input = projectInput(params);
      // GitLab lowers a requested visibility the group does not allow, on creation only.
      if (input.visibility && namespace.kind === 'group' && !fitsWithin(input.visibility, namespace.visibility)) {
        input.visibility = namespace.visibility;
      }
      if (params.repository_storage !== undefined) {
        if (!user.admin) throw badRequest();
        if (!deps.storages.has(params.repository_storage)) {
          throw validationError({ repository_storage: ['is not included in the list'] });
        }
      }
      const project = await createProject(
        deps,
        user,
        {
          ...input,
          initializeWithReadme: params.initialize_with_readme,
          ...(user.admin && params.repository_storage ? { repositoryStorage: params.repository_storage } : {}),
        },
        namespace,
      );
      created(ctx, await presentOne(ctx, project.id, false));
    },
  );

  api.put(
    '/projects/:id',
    { summary: 'Update a project', auth: 'required', params: updateParams },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      policy.authorize('admin_project');
      const input = projectInput(params);
      if (input.visibility !== undefined && input.visibility !== project.visibility) {
        policy.authorize('change_visibility_level');
      }
      await updateProject(ctx.state.deps, project, input);
      ctx.body = await presentOne(ctx, project.id, false);
    },
  );

  api.delete(
    '/projects/:id',
    { summary: 'Delete a project', auth: 'required', params: z.object({ id: p.string() }) },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      policy.authorize('remove_project');
      await deleteProject(ctx.state.deps, project);
      accepted(ctx);
    },
  );
}
