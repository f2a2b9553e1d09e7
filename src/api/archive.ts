import fs from 'node:fs';
import { PassThrough, type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { findProjectLfsObject } from '../db/queries/lfs.js';
import type { Project } from '../db/schema.js';
import {
  ARCHIVE_EXTENSIONS,
  type ArchiveStream,
  archiveFormat,
  type LfsResolver,
  streamArchive,
} from '../git/archive.js';
import { objectInfo } from '../git/catfile.js';
import { probeStorageWrites, storageFault } from '../git/errors.js';
import { resolveCommitId } from '../git/refs.js';
import { isValidRepoPath, isValidRevision } from '../git/validate.js';
import { notModified, partialContent, rangeNotSatisfiable, requestedRange, resolveRange } from '../http/conditional.js';
import type { AppContext } from '../http/context.js';
import { ApiError, notFound } from '../http/errors.js';
import { isHotlinking } from '../http/hotlinking.js';
import { p } from '../http/params.js';
import { ANONYMOUS_ARCHIVE_THRESHOLD, ARCHIVE_RATE_LIMIT, checkRateLimit } from '../http/rate-limit.js';
import type { ApiRouter } from '../http/route.js';
import type { Generated, SharedFile } from '../lib/shared-file.js';
import type { Deps } from '../services/deps.js';
import { type ArchiveVariant, archiveCache, archiveKey } from '../storage/archive-cache.js';
import { loadRepository } from './helpers.js';

const params = z.object({
  id: p.string(),
  format: p.string().optional(),
  sha: p.string().optional(),
  path: p.string().optional(),
  include_lfs_blobs: p.bool().default(true),
});

/**
 * GitLab's archive name (Gitlab::Git::Repository#archive_prefix with append_sha): the file name
 * without extension and the top-level folder. GitLab turns `/` into `-` before it trims slashes,
 * so a leading or trailing slash of `path` survives as `-`; we keep that.
 */
export function archivePrefix(projectPath: string, ref: string, sha: string, path?: string): string {
  const segments = [projectPath, ref.replaceAll('/', '-'), sha];
  if (path !== undefined) segments.push(path.replaceAll('/', '-'));
  return segments.join('-');
}

/** Stored LFS objects of the project, by oid; null for pointers whose object we do not hold. */
function lfsResolver(deps: Deps, project: Project): LfsResolver {
  return async (oid, size) => {
    const object = await findProjectLfsObject(deps.db, project.id, oid);
    if (!object || Number(object.size) !== size) return null;
    const file = deps.storages.lfsObjectPath(project.repository_storage, oid);
    return fs.promises.access(file).then(
      () => file,
      () => null,
    );
  };
}

/** GitLab's archive max-age (Repository::ARCHIVE_CACHE_TIME, _IMMUTABLE when asked by commit id). */
const ARCHIVE_MAX_AGE_SECONDS = 60;
const IMMUTABLE_ARCHIVE_MAX_AGE_SECONDS = 3600;
/** A generation runs on after its first client has gone (others may be reading it): its limit. */
const ARCHIVE_GENERATION_TIMEOUT_MS = 60 * 60 * 1000;

async function sendArchive(ctx: AppContext, input: z.infer<typeof params>): Promise<void> {
  const deps = ctx.state.deps;
  // Authorization first, on every request: nothing below, the cache included, is reached without it.
  const { project, gitDir } = await loadRepository(ctx, input.id);
  const format = archiveFormat(input.format);
  if (!format) throw notFound();

  // Any failure before the first byte is GitLab's `404 File Not Found`.
  const ref = input.sha || project.default_branch || 'main';
  const path = input.path || undefined;
  const gitPath = path?.replace(/^\/+|\/+$/g, '');
  if (!isValidRevision(ref) || (gitPath !== undefined && gitPath !== '' && !isValidRepoPath(gitPath))) {
    throw notFound('File');
  }
  const commitId = await resolveCommitId(gitDir, ref).catch(() => null);
  if (!commitId) throw notFound('File');
  if (gitPath) {
    const entry = await objectInfo(gitDir, `${commitId}:${gitPath}`).catch(() => null);
    if (!entry) throw notFound('File');
  }
  // Pointers are replaced only when the project holds LFS objects; which ones is its LFS version.
  const lfs = input.include_lfs_blobs && project.lfs_objects_version > 0 ? String(project.lfs_objects_version) : null;
  const prefix = archivePrefix(project.path, ref, commitId, path);
  const variant: ArchiveVariant = { commitId, format, path: gitPath ?? '', prefix, lfs };
  const etag = `"${archiveKey(variant)}"`;

  ctx.set('Content-Disposition', `attachment; filename="${prefix}.${ARCHIVE_EXTENSIONS[format]}"`);
  ctx.set('Content-Transfer-Encoding', 'binary');
  ctx.type = format === 'zip' ? 'application/zip' : 'application/octet-stream';
  ctx.set('ETag', etag);
  // Projects::RepositoriesController#set_cache_headers: shared caches only for public projects.
  const maxAge = ref === commitId ? IMMUTABLE_ARCHIVE_MAX_AGE_SECONDS : ARCHIVE_MAX_AGE_SECONDS;
  ctx.set('Cache-Control', `max-age=${maxAge}, ${project.visibility === 'public' ? 'public' : 'private'}`);
  // A revalidation costs nothing to make: it is neither counted against the rate limit nor generated.
  if (notModified(ctx, etag)) {
    ctx.status = 304;
    return;
  }

  const user = ctx.state.actor.user;
  await checkRateLimit(
    ctx,
    ARCHIVE_RATE_LIMIT,
    [project.id, user ? user.id : 'anonymous'],
    user ? undefined : ANONYMOUS_ARCHIVE_THRESHOLD,
  );
  if (isHotlinking(ctx)) throw new ApiError(406, { message: '406 Not Acceptable' });

  const generate = () =>
    streamArchive(gitDir, {
      commitId,
      prefix,
      format,
      timeoutMs: ARCHIVE_GENERATION_TIMEOUT_MS,
      ...(gitPath ? { path: gitPath } : {}),
      ...(lfs ? { lfs: lfsResolver(deps, project) } : {}),
    });
  const cache = archiveCache(deps.config);
  if (!cache.enabled) return streamUncached(ctx, generate, project.id);
  ctx.set('Accept-Ranges', 'bytes');
  if (ctx.method === 'HEAD') {
    // A HEAD generates nothing: the length is known when the archive is cached.
    const cached = await cache.peek(project.id, variant);
    const size = await cached?.size();
    if (size !== undefined && size !== null) ctx.length = size;
    await cached?.close();
    ctx.status = 200;
    return;
  }
  // The cache only saves work: when its directory refuses writes (a read-only or full
  // filesystem) or cannot be opened, the archive is streamed without it.
  const fault = await probeStorageWrites(cache.root);
  if (fault) {
    deps.logger.warn({ fault, project: project.id }, 'archive cache refuses writes; streaming without it');
    return streamUncached(ctx, generate, project.id);
  }
  let archive: SharedFile;
  let settle: (result: Generated) => void = () => {};
  const produced = new Promise<Generated>((resolve) => {
    settle = resolve;
  });
  try {
    archive = await cache.open(project.id, variant, generate, deps.logger, settle);
  } catch (error) {
    deps.logger.warn({ err: error, project: project.id }, 'archive cache unusable; streaming without it');
    return streamUncached(ctx, generate, project.id);
  }
  try {
    const wanted = requestedRange(ctx, etag);
    if (!wanted) {
      // Known when cached; while generating, the body is sent as it grows from its first byte
      // (a generation that fails before it is still GitLab's 404).
      await archive.started();
      const size = await archive.size();
      ctx.body =
        size === null && archive.origin === 'miss'
          ? readResuming(archive, generate, produced, deps, project.id)
          : archive.read();
      if (size !== null) ctx.length = size;
      return;
    }
    // A range needs the size: it is answered from the finished archive (curl -C - after a cut).
    const size = await archive.finished();
    const range = resolveRange(wanted, size);
    if (!range) {
      await archive.close();
      rangeNotSatisfiable(ctx, size);
      return;
    }
    partialContent(ctx, range, size);
    ctx.body = archive.read(range.start, range.end);
    ctx.length = range.end - range.start + 1;
  } catch (error) {
    // The generation failed before anything was sent.
    await archive.close();
    deps.logger.warn({ err: error, project: project.id }, 'archive generation failed');
    throw notFound('File');
  }
}

/**
 * The bytes of an archive this request is generating into the cache. When the cache's
 * filesystem refuses the rest part-way (it filled up, or turned read-only), the rest comes from
 * a generation of this request's own: git writes the same bytes for the same commit, prefix and
 * format, so the bytes already sent are skipped and the client gets the whole archive. Any other
 * failure (git itself failed or was killed) cuts the download off, as before.
 */
function readResuming(
  archive: SharedFile,
  generate: () => ArchiveStream,
  produced: Promise<Generated>,
  deps: Deps,
  projectId: number,
): Readable {
  const out = new PassThrough();
  const cached = archive.read();
  let sent = 0;
  let again: ArchiveStream | undefined;
  cached.on('data', (chunk: Buffer) => {
    sent += chunk.length;
  });
  cached.pipe(out, { end: false });
  cached.once('end', () => out.end());
  cached.once('error', async (error) => {
    cached.unpipe(out);
    // The reader learns of the failure from the file; why it failed, from the producer.
    const result = await produced;
    if (out.destroyed) return;
    if (result.ok || !storageFault(result.error)) {
      out.destroy(error);
      return;
    }
    deps.logger.warn({ err: error, project: projectId, sent }, 'cached archive failed part-way; generating the rest');
    again = generate();
    let skip = sent;
    const rest = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        if (skip >= chunk.length) {
          skip -= chunk.length;
          return callback();
        }
        const tail = chunk.subarray(skip);
        skip = 0;
        callback(null, tail);
      },
    });
    const generation = again;
    pipeline(generation.stream, rest, out).catch((failure: unknown) => {
      deps.logger.warn({ err: failure, project: projectId }, 'archive stream failed');
      generation.kill();
    });
  });
  out.once('close', () => {
    cached.destroy();
    again?.kill();
  });
  return out;
}

/** ARCHIVE_CACHE_MAX=0: every download runs its own generation, streamed as git writes it. */
function streamUncached(ctx: AppContext, generate: () => ArchiveStream, projectId: number): void {
  ctx.status = 200;
  if (ctx.method === 'HEAD') return;
  const archive = generate();
  archive.stream.on('error', (error) => {
    ctx.state.deps.logger.warn({ err: error, project: projectId }, 'archive stream failed');
    archive.kill();
  });
  ctx.body = archive.stream;
}

/** Routes for repository archives (lib/api/repositories.rb, streamed as Workhorse does). */
export function registerArchiveRoutes(api: ApiRouter): void {
  const options = { params, summary: 'Download an archive of the repository', tags: ['repositories'] };
  api.get('/projects/:id/repository/archive', options, sendArchive);
  api.get('/projects/:id/repository/archive.:format', options, sendArchive);
}
