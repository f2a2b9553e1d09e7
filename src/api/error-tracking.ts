import { z } from 'zod';
import type { ErrorTrackingClientKey, ErrorTrackingSetting } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, badRequestMessage, notFound, payloadTooLarge, recordNotFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { parseQuery } from '../http/route.js';
import { readLimited } from '../lib/streams.js';
import {
  clientKeyDsn,
  collectError,
  collectorAccepts,
  countClientKeys,
  createClientKey,
  decodeBody,
  deleteClientKey,
  externalUrl,
  findErrorTrackingSetting,
  listClientKeys,
  parseEnvelope,
  requestPublicKey,
  saveErrorTrackingSetting,
  validEvent,
} from '../services/error-tracking.js';
import { findProjectAndNamespace } from '../services/projects.js';
import { created, loadProject } from './helpers.js';

/** The largest event body the collector reads (compressed or not). */
const MAX_EVENT_BYTES = 5 * 1024 * 1024;

/** GitLab's ProjectSetting entity; the spec's neutral name for the external URL is answered too. */
function presentSetting(setting: ErrorTrackingSetting) {
  const url = externalUrl(setting);
  return {
    active: setting.enabled,
    project_name: setting.project_name,
    sentry_external_url: url,
    error_monitor_external_url: url,
    api_url: setting.api_url,
    integrated: setting.integrated,
  };
}

/** GitLab's ClientKey entity, with the spec's neutral name for the DSN beside GitLab's. */
function presentClientKey(baseUrl: string, key: ErrorTrackingClientKey) {
  const dsn = clientKeyDsn(baseUrl, key);
  return { id: key.id, active: key.active, public_key: key.public_key, sentry_dsn: dsn, error_monitor_dsn: dsn };
}

/** Loads the project for GitLab's `admin_operations` (maintainers). */
async function operationsProject(ctx: AppContext, id: string) {
  const { project, policy } = await loadProject(ctx, id);
  policy.authorize('admin_operations');
  return project;
}

async function readBody(ctx: AppContext): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || 0);
  if (declared > MAX_EVENT_BYTES) throw payloadTooLarge();
  return readLimited(ctx.req, MAX_EVENT_BYTES, payloadTooLarge);
}

/**
 * The collector's checks, in GitLab's order: the project (404 Project), integrated tracking on
 * (404) and an active key (404), a key that cannot be read being 400.
 */
async function collectorProject(ctx: AppContext, id: string): Promise<number> {
  const found = await findProjectAndNamespace(ctx.state.deps, id);
  if (!found) throw notFound('Project');
  const key = requestPublicKey(parseQuery(ctx.querystring), ctx.get('x-sentry-auth') || undefined);
  if (!(await collectorAccepts(ctx.state.deps.db, found.project.id, key))) throw notFound();
  return found.project.id;
}

/** The collector never answers anything back but its status (SDKs need 200). */
function collected(ctx: AppContext): void {
  ctx.status = 200;
  ctx.body = {};
}

const unsupported = () => badRequestMessage('Unsupported sentry payload');

/** GitLab's error tracking API (lib/api/error_tracking/): settings, client keys and the collector. */
export function registerErrorTrackingRoutes(api: ApiRouter): void {
  const projectId = { id: z.string() };

  api.get(
    '/projects/:id/error_tracking/settings',
    { summary: 'Error tracking settings', auth: 'required', tags: ['error_tracking'], params: z.object(projectId) },
    async (ctx, params) => {
      const project = await operationsProject(ctx, params.id);
      const setting = await findErrorTrackingSetting(ctx.state.deps.db, project.id);
      if (!setting) throw notFound('Error Tracking Setting');
      ctx.body = presentSetting(setting);
    },
  );

  api.patch(
    '/projects/:id/error_tracking/settings',
    {
      summary: 'Turn error tracking on or off',
      auth: 'required',
      tags: ['error_tracking'],
      params: z.object({ ...projectId, active: p.bool(), integrated: p.bool().optional() }),
    },
    async (ctx, params) => {
      const project = await operationsProject(ctx, params.id);
      if (!(await findErrorTrackingSetting(ctx.state.deps.db, project.id))) throw notFound('Error Tracking Setting');
      const setting = await saveErrorTrackingSetting(ctx.state.deps, project.id, {
        enabled: params.active,
        integrated: params.integrated,
      });
      ctx.body = presentSetting(setting);
    },
  );

  api.put(
    '/projects/:id/error_tracking/settings',
    {
      summary: 'Set up error tracking',
      auth: 'required',
      tags: ['error_tracking'],
      params: z.object({ ...projectId, active: p.bool(), integrated: p.bool() }),
    },
    async (ctx, params) => {
      const project = await operationsProject(ctx, params.id);
      const setting = await saveErrorTrackingSetting(ctx.state.deps, project.id, {
        enabled: params.active,
        integrated: params.integrated,
      });
      ctx.body = presentSetting(setting);
    },
  );

  api.get(
    '/projects/:id/error_tracking/client_keys',
    {
      summary: 'Error tracking client keys',
      auth: 'required',
      tags: ['error_tracking'],
      params: z.object({ ...projectId, ...pagination() }),
    },
    async (ctx, params) => {
      const project = await operationsProject(ctx, params.id);
      const { db, config } = ctx.state.deps;
      const keys = await paginateQuery(
        ctx,
        config.baseUrl,
        params,
        (window) => listClientKeys(db, project.id, window),
        (limit) => countClientKeys(db, project.id, limit),
      );
      ctx.body = keys.map((key) => presentClientKey(config.baseUrl, key));
    },
  );

  api.post(
    '/projects/:id/error_tracking/client_keys',
    { summary: 'Make a client key', auth: 'required', tags: ['error_tracking'], params: z.object(projectId) },
    async (ctx, params) => {
      const project = await operationsProject(ctx, params.id);
      const key = await createClientKey(ctx.state.deps, project.id);
      created(ctx, presentClientKey(ctx.state.deps.config.baseUrl, key));
    },
  );

  api.delete(
    '/projects/:id/error_tracking/client_keys/:key_id',
    {
      summary: 'Remove a client key',
      auth: 'required',
      tags: ['error_tracking'],
      params: z.object({ ...projectId, key_id: p.id() }),
    },
    async (ctx, params) => {
      const project = await operationsProject(ctx, params.id);
      const key = await deleteClientKey(ctx.state.deps.db, project.id, params.key_id);
      if (!key) throw recordNotFound();
      // GitLab answers the removed key (200), not 204.
      ctx.body = presentClientKey(ctx.state.deps.config.baseUrl, key);
    },
  );

  api.post(
    '/error_tracking/collector/api/:id/envelope',
    {
      // Authenticated by the client key alone: collector.rb never reads a user's credentials.
      credentials: false,
      summary: 'Error SDK events (envelope)',
      rawBody: true,
      tags: ['error_tracking'],
      params: z.object({ id: z.string() }).passthrough(),
    },
    async (ctx, params) => {
      const projectId = await collectorProject(ctx, params.id);
      const body = decodeBody(await readBody(ctx), ctx.get('content-encoding') || undefined);
      let items: ReturnType<typeof parseEnvelope>;
      try {
        items = parseEnvelope(body);
      } catch {
        throw badRequestMessage('Failed to parse sentry request');
      }
      // SDKs send an event or a transaction; anything else is refused, as GitLab does.
      const item = items.find((entry) => entry.type === 'event' || entry.type === 'transaction');
      if (!item) throw new ApiError(400, { message: '400 Bad Request' });
      if (item.type === 'event') {
        let event: unknown;
        try {
          event = JSON.parse(item.payload.toString('utf8'));
        } catch {
          throw badRequestMessage('Failed to parse sentry request');
        }
        if (!validEvent(event)) throw unsupported();
        await collectError(ctx.state.deps, projectId, event);
      }
      collected(ctx);
    },
  );

  api.post(
    '/error_tracking/collector/api/:id/store',
    {
      // Authenticated by the client key alone: collector.rb never reads a user's credentials.
      credentials: false,
      summary: 'Error SDK events (store)',
      rawBody: true,
      tags: ['error_tracking'],
      params: z.object({ id: z.string() }).passthrough(),
    },
    async (ctx, params) => {
      const projectId = await collectorProject(ctx, params.id);
      const body = decodeBody(await readBody(ctx), ctx.get('content-encoding') || undefined);
      let event: unknown;
      try {
        event = JSON.parse(body.toString('utf8'));
      } catch {
        throw badRequestMessage('Failed to parse sentry request');
      }
      if (!validEvent(event)) throw unsupported();
      await collectError(ctx.state.deps, projectId, event);
      collected(ctx);
    },
  );
}
