import type { Middleware } from 'koa';
import { sendBlob } from '../api/repository.js';
import type { User } from '../db/schema.js';
import { listBranches, listTags } from '../git/refs.js';
import { readCredentials } from '../http/auth.js';
import type { AppContext, AppState } from '../http/context.js';
import { ApiError } from '../http/errors.js';
import { isValidFilePathParam } from '../http/file-path.js';
import { checkRateLimit, type RateLimit } from '../http/rate-limit.js';
import { parseQuery } from '../http/route.js';
import { formatContentDisposition } from '../lib/content-disposition.js';
import { loadProjectPolicy } from '../policies/abilities.js';
import { getApplicationSettings } from '../services/application-settings.js';
import { resolveActor, type ScopeRule } from '../services/auth.js';
import { findProjectAndNamespace } from '../services/projects.js';
import { findRepositoryFile } from '../services/repository-files.js';
import { currentSession, rememberReturnTo } from './session.js';

/** `/<full path>/-/raw/<ref>/<file path>` (Projects::RawController#show). */
const ROUTE = /^\/(.+?)\/-\/raw\/(.+)$/;

/** Personal access tokens that read code: GitLab's sessionless `:blob` requests. */
const RAW_SCOPES: readonly ScopeRule[] = [
  { scope: 'api' },
  { scope: 'read_api', readOnly: true },
  { scope: 'read_repository', readOnly: true },
];

/**
 * GitLab's `raw_blob` limit: requests per minute for one file path of one project, whatever the
 * ref, the threshold `raw_blob_request_limit` (0: none). Its answer is plain text.
 */
const RAW_BLOB_RATE_LIMIT: RateLimit = {
  name: 'raw_blob',
  threshold: 300,
  periodSeconds: 60,
  message: 'You cannot access the raw file. Please wait a minute.',
};

const COMMIT_ID = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

function notFound(ctx: AppContext): void {
  ctx.status = 404;
  ctx.type = 'text/plain';
  ctx.body = 'Not Found';
}

/** The segments after `/-/raw/`, each percent-decoded; null when one does not decode. */
function decodedSegments(rest: string): string[] | null {
  try {
    return rest.split('/').map((s) => decodeURIComponent(s));
  } catch {
    return null;
  }
}

/**
 * Splits `<ref>/<path>` as GitLab's ExtractsRef does: a commit id, else the longest branch or tag
 * name the segments begin with.
 */
async function splitRefAndPath(gitDir: string, segments: string[]): Promise<{ ref: string; path: string } | null> {
  const [first] = segments;
  if (first !== undefined && COMMIT_ID.test(first) && segments.length > 1) {
    return { ref: first, path: segments.slice(1).join('/') };
  }
  const joined = segments.join('/');
  const names = [...(await listBranches(gitDir)), ...(await listTags(gitDir))].map((r) => r.name);
  let best: string | null = null;
  for (const name of names) {
    if (joined.startsWith(`${name}/`) && (best === null || name.length > best.length)) best = name;
  }
  return best === null ? null : { ref: best, path: joined.slice(best.length + 1) };
}

/** A personal access or OAuth token (`private_token`, `PRIVATE-TOKEN`, Bearer) else the browser session's user. */
async function rawUser(ctx: AppContext): Promise<User | null> {
  const credentials = readCredentials(ctx, parseQuery(ctx.querystring));
  if (credentials.privateToken !== undefined || credentials.bearer !== undefined) {
    return (await resolveActor(ctx.state.deps, credentials, RAW_SCOPES, ctx.method)).user;
  }
  return (await currentSession(ctx))?.user ?? null;
}

/**
 * A file's raw content at a ref, as GitLab's web raw endpoint serves it (the API's raw file
 * headers), counted against `raw_blob_request_limit` per project and file path.
 */
export function rawFiles(): Middleware<AppState, AppContext> {
  return async (ctx, next) => {
    const match = ROUTE.exec(ctx.path);
    if (!match || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
    const [, fullPath, rest] = match as unknown as [string, string, string];
    const deps = ctx.state.deps;
    const found = await findProjectAndNamespace(deps, fullPath);
    const segments = decodedSegments(rest);
    if (!found || !segments) return notFound(ctx);
    const user = await rawUser(ctx);
    const policy = await loadProjectPolicy(deps, user, found.project, found.namespace);
    if (!policy.can('read_code')) {
      if (user) return notFound(ctx);
      // GitLab sends anonymous callers of a project they may not read to sign in first.
      await rememberReturnTo(ctx, ctx.originalUrl);
      ctx.redirect('/users/sign_in');
      return;
    }
    const { project } = found;
    // Named otherwise than the project's path now (a path it had before a move, or other case):
    // GET goes on to the canonical URL, as GitLab's ensure_canonical_path sends it.
    if (project.full_path !== fullPath && ctx.method === 'GET') {
      ctx.status = 301;
      ctx.redirect(`${deps.config.baseUrl}/${project.full_path}/-/raw/${rest}${ctx.search}`);
      return;
    }
    const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
    const split = await splitRefAndPath(gitDir, segments);
    if (!split || split.path === '' || !isValidFilePathParam(split.path)) return notFound(ctx);
    const threshold = (await getApplicationSettings(deps)).values.raw_blob_request_limit as number;
    try {
      await checkRateLimit(ctx, RAW_BLOB_RATE_LIMIT, [project.id, split.path], threshold);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 429) throw error;
      ctx.set(error.headers);
      ctx.status = 429;
      ctx.type = 'text/plain';
      ctx.body = RAW_BLOB_RATE_LIMIT.message;
      return;
    }
    let file: Awaited<ReturnType<typeof findRepositoryFile>>;
    try {
      file = await findRepositoryFile(gitDir, project, split.ref, split.path);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return notFound(ctx);
      throw error;
    }
    const disposition = ctx.query.inline === 'false' ? 'attachment' : 'inline';
    await sendBlob(
      ctx,
      gitDir,
      { oid: file.blobId, size: file.size, type: 'blob' },
      formatContentDisposition(disposition, file.name),
    );
  };
}
