import fs from 'node:fs';
import { z } from 'zod';
import { findProjectLfsObject, projectHasLfsObjects } from '../db/queries/lfs.js';
import type { Project } from '../db/schema.js';
import { ARCHIVE_EXTENSIONS, archiveFormat, type LfsResolver, streamArchive } from '../git/archive.js';
import { objectInfo } from '../git/catfile.js';
import { resolveCommitId } from '../git/refs.js';
import { isValidRepoPath, isValidRevision } from '../git/validate.js';
import type { AppContext } from '../http/context.js';
import { ApiError, notFound } from '../http/errors.js';
import { isHotlinking } from '../http/hotlinking.js';
import { p } from '../http/params.js';
import { ANONYMOUS_ARCHIVE_THRESHOLD, ARCHIVE_RATE_LIMIT, checkRateLimit } from '../http/rate-limit.js';
import type { ApiRouter } from '../http/route.js';
import type { Deps } from '../services/deps.js';
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

async function sendArchive(ctx: AppContext, input: z.infer<typeof params>): Promise<void> {
  const deps = ctx.state.deps;
  const { project, gitDir } = await loadRepository(ctx, input.id);
  const format = archiveFormat(input.format);
  if (!format) throw notFound();
  const user = ctx.state.actor.user;
  await checkRateLimit(
    ctx,
    ARCHIVE_RATE_LIMIT,
    [project.id, user ? user.id : 'anonymous'],
    user ? undefined : ANONYMOUS_ARCHIVE_THRESHOLD,
  );
  if (isHotlinking(ctx)) throw new ApiError(406, { message: '406 Not Acceptable' });

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
  const lfs = input.include_lfs_blobs && (await projectHasLfsObjects(deps.db, project.id));
  const prefix = archivePrefix(project.path, ref, commitId, path);
  const archive = streamArchive(gitDir, {
    commitId,
    prefix,
    format,
    ...(gitPath ? { path: gitPath } : {}),
    ...(lfs ? { lfs: lfsResolver(deps, project) } : {}),
  });
  archive.stream.on('error', (error) => {
    deps.logger.warn({ err: error, project: project.id }, 'archive stream failed');
    archive.kill();
  });
  ctx.set('Content-Disposition', `attachment; filename="${prefix}.${ARCHIVE_EXTENSIONS[format]}"`);
  ctx.set('Content-Transfer-Encoding', 'binary');
  ctx.type = format === 'zip' ? 'application/zip' : 'application/octet-stream';
  ctx.body = archive.stream;
}

/** Routes for repository archives (lib/api/repositories.rb, streamed as Workhorse does). */
export function registerArchiveRoutes(api: ApiRouter): void {
  const options = { params, summary: 'Download an archive of the repository', tags: ['repositories'] };
  api.get('/projects/:id/repository/archive', options, sendArchive);
  api.get('/projects/:id/repository/archive.:format', options, sendArchive);
}
