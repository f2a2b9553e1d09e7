import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { GitError, storageFault } from '../git/errors.js';
import type { AppState } from './context.js';
import { ApiError, MovedPermanently, storageUnavailable } from './errors.js';
import type { Metrics } from './metrics.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Parameters that carry secrets and must not reach the logs. */
const SECRET_PARAMS =
  /([?&](?:private_token|access_token|bearer_token|token|client_secret|password|code|refresh_token)=)[^&]*/gi;

export const redactUrl = (url: string) => url.replace(SECRET_PARAMS, '$1[FILTERED]');

/** Request id (taken from `X-Request-Id` when well-formed), per-request logger, access log, metrics. */
export function requestContext(logger: Logger, metrics: Metrics): Middleware<AppState> {
  return async (ctx, next) => {
    const incoming = ctx.get('X-Request-Id');
    const requestId = REQUEST_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    ctx.state.log = logger.child({ request_id: requestId });
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = (ctx as { _matchedRoute?: string | RegExp })._matchedRoute;
      const label = typeof route === 'string' ? route : 'unmatched';
      metrics.requests.inc({ method: ctx.method, route: label, status: String(ctx.status) });
      metrics.duration.observe({ method: ctx.method, route: label }, seconds);
      ctx.state.log.info(
        { method: ctx.method, path: redactUrl(ctx.originalUrl), status: ctx.status, duration_s: seconds },
        'request',
      );
    }
  };
}

const JSON_TYPE = /^application\/json\s*(;|$)/i;

/**
 * JSON answers (errors included) on the paths `applies` selects carry exactly
 * `Content-Type: application/json`, as Grape sends it: Koa would add `; charset=utf-8`, and
 * python-gitlab 3.12 parses a body as JSON only on the exact value. Runs outside errorHandler,
 * so it sees the error bodies too.
 */
export function exactJsonType(applies: (path: string) => boolean): Middleware<AppState> {
  return async (ctx, next) => {
    await next();
    if (!applies(ctx.path)) return;
    const type = ctx.response.get('Content-Type');
    if (typeof type === 'string' && JSON_TYPE.test(type)) ctx.set('Content-Type', 'application/json');
  };
}

/** Maps every error to GitLab's bodies; unexpected failures are logged and hidden. */
export function errorHandler(): Middleware<AppState> {
  return async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      const { status, body, headers } = toResponse(error);
      if (status >= 500) ctx.state.log?.error({ err: error }, 'request failed');
      ctx.status = status;
      ctx.set(headers);
      ctx.body = body;
    }
  };
}

/** A PostgreSQL error of class 22 (data exception), as node-postgres reports it. */
function isDataException(error: unknown): boolean {
  const failure = error as { code?: unknown; severity?: unknown } | null;
  return (
    typeof failure?.code === 'string' && typeof failure.severity === 'string' && /^22[0-9A-Z]{3}$/.test(failure.code)
  );
}

function toResponse(error: unknown): { status: number; body: unknown; headers: Record<string, string> } {
  if (error instanceof MovedPermanently) return { status: error.status, body: error.message, headers: error.headers };
  if (error instanceof ApiError) return { status: error.status, body: error.body, headers: error.headers };
  if (error instanceof GitError) {
    if (error.code === 'invalid_argument') return { status: 400, body: { message: '400 Bad request' }, headers: {} };
    if (error.code === 'repository_missing') {
      return { status: 404, body: { message: '404 Repository Not Found' }, headers: {} };
    }
    if (error.code === 'timeout') {
      return { status: 503, body: { message: '503 Service Unavailable' }, headers: {} };
    }
  }
  // A storage mounted read-only or out of space, met by git or by our own file writes.
  const fault = storageFault(error);
  if (fault) {
    const answer = storageUnavailable(fault);
    return { status: answer.status, body: answer.body, headers: answer.headers };
  }
  // PostgreSQL's data exceptions (class 22: a number out of its column's range, text it cannot
  // store) come from values the client sent that the parameter checks let through: the client's
  // fault, GitLab's 400, not a 500.
  if (isDataException(error)) return { status: 400, body: { message: '400 Bad request' }, headers: {} };
  // Body-parser and other HTTP errors thrown by Koa middleware carry an `expose`d status.
  const httpError = error as { status?: number; statusCode?: number; expose?: boolean; type?: string };
  const status = httpError.status ?? httpError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    if (status === 413) return { status, body: { message: '413 Request Entity Too Large' }, headers: {} };
    if (status === 415) return { status, body: { message: '415 Unsupported Media Type' }, headers: {} };
    return { status: 400, body: { message: '400 Bad request - The request body could not be parsed' }, headers: {} };
  }
  return { status: 500, body: { message: '500 Internal Server Error' }, headers: {} };
}
