import fs from 'node:fs';
import { z } from 'zod';
import { notModified, partialContent, rangeNotSatisfiable, requestedRange, resolveRange } from '../http/conditional.js';
import type { AppContext } from '../http/context.js';
import { filePathParam } from '../http/file-path.js';
import { p } from '../http/params.js';
import { checkRateLimit, LARGE_BLOB_BYTES, LARGE_FILE_RATE_LIMIT } from '../http/rate-limit.js';
import type { ApiRouter } from '../http/route.js';
import { formatContentDisposition } from '../lib/content-disposition.js';
import { fileHeaders, presentFile } from '../presenters/repository-file.js';
import type { ScopeRule } from '../services/auth.js';
import {
  describeRepositoryFile,
  findLfsObjectForFile,
  findRepositoryFile,
  type StoredLfsObject,
} from '../services/repository-files.js';
import { loadRepository } from './helpers.js';
import { sendBlob } from './repository.js';

/** The files API also takes `read_repository` tokens for reads (lib/api/files.rb). */
const READ_SCOPES: readonly ScopeRule[] = [{ scope: 'read_repository', readOnly: true }];

/** Grape's `allow_blank: false`. */
const notBlank = () => p.string().refine((v) => v.trim() !== '', { message: 'is empty' });

const fileParams = z.object({ id: p.string(), file_path: filePathParam(), ref: notBlank() });

const rawParams = z.object({
  id: p.string(),
  file_path: filePathParam(true),
  ref: notBlank().optional(),
  lfs: p.bool().default(false),
});

/**
 * The name a raw file is offered under: GitLab drops everything after the first dot of an
 * `.xhtml` name, so browsers do not render it as a page.
 */
const downloadName = (name: string) => (name.endsWith('.xhtml') ? (name.split('.')[0] ?? name) : name);

/**
 * present_disk_file!: an LFS object as an attachment named after its oid, as GitLab stores it.
 * Its oid (SHA-256 of the content) is its strong ETag; conditional and range requests as for blobs.
 */
function sendLfsObject(ctx: AppContext, object: StoredLfsObject): void {
  const etag = `"lfs-${object.oid}"`;
  ctx.set('Content-Disposition', formatContentDisposition('attachment', object.oid.slice(4)));
  ctx.set('Content-Transfer-Encoding', 'binary');
  ctx.set('ETag', etag);
  ctx.set('Accept-Ranges', 'bytes');
  ctx.type = 'application/octet-stream';
  if (notModified(ctx, etag)) {
    ctx.status = 304;
    return;
  }
  const wanted = requestedRange(ctx, etag);
  const range = wanted && resolveRange(wanted, object.size);
  if (wanted && !range) {
    rangeNotSatisfiable(ctx, object.size);
    return;
  }
  ctx.status = 200;
  if (ctx.method !== 'HEAD') ctx.body = fs.createReadStream(object.path, range ?? {});
  if (range) partialContent(ctx, range, object.size);
  ctx.length = range ? range.end - range.start + 1 : object.size;
}

/** Routes for reading repository files (lib/api/files.rb); writes are in repository-writes.ts. */
export function registerFileRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/repository/files/:file_path',
    {
      summary: 'A file, base64-encoded, with its metadata (HEAD: the metadata only)',
      params: fileParams,
      scopes: READ_SCOPES,
      tags: ['repository_files'],
    },
    async (ctx, params) => {
      const { project, gitDir } = await loadRepository(ctx, params.id);
      const file = await findRepositoryFile(gitDir, project, params.ref, params.file_path);
      if (ctx.method === 'HEAD') {
        ctx.set(fileHeaders(await describeRepositoryFile(gitDir, file, false)));
        ctx.type = 'application/json';
        ctx.status = 200;
        return;
      }
      if (file.size > LARGE_BLOB_BYTES) await checkRateLimit(ctx, LARGE_FILE_RATE_LIMIT, [project.id]);
      const details = await describeRepositoryFile(gitDir, file, true);
      ctx.set(fileHeaders(details));
      // A string body would make Node write the headers in one UTF-8 chunk with it, encoding
      // the already byte-spelled X-Gitlab-File-* values twice; a Buffer keeps them apart.
      ctx.type = 'application/json';
      ctx.body = Buffer.from(JSON.stringify(presentFile(details)));
    },
  );

  api.get(
    '/projects/:id/repository/files/:file_path/raw',
    { summary: 'The raw content of a file', params: rawParams, scopes: READ_SCOPES, tags: ['repository_files'] },
    async (ctx, params) => {
      const { project, gitDir } = await loadRepository(ctx, params.id);
      const file = await findRepositoryFile(gitDir, project, params.ref ?? null, params.file_path);
      if (params.lfs) {
        const object = await findLfsObjectForFile(ctx.state.deps, project, gitDir, file);
        if (object) {
          sendLfsObject(ctx, object);
          return;
        }
      }
      ctx.set(fileHeaders(await describeRepositoryFile(gitDir, file, false)));
      const disposition = formatContentDisposition('inline', downloadName(file.name));
      await sendBlob(ctx, gitDir, { oid: file.blobId, size: file.size, type: 'blob' }, disposition);
    },
  );
}
