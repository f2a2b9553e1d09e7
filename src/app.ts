import fs from 'node:fs/promises';
import Koa, { type Middleware } from 'koa';
import { sql } from 'kysely';
import { registerAccessRequestRoutes } from './api/access-requests.js';
import { registerApplicationSettingsRoutes } from './api/application-settings.js';
import { registerApplicationRoutes } from './api/applications.js';
import { registerApprovalRoutes } from './api/approvals.js';
import { registerArchiveRoutes } from './api/archive.js';
import { registerAuditEventRoutes } from './api/audit-events.js';
import { registerBranchWriteRoutes } from './api/branch-writes.js';
import { registerBranchRoutes } from './api/branches.js';
import { registerChangelogRoutes } from './api/changelog.js';
import { registerRunnerJobRoutes } from './api/ci-runner-jobs.js';
import { registerCommitRoutes } from './api/commits.js';
import { registerCompareRoutes } from './api/compare.js';
import { registerDependencyRoutes } from './api/dependencies.js';
import { registerEnvironmentRoutes } from './api/environments.js';
import { registerErrorTrackingRoutes } from './api/error-tracking.js';
import { registerEventRoutes } from './api/events.js';
import { registerFileRoutes } from './api/files.js';
import { registerGroupRoutes } from './api/groups.js';
import { registerIntegrationRoutes } from './api/integrations.js';
import { registerMemberRoutes } from './api/members.js';
import { registerMergeRequestRoutes } from './api/merge-requests.js';
import { registerNamespaceRoutes } from './api/namespaces.js';
import { oauthRoutes } from './api/oauth.js';
import { registerPagesDomainRoutes } from './api/pages-domains.js';
import { registerPipelineRoutes } from './api/pipelines.js';
import { registerPlanLimitRoutes } from './api/plan-limits.js';
import { registerProjectHookRoutes } from './api/project-hooks.js';
import { registerProjectRoutes } from './api/projects.js';
import { registerProtectedBranchRoutes } from './api/protected-branches.js';
import { registerRepositoryRoutes } from './api/repository.js';
import { registerRepositoryOperationRoutes } from './api/repository-operations.js';
import { registerRepositoryWriteRoutes } from './api/repository-writes.js';
import { registerRunnerRoutes } from './api/runners.js';
import { registerSharingRoutes } from './api/sharing.js';
import { registerStorageMoveRoutes } from './api/storage-moves.js';
import { registerTagWriteRoutes } from './api/tag-writes.js';
import { registerTagRoutes } from './api/tags.js';
import { registerTokenRoutes } from './api/tokens.js';
import { registerUserLifecycleRoutes } from './api/user-lifecycle.js';
import { registerUserRoutes } from './api/users.js';
import { registerVersionRoutes } from './api/version.js';
import { probeStorageWrites } from './git/errors.js';
import type { AppState } from './http/context.js';
import { Metrics } from './http/metrics.js';
import { errorHandler, exactJsonType, requestContext } from './http/middleware.js';
import { buildOpenApi } from './http/openapi.js';
import { ApiRouter } from './http/route.js';
import { registerJobMetrics } from './jobs/metrics.js';
import type { Deps } from './services/deps.js';
import { archiveCache, registerArchiveCacheMetrics } from './storage/archive-cache.js';
import { DEPOT_VERSION } from './version.js';
import { errorTrackingPage } from './web/error-tracking.js';
import { gitHttp } from './web/git-http.js';
import { gitLfs } from './web/git-lfs.js';
import { webPages } from './web/pages.js';
import { rawFiles } from './web/raw.js';

export const API_PREFIX = '/api/v4';

const isApiPath = (path: string) => path === API_PREFIX || path.startsWith(`${API_PREFIX}/`);
/** GitLab's Grape API (every version, v3's refusal included); OAuth, Git and the pages are Rails'. */
const isGrapePath = (path: string) => path === '/api' || path.startsWith('/api/');

/** Every API module, in one list: each registers its routes on the shared router. */
export const API_MODULES: ((api: ApiRouter) => void)[] = [
  registerVersionRoutes,
  registerUserRoutes,
  registerUserLifecycleRoutes,
  registerTokenRoutes,
  registerNamespaceRoutes,
  registerGroupRoutes,
  registerProjectRoutes,
  registerSharingRoutes,
  registerRepositoryRoutes,
  registerArchiveRoutes,
  registerCompareRoutes,
  registerCommitRoutes,
  registerFileRoutes,
  registerBranchRoutes,
  registerTagRoutes,
  registerRepositoryWriteRoutes,
  registerRepositoryOperationRoutes,
  registerBranchWriteRoutes,
  registerTagWriteRoutes,
  registerProtectedBranchRoutes,
  registerChangelogRoutes,
  registerMergeRequestRoutes,
  registerApprovalRoutes,
  registerApplicationSettingsRoutes,
  registerPagesDomainRoutes,
  registerErrorTrackingRoutes,
  registerDependencyRoutes,
  registerPlanLimitRoutes,
  registerAuditEventRoutes,
  registerStorageMoveRoutes,
  registerMemberRoutes,
  registerAccessRequestRoutes,
  registerApplicationRoutes,
  registerEventRoutes,
  registerRunnerRoutes,
  registerRunnerJobRoutes,
  registerPipelineRoutes,
  registerProjectHookRoutes,
  registerIntegrationRoutes,
  registerEnvironmentRoutes,
];

export interface CreateAppOptions {
  metrics?: Metrics;
}

/** The Koa application without a listening socket (main.ts listens; tests drive it in-process). */
export function createApp(deps: Deps, options: CreateAppOptions = {}): Koa<AppState> {
  const app = new Koa<AppState>();
  app.proxy = false;
  // What reaches Koa's own error event happened after the answer began, mostly clients that went
  // away mid-body (ECONNRESET, EPIPE, a closed stream): logged, not printed to stderr.
  app.on('error', (error: NodeJS.ErrnoException, ctx?: Koa.Context) => {
    const gone = ['ECONNRESET', 'EPIPE', 'ERR_STREAM_PREMATURE_CLOSE'].includes(error.code ?? '');
    const log = (ctx?.state as AppState | undefined)?.log ?? deps.logger;
    if (gone) log.debug({ err: error }, 'client went away');
    else log.error({ err: error }, 'response failed');
  });
  const metrics = options.metrics ?? new Metrics();
  if (!metrics.gauges.has('depot_jobs')) registerJobMetrics(metrics, deps);
  if (!metrics.gauges.has('depot_archive_cache_bytes')) registerArchiveCacheMetrics(metrics, archiveCache(deps.config));
  const api = new ApiRouter(API_PREFIX);
  for (const register of API_MODULES) register(api);
  const openApi = buildOpenApi(api.operations, { version: DEPOT_VERSION, baseUrl: deps.config.baseUrl });

  app.use(async (ctx, next) => {
    ctx.state.deps = deps;
    await next();
  });
  app.use(requestContext(deps.logger, metrics));
  app.use(exactJsonType(isGrapePath));
  app.use(errorHandler());

  // Operational endpoints.
  app.use(async (ctx, next) => {
    switch (ctx.path) {
      case '/-/health':
        ctx.type = 'text/plain';
        ctx.body = 'Depot OK';
        return;
      case '/-/liveness':
        ctx.body = { status: 'ok' };
        return;
      case '/-/readiness':
        ctx.body = await readiness(deps);
        if (ctx.body && (ctx.body as { status: string }).status === 'failed') ctx.status = 503;
        return;
      case '/-/metrics':
        ctx.type = metrics.registry.contentType;
        ctx.body = await metrics.registry.metrics();
        return;
      default:
        await next();
    }
  });

  app.use(async (ctx, next) => {
    if (isApiPath(ctx.path)) {
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.set('X-Frame-Options', 'SAMEORIGIN');
    }
    if (ctx.path === `${API_PREFIX}/openapi.json` && (ctx.method === 'GET' || ctx.method === 'HEAD')) {
      ctx.body = openApi;
      return;
    }
    if (ctx.path.startsWith('/api/v3/') || ctx.path === '/api/v3') {
      ctx.status = 410;
      ctx.body = { error: 'API V3 is no longer supported. Use API V4 instead.' };
      return;
    }
    await next();
  });
  // OAuth, the web pages and git's HTTP paths never live under /api/v4 (GitLab reserves the
  // `api` namespace): API requests skip their matching.
  const beside = (middleware: Middleware<AppState>): Middleware<AppState> => {
    return (ctx, next) => (isApiPath(ctx.path) ? next() : middleware(ctx, next));
  };
  app.use(beside(oauthRoutes()));
  app.use(beside(webPages()));
  app.use(beside(rawFiles() as Middleware<AppState>));
  app.use(beside(errorTrackingPage() as Middleware<AppState>));
  app.use(beside(gitLfs() as Middleware<AppState>));
  app.use(beside(gitHttp() as Middleware<AppState>));
  app.use(api.routes());
  app.use(async (ctx) => {
    ctx.status = 404;
    ctx.body = { error: '404 Not Found' };
  });
  return app;
}

/**
 * Readiness: the database answers and every storage root is a directory. A storage that refuses
 * writes (mounted read-only, or full) is `degraded`, not failed: its reads go on, and so does
 * everything on the other storages, so the instance stays in service (200) and says which.
 */
async function readiness(deps: Deps) {
  const checks: Record<string, { status: string; message?: string }> = {};
  try {
    await sql`SELECT 1`.execute(deps.db);
    checks.database = { status: 'ok' };
  } catch {
    checks.database = { status: 'failed', message: 'database unreachable' };
  }
  for (const name of deps.storages.names()) {
    const root = deps.storages.root(name);
    const fault = (await fs.stat(root).then(
      (stat) => stat.isDirectory(),
      () => false,
    ))
      ? await probeStorageWrites(root)
      : undefined;
    if (fault) {
      const state = fault === 'read_only' ? 'read-only' : 'full';
      checks[`storage_${name}`] = { status: 'degraded', message: `storage is ${state}: writes are refused` };
      continue;
    }
    try {
      await fs.access(root, fs.constants.W_OK);
      checks[`storage_${name}`] = { status: 'ok' };
    } catch {
      checks[`storage_${name}`] = { status: 'failed', message: 'storage root not writable' };
    }
  }
  const statuses = Object.values(checks).map((c) => c.status);
  const status = statuses.includes('failed') ? 'failed' : statuses.includes('degraded') ? 'degraded' : 'ok';
  return { status, checks };
}
