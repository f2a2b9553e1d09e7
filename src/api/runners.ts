import { z } from 'zod';
import { findNamespacesByIds } from '../db/queries/namespaces.js';
import type { Runner } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, forbidden, notFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { type Params, p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentRunner, presentRunnerDetails, presentRunnerJob } from '../presenters/ci.js';
import { countRunnerBuilds, runnerBuilds } from '../services/ci/builds.js';
import {
  countRunnerProjects,
  countRunners,
  deleteRunner,
  disableRunnerInProject,
  enableRunnerInProject,
  findRunner,
  findRunnerByToken,
  isRunnerInProject,
  listRunners,
  type RunnerFilter,
  type RunnerScope,
  registerRunner,
  resetRegistrationToken,
  runnerProjects,
  updateRunner,
  userOwnsRunner,
} from '../services/ci/runners.js';
import { jobViews } from '../services/ci/views.js';
import { namespaceFullNames } from '../services/project-views.js';
import { created, currentUser, loadGroup, loadProject } from './helpers.js';

/** Runners (GitLab's lib/api/ci/runners.rb and the registration part of lib/api/ci/runner.rb). */

const TAGS = ['runners'];
const RUNNER_TYPES = ['instance_type', 'group_type', 'project_type'] as const;
const STATUSES = ['active', 'paused', 'online', 'offline', 'never_contacted', 'stale'] as const;
const ACCESS_LEVELS = ['not_protected', 'ref_protected'] as const;

const filterParams = {
  type: p.enum(RUNNER_TYPES).optional(),
  status: p.enum(STATUSES).optional(),
  paused: p.bool().optional(),
  tag_list: p.array(p.string()).optional(),
  ...pagination(),
};

const runnerUpdateParams = {
  description: p.string().optional(),
  active: p.bool().optional(),
  paused: p.bool().optional(),
  tag_list: p.array(p.string()).optional(),
  run_untagged: p.bool().optional(),
  locked: p.bool().optional(),
  access_level: p.enum(ACCESS_LEVELS).optional(),
  maximum_timeout: p.int().optional(),
};

interface FilterInput {
  type?: (typeof RUNNER_TYPES)[number] | undefined;
  status?: string | undefined;
  paused?: boolean | undefined;
  tag_list?: string[] | undefined;
  scope?: string | undefined;
}

/** The filters, with the deprecated `scope` read as GitLab does (a status, or shared/specific). */
function filterOf(params: FilterInput): RunnerFilter {
  let status = params.status;
  let shared: boolean | undefined;
  if (params.scope === 'shared') shared = true;
  else if (params.scope === 'specific') shared = false;
  else if (params.scope) status = params.scope;
  if (params.paused !== undefined) status = params.paused ? 'paused' : 'active';
  return { type: params.type, status, tagList: params.tag_list, shared };
}

function scopeParam(values: readonly [string, ...string[]]) {
  return z
    .preprocess((v) => (v === undefined || v === null ? v : String(v)), z.string().optional())
    .superRefine((v, c) => {
      if (v !== undefined && !values.includes(v))
        c.addIssue({ code: 'custom', message: 'Scope contains an invalid value' });
    });
}

async function listPage(ctx: AppContext, scope: RunnerScope, params: FilterInput & { page: number; per_page: number }) {
  const deps = ctx.state.deps;
  if (
    params.scope !== undefined &&
    !['active', 'paused', 'online', 'offline', 'specific', 'shared'].includes(params.scope)
  ) {
    throw new ApiError(400, { message: '400 Bad request - Scope contains an invalid value' });
  }
  const filter = filterOf(params);
  const runners = await paginateQuery(
    ctx,
    deps.config.baseUrl,
    params,
    (w) => listRunners(deps, scope, filter, w),
    (cap) => countRunners(deps, scope, filter, cap),
  );
  const now = deps.clock.now();
  ctx.body = runners.map((r) => presentRunner(r, now));
}

async function presentDetails(ctx: AppContext, runner: Runner) {
  const deps = ctx.state.deps;
  const projects = await runnerProjects(deps, runner.id);
  const namespaces = await findNamespacesByIds(deps.db, [...new Set(projects.map((pr) => pr.namespace_id))]);
  const names = await namespaceFullNames(deps, namespaces);
  const links = await deps.db
    .selectFrom('ci_runner_namespaces')
    .select('namespace_id')
    .where('runner_id', '=', runner.id)
    .execute();
  const groups = await findNamespacesByIds(
    deps.db,
    links.map((l) => l.namespace_id),
  );
  return presentRunnerDetails(
    runner,
    deps.clock.now(),
    projects.map((project) => ({ project, namespaceFullName: names.get(project.namespace_id) ?? '' })),
    groups.map((g) => ({ id: g.id, name: g.name, web_url: `${deps.config.baseUrl}/groups/${g.full_path}` })),
  );
}

/** The runner `:id` or 404 `Runner Not Found`. */
async function loadRunner(ctx: AppContext, id: number): Promise<Runner> {
  const runner = await findRunner(ctx.state.deps, id);
  if (!runner) throw notFound('Runner');
  return runner;
}

/**
 * runners.rb's `before { authorize! :read_project_runners, user_project }` on its project routes
 * (Maintainers), ahead of the parameters: others get 403 (404 when they cannot see the project)
 * whatever they sent.
 */
async function beforeProject(ctx: AppContext, raw: Params): Promise<void> {
  const { policy } = await loadProject(ctx, String(raw.id));
  policy.authorize('admin_project');
}

/** Its `before { authorize! :read_group_runners, user_group }` on the group route (Maintainers). */
async function beforeGroup(ctx: AppContext, raw: Params): Promise<void> {
  const { policy } = await loadGroup(ctx, String(raw.id));
  policy.authorize('read_group_runners');
}

/** GitLab's authenticate_show_runner!: instance runners for every signed-in user, others for their owners. */
async function authorizeShow(ctx: AppContext, runner: Runner): Promise<void> {
  const user = currentUser(ctx);
  if (runner.runner_type === 'instance_type' || user.admin) return;
  if (!(await userOwnsRunner(ctx.state.deps, user, runner))) throw forbidden('No access granted');
}

/** GitLab's authenticate_update_runner!: administrators, or owners of a non-instance runner. */
async function authorizeUpdate(ctx: AppContext, runner: Runner): Promise<void> {
  const user = currentUser(ctx);
  if (user.admin) return;
  if (runner.runner_type === 'instance_type') throw forbidden('Runner is shared');
  if (!(await userOwnsRunner(ctx.state.deps, user, runner))) throw forbidden('No access granted');
}

export function registerRunnerRoutes(api: ApiRouter): void {
  // --- registration (runner-facing) ---
  api.post(
    '/runners',
    {
      summary: 'Register a runner with a registration token',
      tags: TAGS,
      credentials: false,
      params: z.object({
        token: p.string(),
        info: z
          .object({
            name: p.string().optional(),
            version: p.string().optional(),
            revision: p.string().optional(),
            platform: p.string().optional(),
            architecture: p.string().optional(),
          })
          .passthrough()
          .optional(),
        maintenance_note: p.string().optional(),
        ...runnerUpdateParams,
      }),
    },
    async (ctx, params) => {
      const result = await registerRunner(ctx.state.deps, params, ctx.ip);
      if (!result) throw forbidden();
      created(ctx, { id: result.runner.id, token: result.token, token_expires_at: null });
    },
  );

  api.delete(
    '/runners',
    {
      summary: 'Delete a runner by its authentication token',
      tags: TAGS,
      credentials: false,
      params: z.object({ token: p.string() }),
    },
    async (ctx, params) => {
      const runner = await findRunnerByToken(ctx.state.deps, params.token);
      if (!runner) throw forbidden();
      await deleteRunner(ctx.state.deps, runner.id);
      ctx.status = 204;
    },
  );

  api.post(
    '/runners/verify',
    {
      summary: "Verify a runner's authentication token",
      tags: TAGS,
      credentials: false,
      params: z.object({ token: p.string(), system_id: p.string().optional() }),
    },
    async (ctx, params) => {
      const runner = await findRunnerByToken(ctx.state.deps, params.token);
      if (!runner) throw forbidden();
      ctx.status = 200;
      ctx.body = { id: runner.id, token: params.token, token_expires_at: null };
    },
  );

  api.post(
    '/runners/reset_registration_token',
    { summary: "Reset the instance's runner registration token", tags: TAGS, auth: 'required', admin: true },
    async (ctx) => {
      const token = await resetRegistrationToken(ctx.state.deps, { scope: 'instance', scopeId: 0 });
      created(ctx, { token, token_expires_at: null });
    },
  );

  // --- lists ---
  api.get(
    '/runners',
    {
      summary: 'Runners the user owns',
      tags: TAGS,
      auth: 'required',
      params: z.object({ ...filterParams, scope: scopeParam(['active', 'paused', 'online', 'offline']) }),
    },
    async (ctx, params) => {
      const user = currentUser(ctx);
      await listPage(ctx, { kind: 'owned', userId: user.id }, params);
    },
  );

  api.get(
    '/runners/all',
    {
      summary: 'Every runner of the instance',
      tags: TAGS,
      auth: 'required',
      admin: true,
      params: z.object({
        ...filterParams,
        scope: scopeParam(['active', 'paused', 'online', 'offline', 'specific', 'shared']),
      }),
    },
    async (ctx, params) => {
      await listPage(ctx, { kind: 'all' }, params);
    },
  );

  // --- one runner ---
  api.get(
    '/runners/:id',
    { summary: "A runner's details", tags: TAGS, auth: 'required', params: z.object({ id: p.id() }) },
    async (ctx, params) => {
      const runner = await loadRunner(ctx, params.id);
      await authorizeShow(ctx, runner);
      ctx.body = await presentDetails(ctx, runner);
    },
  );

  api.put(
    '/runners/:id',
    {
      summary: "Update a runner's details",
      tags: TAGS,
      auth: 'required',
      params: z.object({ id: p.id(), ...runnerUpdateParams, maintenance_note: p.string().optional() }),
    },
    async (ctx, params) => {
      const runner = await loadRunner(ctx, params.id);
      await authorizeUpdate(ctx, runner);
      const updated = await updateRunner(ctx.state.deps, runner, params);
      ctx.body = await presentDetails(ctx, updated);
    },
  );

  api.delete(
    '/runners/:id',
    { summary: 'Delete a runner', tags: TAGS, auth: 'required', params: z.object({ id: p.id() }) },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const runner = await loadRunner(ctx, params.id);
      await authorizeUpdate(ctx, runner);
      if (!currentUser(ctx).admin && (await countRunnerProjects(deps, runner.id)) > 1) {
        throw forbidden('Runner associated with more than one project');
      }
      await deleteRunner(deps, runner.id);
      ctx.status = 204;
    },
  );

  api.get(
    '/runners/:id/jobs',
    {
      summary: 'Jobs a runner ran',
      tags: TAGS,
      auth: 'required',
      params: z.object({
        id: p.id(),
        status: p
          .enum(['created', 'pending', 'running', 'success', 'failed', 'canceled', 'skipped', 'manual'])
          .optional(),
        order_by: p.enum(['id']).optional(),
        sort: p.enum(['asc', 'desc']).default('desc'),
        ...pagination(),
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const runner = await loadRunner(ctx, params.id);
      const user = currentUser(ctx);
      if (!user.admin && !(await userOwnsRunner(deps, user, runner))) throw forbidden('No access granted');
      const builds = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => runnerBuilds(deps, runner.id, params.status, params.sort, w),
        (cap) => countRunnerBuilds(deps, runner.id, params.status, cap),
      );
      const views = await jobViews(deps, builds);
      const pc = { baseUrl: deps.config.baseUrl };
      const now = deps.clock.now();
      ctx.body = views.map((v) => presentRunnerJob(v, pc, now));
    },
  );

  // --- projects ---
  api.get(
    '/projects/:id/runners',
    {
      summary: "A project's runners",
      tags: TAGS,
      auth: 'required',
      before: beforeProject,
      params: z.object({
        id: p.string(),
        ...filterParams,
        scope: scopeParam(['active', 'paused', 'online', 'offline', 'specific', 'shared']),
      }),
    },
    async (ctx, params) => {
      const { project, namespace, policy } = await loadProject(ctx, params.id);
      policy.authorize('admin_project');
      await listPage(ctx, { kind: 'project', project, namespace }, params);
    },
  );

  api.post(
    '/projects/:id/runners',
    {
      summary: 'Enable a runner in a project',
      tags: TAGS,
      auth: 'required',
      before: beforeProject,
      params: z.object({ id: p.string(), runner_id: p.id() }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      policy.authorize('admin_project');
      const runner = await loadRunner(ctx, params.runner_id);
      const user = currentUser(ctx);
      if (runner.runner_type === 'group_type') throw forbidden('Runner is a group runner');
      if (runner.runner_type === 'instance_type') throw forbidden('Runner is a shared runner');
      if (!user.admin) {
        if (runner.locked) throw forbidden('Runner is locked');
        if (!(await userOwnsRunner(deps, user, runner))) throw forbidden('No access granted');
      }
      if (await isRunnerInProject(deps, runner.id, project.id)) {
        throw new ApiError(400, { message: { runner_projects: ['has already been taken'] } });
      }
      await enableRunnerInProject(deps, runner.id, project.id);
      created(ctx, presentRunner(runner, deps.clock.now()));
    },
  );

  api.delete(
    '/projects/:id/runners/:runner_id',
    {
      summary: 'Disable a runner in a project',
      tags: TAGS,
      auth: 'required',
      before: beforeProject,
      params: z.object({ id: p.string(), runner_id: p.id() }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      policy.authorize('admin_project');
      if (!(await isRunnerInProject(deps, params.runner_id, project.id))) throw notFound('Runner');
      if ((await countRunnerProjects(deps, params.runner_id)) === 1) {
        throw forbidden('Only one project associated with the runner. Please remove the runner instead');
      }
      await disableRunnerInProject(deps, params.runner_id, project.id);
      ctx.status = 204;
    },
  );

  api.post(
    '/projects/:id/runners/reset_registration_token',
    {
      summary: "Reset a project's runner registration token",
      tags: TAGS,
      auth: 'required',
      params: z.object({ id: p.string() }),
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      policy.authorize('admin_project');
      const token = await resetRegistrationToken(ctx.state.deps, { scope: 'project', scopeId: project.id });
      created(ctx, { token, token_expires_at: null });
    },
  );

  // --- groups ---
  api.get(
    '/groups/:id/runners',
    {
      summary: "A group's runners, with its ancestors' and the instance's",
      tags: TAGS,
      auth: 'required',
      before: beforeGroup,
      params: z.object({ id: p.string(), ...filterParams }),
    },
    async (ctx, params) => {
      const { group, policy } = await loadGroup(ctx, params.id);
      policy.authorize('read_group_runners');
      await listPage(ctx, { kind: 'group', group }, params);
    },
  );

  api.post(
    '/groups/:id/runners/reset_registration_token',
    {
      summary: "Reset a group's runner registration token",
      tags: TAGS,
      auth: 'required',
      params: z.object({ id: p.string() }),
    },
    async (ctx, params) => {
      const { group, policy } = await loadGroup(ctx, params.id);
      policy.authorize('admin_group');
      const token = await resetRegistrationToken(ctx.state.deps, { scope: 'group', scopeId: group.id });
      created(ctx, { token, token_expires_at: null });
    },
  );
}
