import { z } from 'zod';
import { countUpTo } from '../db/queries/count.js';
import type { Build, Pipeline, Project } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, forbidden, notFound, recordNotFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import type { ProjectPolicy } from '../policies/abilities.js';
import { type CiAbility, ciAllows } from '../policies/ci.js';
import { presentJob, presentPipeline, presentPipelineBasic } from '../presenters/ci.js';
import { archiveCutoff, artifactsPath, readTrace } from '../services/ci/builds.js';
import {
  cancelBuild,
  cancelPipeline,
  cloneForRetry,
  createRefPipeline,
  playBuild,
  retryPipeline,
} from '../services/ci/pipelines.js';
import { jobViews } from '../services/ci/views.js';
import type { Deps } from '../services/deps.js';
import { canMerge, canPushToBranch } from '../services/protected-branches.js';
import { sendArtifacts } from './ci-runner-jobs.js';
import { created, currentUser, loadProject } from './helpers.js';

/** Pipelines and jobs for users (GitLab's lib/api/ci/pipelines.rb and lib/api/ci/jobs.rb). */

const TAGS = ['pipelines', 'jobs'];
const PIPELINE_STATUSES = [
  'created',
  'waiting_for_resource',
  'preparing',
  'pending',
  'running',
  'success',
  'failed',
  'canceled',
  'skipped',
  'manual',
  'scheduled',
] as const;
const JOB_SCOPES = [
  'created',
  'pending',
  'running',
  'failed',
  'success',
  'canceled',
  'skipped',
  'waiting_for_resource',
  'manual',
] as const;

function authorize(policy: ProjectPolicy, ability: CiAbility): void {
  if (!ciAllows(ability, policy)) throw forbidden();
}

async function loadPipeline(ctx: AppContext, project: Project, id: number): Promise<Pipeline> {
  const pipeline = await ctx.state.deps.db
    .selectFrom('ci_pipelines')
    .selectAll()
    .where('project_id', '=', project.id)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!pipeline) throw recordNotFound();
  return pipeline;
}

async function loadBuild(ctx: AppContext, project: Project, id: number): Promise<Build> {
  const build = await ctx.state.deps.db
    .selectFrom('ci_builds')
    .selectAll()
    .where('project_id', '=', project.id)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!build) throw recordNotFound();
  return build;
}

async function pipelineDetail(ctx: AppContext, pipeline: Pipeline, project: Project) {
  const deps = ctx.state.deps;
  const user = pipeline.user_id
    ? ((await deps.db.selectFrom('users').selectAll().where('id', '=', pipeline.user_id).executeTakeFirst()) ?? null)
    : null;
  return presentPipeline(pipeline, project, user, { baseUrl: deps.config.baseUrl });
}

async function presentJobs(ctx: AppContext, builds: Build[]) {
  const deps = ctx.state.deps;
  const views = await jobViews(deps, builds);
  const now = deps.clock.now();
  const cutoff = await archiveCutoff(deps);
  return views.map((v) =>
    presentJob(
      { ...v, archived: cutoff !== null && v.build.created_at < cutoff },
      { baseUrl: deps.config.baseUrl },
      now,
    ),
  );
}

const scopeList = p.array(p.enum(JOB_SCOPES)).optional();

/**
 * Jobs may be acted on by developers; jobs of protected branches only by those who may push or
 * merge there (GitLab's protected ref check, user_access.can_update_branch?).
 */
async function authorizeJobAction(deps: Deps, policy: ProjectPolicy, build: Build): Promise<void> {
  authorize(policy, 'update_build');
  if (!build.protected || build.tag) return;
  if (await canPushToBranch(deps, policy.project, policy, build.ref)) return;
  if (await canMerge(deps, policy.project, policy.user, build.ref, policy)) return;
  throw forbidden();
}

export function registerPipelineRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/pipelines',
    {
      summary: "A project's pipelines",
      tags: TAGS,
      params: z.object({
        id: p.string(),
        scope: p.enum(['running', 'pending', 'finished', 'branches', 'tags']).optional(),
        status: p.enum(PIPELINE_STATUSES).optional(),
        ref: p.string().optional(),
        sha: p.string().optional(),
        source: p.string().optional(),
        yaml_errors: p.bool().optional(),
        username: p.string().optional(),
        order_by: p.enum(['id', 'status', 'ref', 'updated_at', 'user_id']).default('id'),
        sort: p.enum(['asc', 'desc']).default('desc'),
        ...pagination(),
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_pipeline');
      const base = () => {
        let q = deps.db.selectFrom('ci_pipelines').where('ci_pipelines.project_id', '=', project.id);
        if (params.status) q = q.where('status', '=', params.status);
        if (params.ref) q = q.where('ref', '=', params.ref);
        if (params.sha) q = q.where('sha', '=', params.sha);
        if (params.source) q = q.where('source', '=', params.source);
        if (params.yaml_errors !== undefined) q = q.where('yaml_errors', params.yaml_errors ? 'is not' : 'is', null);
        if (params.scope === 'running') q = q.where('status', '=', 'running');
        if (params.scope === 'pending') q = q.where('status', '=', 'pending');
        if (params.scope === 'finished') q = q.where('status', 'in', ['success', 'failed', 'canceled', 'skipped']);
        if (params.scope === 'branches') q = q.where('tag', '=', false);
        if (params.scope === 'tags') q = q.where('tag', '=', true);
        if (params.username) {
          q = q.where('user_id', 'in', (eb) =>
            eb
              .selectFrom('users')
              .select('id')
              .where('username', '=', params.username as string),
          );
        }
        return q;
      };
      const pipelines = await paginateQuery(
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
      const pc = { baseUrl: deps.config.baseUrl };
      ctx.body = pipelines.map((pl) => presentPipelineBasic(pl, project, pc));
    },
  );

  api.get(
    '/projects/:id/pipelines/:pipeline_id',
    { summary: 'A pipeline', tags: TAGS, params: z.object({ id: p.string(), pipeline_id: p.id() }) },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_pipeline');
      const pipeline = await loadPipeline(ctx, project, params.pipeline_id);
      ctx.body = await pipelineDetail(ctx, pipeline, project);
    },
  );

  api.post(
    '/projects/:id/pipeline',
    {
      summary: 'Run a pipeline for a ref',
      tags: TAGS,
      auth: 'required',
      params: z.object({
        id: p.string(),
        ref: p.string(),
        variables: z
          .array(z.object({ key: p.string(), value: p.string(), variable_type: p.string().optional() }))
          .optional(),
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'create_pipeline');
      const user = currentUser(ctx);
      const result = await createRefPipeline(
        deps,
        project,
        user,
        params.ref,
        (params.variables ?? []).map((v) => ({ key: v.key, value: v.value })),
      );
      if (!result.created) {
        const message = {
          missing_ref: 'Reference not found',
          no_config: 'Missing CI config file',
          filtered:
            'Pipeline will not run for the selected trigger. The rules configuration prevented any jobs from being added to the pipeline.',
          no_jobs:
            'Pipeline will not run for the selected trigger. The rules configuration prevented any jobs from being added to the pipeline.',
        }[result.reason];
        throw new ApiError(400, { message: { base: [message] } });
      }
      if (result.pipeline.yaml_errors) throw new ApiError(400, { message: { base: [result.pipeline.yaml_errors] } });
      created(ctx, await pipelineDetail(ctx, result.pipeline, project));
    },
  );

  api.get(
    '/projects/:id/pipelines/:pipeline_id/jobs',
    {
      summary: "A pipeline's jobs",
      tags: TAGS,
      params: z.object({
        id: p.string(),
        pipeline_id: p.id(),
        scope: scopeList,
        include_retried: p.bool().default(false),
        ...pagination(),
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_build');
      const pipeline = await loadPipeline(ctx, project, params.pipeline_id);
      const base = () => {
        let q = deps.db.selectFrom('ci_builds').where('pipeline_id', '=', pipeline.id);
        if (!params.include_retried) q = q.where('retried', '=', false);
        if (params.scope && params.scope.length > 0) q = q.where('status', 'in', params.scope);
        return q;
      };
      const builds = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => base().selectAll().orderBy('id', 'asc').limit(w.limit).offset(w.offset).execute(),
        (cap) => countUpTo(deps.db, base().select('id'), cap),
      );
      ctx.body = await presentJobs(ctx, builds);
    },
  );

  for (const action of ['cancel', 'retry'] as const) {
    api.post(
      `/projects/:id/pipelines/:pipeline_id/${action}`,
      {
        summary: `${action === 'cancel' ? 'Cancel' : 'Retry'} a pipeline`,
        tags: TAGS,
        auth: 'required',
        params: z.object({ id: p.string(), pipeline_id: p.id() }),
      },
      async (ctx, params) => {
        const deps = ctx.state.deps;
        const { project, policy } = await loadProject(ctx, params.id);
        authorize(policy, 'read_pipeline');
        authorize(policy, 'update_pipeline');
        const pipeline = await loadPipeline(ctx, project, params.pipeline_id);
        const user = currentUser(ctx);
        const updated =
          action === 'cancel' ? await cancelPipeline(deps, pipeline) : await retryPipeline(deps, pipeline, user);
        created(ctx, await pipelineDetail(ctx, updated ?? pipeline, project));
      },
    );
  }

  api.get(
    '/projects/:id/jobs',
    {
      summary: "A project's jobs",
      tags: TAGS,
      // jobs.rb: `before { authenticate! }` for every project job route, public projects too.
      auth: 'required',
      params: z.object({ id: p.string(), scope: scopeList, ...pagination() }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_build');
      const base = () => {
        let q = deps.db.selectFrom('ci_builds').where('project_id', '=', project.id).where('retried', '=', false);
        if (params.scope && params.scope.length > 0) q = q.where('status', 'in', params.scope);
        return q;
      };
      const builds = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => base().selectAll().orderBy('id', 'desc').limit(w.limit).offset(w.offset).execute(),
        (cap) => countUpTo(deps.db, base().select('id'), cap),
      );
      ctx.body = await presentJobs(ctx, builds);
    },
  );

  api.get(
    '/projects/:id/jobs/:job_id',
    { summary: 'A job', tags: TAGS, auth: 'required', params: z.object({ id: p.string(), job_id: p.id() }) },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_build');
      const build = await loadBuild(ctx, project, params.job_id);
      ctx.body = (await presentJobs(ctx, [build]))[0];
    },
  );

  api.get(
    '/projects/:id/jobs/:job_id/trace',
    { summary: "A job's log", tags: TAGS, auth: 'required', params: z.object({ id: p.string(), job_id: p.id() }) },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_build');
      const build = await loadBuild(ctx, project, params.job_id);
      ctx.status = 200;
      ctx.type = 'text/plain';
      ctx.body = await readTrace(ctx.state.deps, build.id);
    },
  );

  api.get(
    '/projects/:id/jobs/:job_id/artifacts',
    { summary: "A job's artifact archive", tags: TAGS, params: z.object({ id: p.string(), job_id: p.id() }) },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      authorize(policy, 'read_build');
      const build = await loadBuild(ctx, project, params.job_id);
      if (!build.artifacts_file) throw notFound();
      await sendArtifacts(ctx, artifactsPath(ctx.state.deps, build));
    },
  );

  for (const action of ['cancel', 'retry', 'play'] as const) {
    api.post(
      `/projects/:id/jobs/:job_id/${action}`,
      {
        summary: `${action[0]?.toUpperCase()}${action.slice(1)} a job`,
        tags: TAGS,
        auth: 'required',
        params: z.object({ id: p.string(), job_id: p.id() }),
      },
      async (ctx, params) => {
        const deps = ctx.state.deps;
        const { project, policy } = await loadProject(ctx, params.id);
        authorize(policy, 'read_build');
        const build = await loadBuild(ctx, project, params.job_id);
        await authorizeJobAction(ctx.state.deps, policy, build);
        const user = currentUser(ctx);
        const cutoff = await archiveCutoff(deps);
        const archived = cutoff !== null && build.created_at < cutoff;
        let result: Build;
        if (action === 'cancel') result = await cancelBuild(deps, build);
        else if (action === 'retry') {
          if (!['success', 'failed', 'canceled'].includes(build.status) || build.retried)
            throw forbidden('Job is not retryable');
          result = await cloneForRetry(deps, build, user);
        } else {
          if (archived || build.status !== 'manual') throw new ApiError(400, { message: 'Unplayable Job' });
          result = await playBuild(deps, build, user);
        }
        const body = (await presentJobs(ctx, [result]))[0];
        // jobs.rb answers a played job `status 200`; cancel and retry are POST's 201.
        if (action === 'play') {
          ctx.status = 200;
          ctx.body = body;
        } else created(ctx, body);
      },
    );
  }
}
