import { sql } from 'kysely';
import { z } from 'zod';
import { countUpTo } from '../db/queries/count.js';
import type { Build, Deployment, Environment, Project, User } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import {
  ApiError,
  badRequest,
  badRequestMessage,
  forbidden,
  paramError,
  recordNotFound,
  validationError,
} from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import type { ProjectPolicy } from '../policies/abilities.js';
import { type EnvironmentAbility, environmentAllows } from '../policies/environments.js';
import { presentJob } from '../presenters/ci.js';
import { presentDeployment, presentEnvironment, presentEnvironmentBasic } from '../presenters/environment.js';
import { presentBasicProject } from '../presenters/project.js';
import { archiveCutoff } from '../services/ci/builds.js';
import { jobViews } from '../services/ci/views.js';
import {
  createApiDeployment,
  createEnvironment,
  DEPLOYMENT_STATUSES,
  destroyDeployment,
  ENVIRONMENT_STATES,
  ENVIRONMENT_TIERS,
  findEnvironment,
  lastDeployments,
  REVIEW_APP_DEFAULT_AGE_MS,
  scheduleReviewAppsDeletion,
  stopEnvironment,
  stopStaleEnvironments,
  updateApiDeployment,
  updateEnvironment,
} from '../services/environments.js';
import { buildProjectViews } from '../services/project-views.js';
import { created, currentUser, loadProject, noContent } from './helpers.js';

/** Environments and deployments (GitLab's lib/api/environments.rb and lib/api/deployments.rb). */

const MIN_SEARCH_LENGTH = 3;
const HOUR_MS = 60 * 60 * 1000;
const SLUG_MESSAGE = 'slug is automatically generated and cannot be changed';

function authorize(policy: ProjectPolicy, ability: EnvironmentAbility, environment?: Environment): void {
  if (!environmentAllows(ability, policy, environment)) throw forbidden();
}

async function loadEnvironment(ctx: AppContext, project: Project, id: number): Promise<Environment> {
  const environment = await findEnvironment(ctx.state.deps.db, project.id, id);
  if (!environment) throw recordNotFound();
  return environment;
}

/** Deployments with their user, environment and job (the job as GitLab's Entities::Ci::Job). */
async function presentDeployments(ctx: AppContext, deployments: Deployment[], withEnvironment: boolean) {
  const deps = ctx.state.deps;
  const pc = { baseUrl: deps.config.baseUrl };
  const userIds = [...new Set(deployments.map((d) => d.user_id).filter((id): id is number => id !== null))];
  const users = new Map<number, User>(
    userIds.length > 0
      ? (await deps.db.selectFrom('users').selectAll().where('id', 'in', userIds).execute()).map((u) => [u.id, u])
      : [],
  );
  const buildIds = deployments.map((d) => d.deployable_id).filter((id): id is number => id !== null);
  const builds: Build[] =
    buildIds.length > 0 ? await deps.db.selectFrom('ci_builds').selectAll().where('id', 'in', buildIds).execute() : [];
  const now = deps.clock.now();
  const cutoff = await archiveCutoff(deps);
  const jobs = new Map(
    (await jobViews(deps, builds)).map((v) => [
      v.build.id,
      presentJob({ ...v, archived: cutoff !== null && v.build.created_at < cutoff }, pc, now),
    ]),
  );
  const envIds = [...new Set(deployments.map((d) => d.environment_id))];
  const environments = new Map<number, Environment>(
    withEnvironment && envIds.length > 0
      ? (await deps.db.selectFrom('environments').selectAll().where('id', 'in', envIds).execute()).map((e) => [e.id, e])
      : [],
  );
  return deployments.map((d) =>
    presentDeployment(
      d,
      {
        user: d.user_id ? (users.get(d.user_id) ?? null) : null,
        deployable: d.deployable_id ? (jobs.get(d.deployable_id) ?? null) : null,
        environment: withEnvironment ? environments.get(d.environment_id) : undefined,
      },
      pc,
    ),
  );
}

async function environmentDetail(ctx: AppContext, environment: Environment) {
  const last = (await lastDeployments(ctx.state.deps.db, [environment.id])).get(environment.id);
  const [deployment] = last ? await presentDeployments(ctx, [last], false) : [null];
  return presentEnvironment(environment, { lastDeployment: deployment ?? null });
}

/** The project as the environment entity shows it (BasicProjectDetails). */
async function projectEntity(ctx: AppContext, project: Project) {
  const deps = ctx.state.deps;
  const [view] = await buildProjectViews(deps, ctx.state.actor.user, [project]);
  return view ? presentBasicProject(view, { baseUrl: deps.config.baseUrl }) : undefined;
}

function rejectSlug(params: { slug?: string }): void {
  if (params.slug !== undefined) throw paramError([SLUG_MESSAGE]);
}

const environmentId = z.object({ id: p.string(), environment_id: p.id() });

export function registerEnvironmentRoutes(api: ApiRouter): void {
  const tags = ['environments'];

  api.get(
    '/projects/:id/environments',
    {
      summary: "A project's environments",
      tags,
      auth: 'required',
      params: z.object({
        id: p.string(),
        name: p.string().optional(),
        search: p.string().optional(),
        states: p.enum(ENVIRONMENT_STATES).optional(),
        ...pagination(),
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      if (params.name !== undefined && params.search !== undefined) {
        throw paramError(['name, search cannot be used together']);
      }
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_environment');
      if (params.search && params.search.length < MIN_SEARCH_LENGTH) {
        throw badRequest(`Search query is less than ${MIN_SEARCH_LENGTH} characters`);
      }
      const base = () => {
        let q = deps.db.selectFrom('environments').where('project_id', '=', project.id);
        if (params.name !== undefined) q = q.where('name', '=', params.name);
        if (params.search) {
          // GitLab's for_name_like and for_name_like_within_folder: the name, or the name inside
          // its folder (after the first `/`), starts with the query, case-insensitively.
          const prefix = `${params.search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
          q = q.where((eb) =>
            eb.or([
              eb(sql`lower(name)`, 'like', prefix),
              eb.and([
                eb('name', 'like', '%/%'),
                eb(sql`lower(substring(name from position('/' in name) + 1))`, 'like', prefix),
              ]),
            ]),
          );
        }
        if (params.states) q = q.where('state', '=', params.states);
        return q;
      };
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => base().selectAll().orderBy('id').limit(w.limit).offset(w.offset).execute(),
        (cap) => countUpTo(deps.db, base().select('id'), cap),
      );
      const projectBody = await projectEntity(ctx, project);
      ctx.body = rows.map((e) => presentEnvironment(e, { project: projectBody }));
    },
  );

  api.post(
    '/projects/:id/environments',
    {
      summary: 'Create an environment',
      tags,
      auth: 'required',
      params: z.object({
        id: p.string(),
        name: p.string(),
        external_url: p.string().optional(),
        slug: p.string().optional(),
        tier: p.enum(ENVIRONMENT_TIERS).optional(),
        description: p.string().optional(),
      }),
    },
    async (ctx, params) => {
      rejectSlug(params);
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'create_environment');
      const result = await createEnvironment(ctx.state.deps, project, params);
      if (!result.ok) throw validationError(result.errors);
      created(ctx, presentEnvironment(result.environment, { project: await projectEntity(ctx, project) }));
    },
  );

  // Before `/:environment_id`, which would take `review_apps` for an id.
  api.delete(
    '/projects/:id/environments/review_apps',
    {
      summary: 'Schedule stopped review apps for deletion',
      tags,
      auth: 'required',
      params: z.object({
        id: p.string(),
        before: p.datetime().optional(),
        limit: p.int().pipe(z.number().min(1).max(1000)).default(100),
        dry_run: p.bool().default(true),
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_environment');
      if (!environmentAllows('destroy_environment', policy)) {
        throw new ApiError(401, {
          scheduled_entries: [],
          unprocessable_entries: [],
          message: 'You do not have permission to destroy environments in this project',
        });
      }
      const before = params.before
        ? new Date(params.before)
        : new Date(deps.clock.now().getTime() - REVIEW_APP_DEFAULT_AGE_MS);
      const result = await scheduleReviewAppsDeletion(deps, project, {
        before,
        limit: params.limit,
        dryRun: params.dry_run,
      });
      const body = {
        scheduled_entries: result.scheduled.map(presentEnvironmentBasic),
        unprocessable_entries: result.unprocessable.map(presentEnvironmentBasic),
      };
      if (result.status !== 200) throw new ApiError(result.status, { ...body, message: result.message });
      ctx.body = body;
    },
  );

  api.post(
    '/projects/:id/environments/stop_stale',
    {
      summary: 'Stop environments not deployed to or updated since a date',
      tags,
      auth: 'required',
      params: z.object({ id: p.string(), before: p.datetime() }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'stop_stale_environments');
      const before = new Date(params.before);
      const now = deps.clock.now().getTime();
      if (before.getTime() < now - 10 * 365.25 * 24 * HOUR_MS || before.getTime() > now - 7 * 24 * HOUR_MS) {
        throw badRequest('Invalid Date');
      }
      await stopStaleEnvironments(deps, project, currentUser(ctx), before);
      ctx.status = 200;
      ctx.body = { message: 'Successfully requested stop for all stale environments' };
    },
  );

  api.get(
    '/projects/:id/environments/:environment_id',
    { summary: 'An environment with its last deployment', tags, auth: 'required', params: environmentId },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_environment');
      const environment = await loadEnvironment(ctx, project, params.environment_id);
      ctx.body = await environmentDetail(ctx, environment);
    },
  );

  api.put(
    '/projects/:id/environments/:environment_id',
    {
      summary: 'Update an environment',
      tags,
      auth: 'required',
      params: environmentId.extend({
        name: p.string().optional(),
        external_url: p.string().optional(),
        slug: p.string().optional(),
        tier: p.enum(ENVIRONMENT_TIERS).optional(),
        description: p.string().optional(),
      }),
    },
    async (ctx, params) => {
      rejectSlug(params);
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'update_environment');
      const environment = await loadEnvironment(ctx, project, params.environment_id);
      const result = await updateEnvironment(ctx.state.deps, environment, params);
      if (!result.ok) throw validationError(result.errors);
      ctx.body = presentEnvironment(result.environment, { project: await projectEntity(ctx, project) });
    },
  );

  api.delete(
    '/projects/:id/environments/:environment_id',
    { summary: 'Delete a stopped environment', tags, auth: 'required', params: environmentId },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_environment');
      const environment = await loadEnvironment(ctx, project, params.environment_id);
      authorize(policy, 'destroy_environment', environment);
      await ctx.state.deps.db.deleteFrom('environments').where('id', '=', environment.id).execute();
      noContent(ctx);
    },
  );

  api.post(
    '/projects/:id/environments/:environment_id/stop',
    {
      summary: 'Stop an environment (runs its on_stop job)',
      tags,
      auth: 'required',
      params: environmentId.extend({ force: p.bool().default(false) }),
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_environment');
      const environment = await loadEnvironment(ctx, project, params.environment_id);
      authorize(policy, 'stop_environment', environment);
      const stopped = await stopEnvironment(ctx.state.deps, environment, currentUser(ctx), { force: params.force });
      ctx.status = 200;
      ctx.body = presentEnvironment(stopped, { project: await projectEntity(ctx, project) });
    },
  );

  // ---- deployments ----

  const dtags = ['deployments'];

  api.get(
    '/projects/:id/deployments',
    {
      summary: "A project's deployments",
      tags: dtags,
      auth: 'required',
      params: z.object({
        id: p.string(),
        order_by: p.enum(['id', 'iid', 'created_at', 'updated_at', 'finished_at', 'ref']).default('id'),
        sort: p.enum(['asc', 'desc']).default('asc'),
        updated_after: p.datetime().optional(),
        updated_before: p.datetime().optional(),
        environment: p.string().optional(),
        status: p.enum(DEPLOYMENT_STATUSES).optional(),
        ...pagination(),
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_deployment');
      const base = () => {
        let q = deps.db.selectFrom('deployments').where('deployments.project_id', '=', project.id);
        if (params.status) q = q.where('status', '=', params.status);
        if (params.updated_after) q = q.where('updated_at', '>', new Date(params.updated_after));
        if (params.updated_before) q = q.where('updated_at', '<', new Date(params.updated_before));
        if (params.environment !== undefined) {
          const name = params.environment;
          q = q.where('environment_id', 'in', (eb) =>
            eb.selectFrom('environments').select('id').where('project_id', '=', project.id).where('name', '=', name),
          );
        }
        return q;
      };
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) =>
          base()
            .selectAll()
            .orderBy(params.order_by, params.sort)
            .orderBy('id', params.sort)
            .limit(w.limit)
            .offset(w.offset)
            .execute(),
        (cap) => countUpTo(deps.db, base().select('id'), cap),
      );
      ctx.body = await presentDeployments(ctx, rows, true);
    },
  );

  const deploymentId = z.object({ id: p.string(), deployment_id: p.id() });

  async function loadDeployment(ctx: AppContext, project: Project, id: number): Promise<Deployment> {
    const deployment = await ctx.state.deps.db
      .selectFrom('deployments')
      .selectAll()
      .where('project_id', '=', project.id)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!deployment) throw recordNotFound();
    return deployment;
  }

  api.get(
    '/projects/:id/deployments/:deployment_id',
    { summary: 'A deployment', tags: dtags, auth: 'required', params: deploymentId },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_deployment');
      const deployment = await loadDeployment(ctx, project, params.deployment_id);
      ctx.body = (await presentDeployments(ctx, [deployment], true))[0];
    },
  );

  const API_STATUSES = ['running', 'success', 'failed', 'canceled'] as const;

  api.post(
    '/projects/:id/deployments',
    {
      summary: 'Record a deployment made outside CI',
      tags: dtags,
      auth: 'required',
      params: z.object({
        id: p.string(),
        environment: p.string(),
        sha: p.string(),
        ref: p.string(),
        tag: p.bool(),
        status: p.enum(API_STATUSES),
      }),
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'create_deployment');
      authorize(policy, 'create_environment');
      const result = await createApiDeployment(ctx.state.deps, project, currentUser(ctx), params);
      if (!result.ok) throw validationError(result.errors);
      created(ctx, (await presentDeployments(ctx, [result.deployment], true))[0]);
    },
  );

  api.put(
    '/projects/:id/deployments/:deployment_id',
    {
      summary: 'Update the status of a deployment made outside CI',
      tags: dtags,
      auth: 'required',
      params: deploymentId.extend({ status: p.enum(API_STATUSES) }),
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_deployment');
      const deployment = await loadDeployment(ctx, project, params.deployment_id);
      authorize(policy, 'update_deployment');
      if (deployment.deployable_id !== null) {
        throw forbidden('Deployments created using GitLab CI can not be updated using the API');
      }
      const updated = await updateApiDeployment(ctx.state.deps, deployment, params.status);
      ctx.body = (await presentDeployments(ctx, [updated], true))[0];
    },
  );

  api.delete(
    '/projects/:id/deployments/:deployment_id',
    {
      summary: 'Delete a deployment that is neither running nor the last one',
      tags: dtags,
      auth: 'required',
      params: deploymentId,
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      const deployment = await loadDeployment(ctx, project, params.deployment_id);
      authorize(policy, 'destroy_deployment');
      const result = await destroyDeployment(ctx.state.deps, deployment);
      if (!result.ok) throw badRequestMessage(result.message);
      noContent(ctx);
    },
  );
}
