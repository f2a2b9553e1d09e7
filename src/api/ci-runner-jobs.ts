import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import { z } from 'zod';
import type { Build } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, forbidden, notFound, payloadTooLarge } from '../http/errors.js';
import { p } from '../http/params.js';
import type { ApiRouter, UploadedFile } from '../http/route.js';
import { readLimited } from '../lib/streams.js';
import {
  appendTrace,
  artifactsPath,
  claimBuild,
  findBuildByToken,
  jobPayload,
  MAX_TRACE_BYTES,
  saveArtifacts,
  TRACE_UPDATE_INTERVAL_SECONDS,
  updateBuildState,
} from '../services/ci/builds.js';
import { findRunnerByToken, touchRunner } from '../services/ci/runners.js';
import { created } from './helpers.js';

/** Report artifacts Depot keeps and reads: CycloneDX SBOMs (the dependency list). */
const KEPT_REPORTS = new Set(['cyclonedx']);
/** The largest report kept (an SBOM of a large monorepo stays well below). */
const MAX_REPORT_BYTES = 32 * 1024 * 1024;

/**
 * The runner protocol (GitLab's lib/api/ci/runner.rb, as the GitLab runner's network/gitlab.go
 * calls it): ask for a job, report its state, send its log, upload and fetch artifacts.
 */

const TAGS = ['runner protocol'];

const infoSchema = z
  .object({
    name: p.string().optional(),
    version: p.string().optional(),
    revision: p.string().optional(),
    platform: p.string().optional(),
    architecture: p.string().optional(),
  })
  .passthrough()
  .optional();

/** The job a job token (param `token` or header `JOB-TOKEN`) authenticates, for job `:id`. */
async function authenticateJob(ctx: AppContext, id: number, token: string | undefined): Promise<Build> {
  const given = token ?? ctx.get('JOB-TOKEN');
  const build = given ? await findBuildByToken(ctx.state.deps, given) : undefined;
  // GitLab's authenticate_job! answers 403 to an unknown job as to a wrong token, never 404: a
  // 404 can come from anywhere on the way, a 403 tells the runner to stop the job.
  if (!build || build.id !== id) throw forbidden();
  return build;
}

/** GitLab's job_forbidden!: a job that is no longer running tells the runner its state. */
function requireRunning(ctx: AppContext, build: Build): void {
  if (build.status !== 'running') {
    ctx.set('Job-Status', build.status);
    throw new ApiError(403, { message: '403 Forbidden  - Job is not running' }, { 'Job-Status': build.status });
  }
}

const readRaw = (ctx: AppContext, limit: number): Promise<Buffer> => readLimited(ctx.req, limit, payloadTooLarge);

export function registerRunnerJobRoutes(api: ApiRouter): void {
  api.post(
    '/jobs/request',
    {
      summary: 'A runner asks for a job',
      tags: TAGS,
      credentials: false,
      params: z.object({
        token: p.string(),
        system_id: p.string().optional(),
        last_update: p.string().optional(),
        info: infoSchema,
        session: z.unknown().optional(),
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const runner = await findRunnerByToken(deps, params.token);
      if (!runner) throw forbidden();
      await touchRunner(deps, runner, ctx.ip, params.info ?? {});
      const claimed = await claimBuild(deps, runner);
      ctx.set('X-GitLab-Last-Update', String(deps.clock.now().getTime().toString(16)));
      if (!claimed) {
        ctx.status = 204;
        return;
      }
      created(ctx, await jobPayload(deps, claimed.build, claimed.token, runner));
    },
  );

  api.put(
    '/jobs/:id',
    {
      summary: "A runner updates a job's state",
      tags: TAGS,
      credentials: false,
      params: z.object({
        id: p.id(),
        // runner.rb `requires :token` here (the other job routes also take the JOB-TOKEN header).
        token: p.string(),
        state: p.enum(['pending', 'running', 'success', 'failed']).optional(),
        exit_code: p.int().optional(),
        failure_reason: p.string().optional(),
        checksum: p.string().optional(),
        output: z.unknown().optional(),
        info: infoSchema,
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const build = await authenticateJob(ctx, params.id, params.token);
      requireRunning(ctx, build);
      const state = params.state === 'success' || params.state === 'failed' ? params.state : 'running';
      const updated = await updateBuildState(deps, build, state, params.exit_code, params.failure_reason);
      ctx.set('Job-Status', updated.status);
      ctx.set('X-GitLab-Trace-Update-Interval', String(TRACE_UPDATE_INTERVAL_SECONDS));
      // GitLab answers with the status as its body (`body result.status.to_s`).
      ctx.status = 200;
      ctx.type = 'application/json';
      ctx.body = '200';
    },
  );

  api.patch(
    '/jobs/:id/trace',
    {
      summary: "A runner appends to a job's log",
      tags: TAGS,
      credentials: false,
      rawBody: true,
      params: z.object({ id: p.id(), token: p.string().optional() }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const build = await authenticateJob(ctx, params.id, params.token);
      requireRunning(ctx, build);
      const range = /^(\d+)-(\d+)$/.exec(ctx.get('Content-Range').trim());
      if (!range) throw new ApiError(400, { message: '400 Bad request - Missing header Content-Range' });
      const data = await readRaw(ctx, MAX_TRACE_BYTES);
      const start = Number(range[1]);
      const result = await appendTrace(deps, build, start, data);
      ctx.set('Job-Status', build.status);
      ctx.set('Range', `0-${result.size}`);
      ctx.set('X-GitLab-Trace-Update-Interval', String(TRACE_UPDATE_INTERVAL_SECONDS));
      if (!result.ok) {
        ctx.status = 416;
        ctx.body = { message: '416 Range Not Satisfiable' };
        return;
      }
      ctx.status = 202;
      ctx.body = '';
    },
  );

  api.post(
    '/jobs/:id/artifacts',
    {
      summary: "A runner uploads a job's artifacts",
      tags: TAGS,
      credentials: false,
      params: z.object({
        id: p.id(),
        token: p.string().optional(),
        file: z.custom<UploadedFile>((v) => typeof v === 'object' && v !== null && 'path' in v),
        artifact_type: p.string().optional(),
        artifact_format: p.string().optional(),
        expire_in: p.string().optional(),
      }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const build = await authenticateJob(ctx, params.id, params.token);
      requireRunning(ctx, build);
      const type = params.artifact_type ?? 'archive';
      // Reports Depot reads (the dependency list's SBOMs) are kept; other reports are accepted.
      if (KEPT_REPORTS.has(type)) {
        if (params.file.size > MAX_REPORT_BYTES) throw payloadTooLarge();
        let content = await fs.readFile(params.file.path);
        if (params.artifact_format === 'gzip') {
          try {
            content = gunzipSync(content);
          } catch {
            throw new ApiError(400, { message: '400 Bad request - artifact is not gzip' });
          }
        }
        await deps.db
          .insertInto('ci_build_reports')
          .values({ build_id: build.id, file_type: type, filename: params.file.filename ?? type, content })
          .execute();
      }
      if (type === 'archive') {
        const options = build.options as { artifacts?: { expire_in?: string } | null };
        await saveArtifacts(
          deps,
          build,
          params.file.path,
          params.file.size,
          params.expire_in ?? options.artifacts?.expire_in,
        );
      }
      created(ctx, {});
    },
  );

  api.get(
    '/jobs/:id/artifacts',
    {
      summary: "A runner downloads a job's artifacts (dependencies)",
      tags: TAGS,
      credentials: false,
      params: z.object({ id: p.id(), token: p.string().optional(), direct_download: p.bool().optional() }),
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const given = params.token ?? ctx.get('JOB-TOKEN');
      const caller = given ? await findBuildByToken(deps, given) : undefined;
      if (caller?.status !== 'running') throw forbidden();
      const build = await deps.db.selectFrom('ci_builds').selectAll().where('id', '=', params.id).executeTakeFirst();
      if (!build || build.pipeline_id !== caller.pipeline_id || !build.artifacts_file) throw notFound();
      await sendArtifacts(ctx, artifactsPath(deps, build));
    },
  );
}

/** Streams an artifact archive as GitLab does (application/zip, attachment). */
export async function sendArtifacts(ctx: AppContext, file: string): Promise<void> {
  const stat = await fs.stat(file).catch(() => null);
  if (!stat) throw notFound();
  ctx.status = 200;
  ctx.type = 'application/zip';
  ctx.set('Content-Disposition', 'attachment; filename="artifacts.zip"');
  ctx.length = stat.size;
  ctx.body = createReadStream(file);
}
