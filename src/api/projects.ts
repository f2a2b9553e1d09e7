import { z } from 'zod';
import { findUserNamespace } from '../db/queries/namespaces.js';
import {
  countProjects,
  findProjectById,
  listProjects,
  type ProjectFilter,
  type ProjectOrder,
} from '../db/queries/projects.js';
import type { Namespace, Project, ProjectFeatures } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, notFound, validationError } from '../http/errors.js';
import { pageUrl, paginateQuery } from '../http/pagination.js';
import { atLeastOneOf, p, pagination } from '../http/params.js';
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
import { scheduleMove } from '../storage/moves.js';
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
  group_runners_enabled: p.bool().optional(),
  emails_enabled: p.bool().optional(),
  auto_devops_enabled: p.bool().optional(),
  auto_devops_deploy_strategy: p.enum(['continuous', 'manual', 'timed_incremental']).optional(),
  auto_cancel_pending_pipelines: p.enum(['disabled', 'enabled']).optional(),
  build_git_strategy: p.enum(['fetch', 'clone']).optional(),
  packages_enabled: p.bool().optional(),
  service_desk_enabled: p.bool().optional(),
  autoclose_referenced_issues: p.bool().optional(),
  resolve_outdated_diff_discussions: p.bool().optional(),
  enforce_auth_checks_on_uploads: p.bool().optional(),
  warn_about_potentially_unwanted_characters: p.bool().optional(),
  public_jobs: p.bool().optional(),
  suggestion_commit_message: p.string().optional(),
  merge_commit_template: p.string().optional(),
  squash_commit_template: p.string().optional(),
  issue_branch_template: p.string().optional(),
  build_timeout: p.int().pipe(z.number().min(600).max(2592000)).optional(),
};

/** Settings only PUT accepts (GitLab's `optional_update_params`). */
const updateSettingParams = {
  ci_default_git_depth: p.int().pipe(z.number().min(0).max(1000)).optional(),
  keep_latest_artifact: p.bool().optional(),
  ci_forward_deployment_enabled: p.bool().optional(),
  ci_forward_deployment_rollback_allowed: p.bool().optional(),
  ci_allow_fork_pipelines_to_run_in_parent_project: p.bool().optional(),
  ci_separated_caches: p.bool().optional(),
  restrict_user_defined_variables: p.bool().optional(),
  ci_push_repository_for_job_token_allowed: p.bool().optional(),
  ci_id_token_sub_claim_components: p.array(p.enum(['project_path', 'ref_type', 'ref'])).optional(),
  ci_delete_pipelines_in_seconds: p.int().optional(),
  max_artifacts_size: p.int().optional(),
};

/**
 * Parameters GitLab declares that Depot accepts without acting on them (no such feature here):
 * they still count for PUT's "at least one parameter".
 */
const acceptedParams = {
  show_default_award_emojis: p.bool().optional(),
  show_diff_preview_in_email: p.bool().optional(),
  mr_default_target_self: p.bool().optional(),
  resource_group_default_process_mode: p.string().optional(),
  merge_request_title_regex: p.string().optional(),
  merge_request_title_regex_description: p.string().optional(),
  merge_pipelines_enabled: p.bool().optional(),
  merge_trains_enabled: p.bool().optional(),
  merge_requests_template: p.string().optional(),
  package_registry_access_level: p.enum(PAGES_LEVELS).optional(),
  container_expiration_policy_attributes: z.record(z.string(), z.unknown()).optional(),
  avatar: z.unknown().optional(),
};

const projectFields = {
  description: p.string().optional(),
  visibility: p.enum(VISIBILITIES).optional(),
  request_access_enabled: p.bool().optional(),
  lfs_enabled: p.bool().optional(),
  topics: p.array(p.string()).optional(),
  tag_list: p.array(p.string()).optional(),
  repository_storage: p.string().optional(),
  // Deprecated spellings: emails_disabled is the inverse of emails_enabled, public_builds of public_jobs.
  emails_disabled: p.bool().optional(),
  public_builds: p.bool().optional(),
  ...featureParams,
  ...settingParams,
  ...acceptedParams,
};

const createParams = z
  .object({
    name: p.string().optional(),
    path: p.string().optional(),
    namespace_id: p.string().optional(),
    default_branch: p.string().optional(),
    initialize_with_readme: p.bool().default(false),
    repository_object_format: p.enum(['sha1', 'sha256']).optional(),
    ...projectFields,
  })
  .superRefine((v, ctx) => atLeastOneOf(v, ['name', 'path'], ctx));

/** GitLab's `update_params_at_least_one_of`, in its order (the error message lists them all). */
const UPDATE_NAMES = [
  'allow_merge_on_skipped_pipeline',
  'analytics_access_level',
  'autoclose_referenced_issues',
  'auto_devops_enabled',
  'auto_devops_deploy_strategy',
  'auto_cancel_pending_pipelines',
  'build_git_strategy',
  'build_timeout',
  'builds_access_level',
  'ci_config_path',
  'ci_default_git_depth',
  'ci_allow_fork_pipelines_to_run_in_parent_project',
  'ci_id_token_sub_claim_components',
  'ci_forward_deployment_enabled',
  'ci_forward_deployment_rollback_allowed',
  'ci_separated_caches',
  'container_registry_access_level',
  'container_expiration_policy_attributes',
  'default_branch',
  'description',
  'emails_disabled',
  'emails_enabled',
  'forking_access_level',
  'issues_access_level',
  'lfs_enabled',
  'merge_pipelines_enabled',
  'merge_requests_access_level',
  'merge_requests_template',
  'merge_trains_enabled',
  'merge_method',
  'merge_request_title_regex',
  'merge_request_title_regex_description',
  'name',
  'only_allow_merge_if_all_discussions_are_resolved',
  'only_allow_merge_if_pipeline_succeeds',
  'package_registry_access_level',
  'pages_access_level',
  'path',
  'printing_merge_request_link_enabled',
  'public_builds',
  'public_jobs',
  'remove_source_branch_after_merge',
  'repository_access_level',
  'request_access_enabled',
  'resolve_outdated_diff_discussions',
  'restrict_user_defined_variables',
  'show_diff_preview_in_email',
  'security_and_compliance_access_level',
  'squash_option',
  'shared_runners_enabled',
  'group_runners_enabled',
  'resource_group_default_process_mode',
  'snippets_access_level',
  'tag_list',
  'topics',
  'visibility',
  'wiki_access_level',
  'avatar',
  'suggestion_commit_message',
  'merge_commit_template',
  'squash_commit_template',
  'issue_branch_template',
  'repository_storage',
  'packages_enabled',
  'service_desk_enabled',
  'keep_latest_artifact',
  'mr_default_target_self',
  'enforce_auth_checks_on_uploads',
  'releases_access_level',
  'environments_access_level',
  'feature_flags_access_level',
  'infrastructure_access_level',
  'monitor_access_level',
  'model_experiments_access_level',
  'model_registry_access_level',
  'warn_about_potentially_unwanted_characters',
  'ci_pipeline_variables_minimum_override_role',
  'ci_push_repository_for_job_token_allowed',
  'ci_delete_pipelines_in_seconds',
  'max_artifacts_size',
  'issues_enabled',
  'jobs_enabled',
  'merge_requests_enabled',
  'wiki_enabled',
  'snippets_enabled',
  'container_registry_enabled',
];

const updateParams = z
  .object({
    id: p.string(),
    name: p.string().optional(),
    path: p.string().optional(),
    default_branch: p.string().optional(),
    ...projectFields,
    ...updateSettingParams,
    ci_pipeline_variables_minimum_override_role: p
      .enum(['no_one_allowed', 'developer', 'maintainer', 'owner'])
      .optional(),
  })
  .superRefine((v, ctx) => atLeastOneOf(v, UPDATE_NAMES, ctx));

/** Orders GET /projects accepts; the statistics ones are for administrators. */
const LIST_ORDERS = [
  'id',
  'name',
  'path',
  'created_at',
  'updated_at',
  'last_activity_at',
  'similarity',
  'star_count',
  'storage_size',
  'repository_size',
  'wiki_size',
  'packages_size',
] as const;
const STATISTICS_ORDERS = new Set(['storage_size', 'repository_size', 'wiki_size', 'packages_size']);

/** `Gitlab::Access.all_values` (with Minimal Access, as the groups API accepts it). */
const MIN_ACCESS_LEVELS = [5, 10, 15, 20, 30, 40, 50] as const;

const listParams = z.object({
  order_by: p.enum(LIST_ORDERS).default('created_at'),
  sort: p.enum(['asc', 'desc']).default('desc'),
  archived: p.bool().optional(),
  visibility: p.enum(VISIBILITIES).optional(),
  search: p.string().optional(),
  search_namespaces: p.bool().default(false),
  owned: p.bool().default(false),
  starred: p.bool().default(false),
  membership: p.bool().default(false),
  min_access_level: p.int().pipe(z.literal(MIN_ACCESS_LEVELS)).optional(),
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
});

type FieldParams = Record<string, unknown>;

const FEATURE_SET = new Set<string>(FEATURE_NAMES);
const SETTING_NAMES = new Set([
  ...Object.keys(settingParams),
  ...Object.keys(updateSettingParams),
  'ci_pipeline_variables_minimum_override_role',
]);

/** Splits flat request params into the service's project input. */
function projectInput(params: FieldParams): ProjectInput {
  const input: ProjectInput = {};
  const features: Partial<ProjectFeatures> = {};
  const settings: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined) continue;
    const feature = key.endsWith('_access_level') ? key.slice(0, -'_access_level'.length) : null;
    if (feature !== null && FEATURE_SET.has(feature)) {
      features[feature as keyof ProjectFeatures] = value as string;
    } else if (key in DEPRECATED_FEATURE_FLAGS) {
      const flagged = DEPRECATED_FEATURE_FLAGS[key] as keyof ProjectFeatures;
      if (params[`${flagged}_access_level`] === undefined) features[flagged] = value ? 'enabled' : 'disabled';
    } else if (SETTING_NAMES.has(key)) {
      settings[key] = value;
    }
  }
  // GitLab's translate_params_for_compatibility: emails_disabled overrides emails_enabled, while
  // public_jobs overrides public_builds.
  if (params.emails_disabled !== undefined) settings.emails_enabled = !params.emails_disabled;
  if (params.public_builds !== undefined && params.public_jobs === undefined) {
    settings.public_jobs = params.public_builds;
  }
  for (const key of [
    'name',
    'path',
    'description',
    'visibility',
    'default_branch',
    'request_access_enabled',
    'lfs_enabled',
  ] as const) {
    if (params[key] !== undefined) (input as Record<string, unknown>)[key] = params[key];
  }
  const topics = (params.topics ?? params.tag_list) as string[] | undefined;
  if (topics !== undefined) input.topics = topics;
  if (Object.keys(features).length > 0) input.features = features;
  if (Object.keys(settings).length > 0) input.settings = settings as ProjectSettings;
  return input;
}

/**
 * One project as the caller sees it: BasicProjectDetails for anonymous callers (GitLab's
 * ProjectDetails, without forks here), ProjectWithAccess for GET, Project for POST and PUT.
 */
async function presentOne(ctx: AppContext, project: Project | undefined, withAccess: boolean) {
  const deps = ctx.state.deps;
  if (!project) throw notFound('Project');
  const [view] = await buildProjectViews(deps, ctx.state.actor.user, [project]);
  const pc = { baseUrl: deps.config.baseUrl };
  if (!view) throw notFound('Project');
  if (!ctx.state.actor.user) return presentBasicProject(view, pc);
  const options = { withImportError: true };
  return withAccess ? presentProjectWithAccess(view, pc, options) : presentProject(view, pc, options);
}

/** The list order GitLab ends up using: `created_at` is `id`; fallbacks for orders the caller may not use. */
function listOrder(params: z.output<typeof listParams>, signedIn: boolean): ProjectOrder {
  if (params.order_by === 'created_at' || STATISTICS_ORDERS.has(params.order_by)) {
    // Statistics orders are the default order for non-admins; for admins every project's
    // statistics are zero here, so the id tie-breaker decides.
    return 'id';
  }
  if (params.order_by === 'similarity') return params.search && signedIn ? 'similarity' : 'id';
  return params.order_by as ProjectOrder;
}

/** GET /projects's parameters, shared with GET /users/:user_id/projects. */
export const projectListParams = listParams;

/**
 * GET /projects (and, with `namespaceIds`, GET /users/:user_id/projects: the same filters on
 * one user's personal projects): the projects the caller may see, paginated and presented.
 */
export async function respondWithProjectList(
  ctx: AppContext,
  params: z.output<typeof listParams>,
  scope: { namespaceIds?: number[] } = {},
): Promise<void> {
  const deps = ctx.state.deps;
  const user = ctx.state.actor.user;
  const admin = user?.admin ?? false;
  const keyset = params.pagination === 'keyset';
  if (keyset && params.order_by !== 'id') {
    throw new ApiError(405, { error: 'Keyset pagination is not yet available for this type of request' });
  }
  const orderBy = listOrder(params, user !== null);
  const filter: ProjectFilter = {
    viewer: viewerOf(ctx),
    owned: params.owned,
    // Ordering by similarity limits the list to the caller's own projects, as GitLab does.
    membership: params.membership || orderBy === 'similarity',
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
    orderBy,
    sort: params.sort,
  };
  if (scope.namespaceIds) {
    // GitLab's PersonalProjectsFinder takes the place of the collection that `owned`,
    // `membership` and `min_access_level` choose, so those are ignored for one user's projects.
    filter.namespaceIds = scope.namespaceIds;
    filter.owned = false;
    filter.membership = false;
    filter.minAccessLevel = undefined;
  }
  // Depot has no stars yet: a signed-in caller has starred nothing; GitLab ignores it for anonymous callers.
  if (params.starred && user) filter.namespaceIds = [];
  let projects: Project[];
  if (keyset) {
    projects = await listProjects(deps.db, filter, { limit: params.per_page, offset: 0 });
    ctx.set('X-Per-Page', String(params.per_page));
    // GitLab's keyset pager links to the next page whenever this one has a last record.
    const last = projects[projects.length - 1];
    if (last) {
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
  ctx.body = views.map((v) => (!user || params.simple ? presentBasicProject(v, pc) : presentProjectWithAccess(v, pc)));
}

export function registerProjectRoutes(api: ApiRouter): void {
  api.get('/projects', { summary: 'List projects', params: listParams }, (ctx, params) =>
    respondWithProjectList(ctx, params),
  );

  api.get(
    '/projects/:id',
    {
      summary: 'A project',
      params: z.object({ id: p.string(), statistics: p.bool().default(false), license: p.bool().default(false) }),
    },
    async (ctx, params) => {
      const { project } = await loadProject(ctx, params.id);
      ctx.body = await presentOne(ctx, project, true);
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
      // Only administrators choose a storage; anyone else's choice is dropped.
      const storage = user.admin ? params.repository_storage : undefined;
      if (storage !== undefined && !deps.storages.has(storage)) {
        throw validationError({ repository_storage: ['is not included in the list'] });
      }
      const project = await createProject(
        deps,
        user,
        {
          ...input,
          initializeWithReadme: params.initialize_with_readme,
          ...(storage !== undefined ? { repositoryStorage: storage } : {}),
        },
        namespace,
      );
      created(ctx, await presentOne(ctx, await findProjectById(deps.db, project.id), false));
    },
  );

  api.put(
    '/projects/:id',
    { summary: 'Update a project', auth: 'required', params: updateParams },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      policy.authorize('admin_project');
      const input = projectInput(params);
      // GitLab asks for the visibility right whenever the parameter is given, changed or not.
      if (input.visibility !== undefined) policy.authorize('change_visibility_level');
      // An administrator's new repository_storage schedules a storage move (GitLab's
      // Projects::UpdateService); the project shows its new storage once the move has finished.
      const storage = ctx.state.actor.user?.admin ? params.repository_storage : undefined;
      if (storage !== undefined && storage !== project.repository_storage) {
        await scheduleMove(ctx.state.deps, { type: 'project', project }, storage);
      }
      const updated = await updateProject(ctx.state.deps, project, input, currentUser(ctx));
      ctx.body = await presentOne(ctx, updated, false);
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
