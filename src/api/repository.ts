import { z } from 'zod';
import {
  blobHead,
  blobInfo,
  firstChunk,
  INLINE_BLOB_BYTES,
  readBlobContent,
  streamBlob,
  writeBlobTo,
} from '../git/blob.js';
import { readObject } from '../git/catfile.js';
import { resolveCommitId } from '../git/refs.js';
import { normaliseTreePath, readTree, type TreeEntry } from '../git/tree.js';
import { isValidRevision } from '../git/validate.js';
import { notModified, partialContent, rangeNotSatisfiable, requestedRange, resolveRange } from '../http/conditional.js';
import type { AppContext } from '../http/context.js';
import { directSocket, sendDirect } from '../http/direct.js';
import { ApiError, notFound } from '../http/errors.js';
import { paginateArray, setPaginationHeaders } from '../http/pagination.js';
import { p } from '../http/params.js';
import { checkRateLimit, LARGE_BLOB_BYTES, LARGE_BLOB_RATE_LIMIT } from '../http/rate-limit.js';
import type { ApiRouter } from '../http/route.js';
import { sniffContent } from '../lib/sniff.js';
import { sliceStream } from '../lib/streams.js';
import { loadRepository } from './helpers.js';

/** GitLab's TreeObject entity. */
const presentEntry = (e: TreeEntry) => ({ id: e.id, name: e.name, type: e.type, path: e.path, mode: e.mode });

/** GitLab's sorted_entries: trees, then blobs, then submodules, each in git's order. */
function sortedEntries(entries: TreeEntry[]): TreeEntry[] {
  const rank = { tree: 0, blob: 1, commit: 2 } as const;
  return entries
    .map((entry, index) => ({ entry, index }))
    .sort((a, b) => rank[a.entry.type] - rank[b.entry.type] || a.index - b.index)
    .map((x) => x.entry);
}

const treeParams = z
  .object({
    id: p.string(),
    ref: p.string().optional(),
    path: p.string().optional(),
    recursive: p.bool().default(false),
    pagination: p.enum(['legacy', 'keyset', 'none']).default('legacy'),
    page_token: p.string().optional(),
    page: p.page(),
    per_page: p.perPage(),
  })
  .refine((v) => v.pagination !== 'none' || v.recursive, {
    message: 'pagination cannot be "none" unless "recursive" is true',
  });

/** Gitaly's keyset cursor: base64 of `{"file_name":"<path of the last entry>"}`. */
const encodeToken = (path: string) => Buffer.from(JSON.stringify({ file_name: path })).toString('base64');

function decodeToken(token: string): string {
  try {
    const value = JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { file_name?: unknown };
    if (typeof value.file_name === 'string') return value.file_name;
  } catch {
    // A legacy token: the object id of the last entry.
  }
  return token;
}

async function tree(ctx: AppContext, params: z.infer<typeof treeParams>): Promise<void> {
  const { project, gitDir } = await loadRepository(ctx, params.id);
  const baseUrl = ctx.state.deps.config.baseUrl;
  const ref = params.ref || project.default_branch || 'main';
  const commitId = isValidRevision(ref) ? await resolveCommitId(gitDir, ref) : null;
  if (!commitId) throw notFound('Tree');
  const path = normaliseTreePath(params.path);
  if (path === null) throw notFound('invalid revision or path');
  let entries: TreeEntry[];
  const found = await readTree(gitDir, commitId, path, params.recursive);
  if (found) entries = sortedEntries(found);
  else {
    // A path naming a file lists nothing; a missing path is Gitaly's "invalid revision or path".
    const object = path === '' ? null : await readObject(gitDir, `${commitId}:${path}`).catch(() => null);
    if (!object) throw notFound('invalid revision or path');
    entries = [];
  }
  if (params.pagination === 'none') {
    ctx.body = entries.map(presentEntry);
    return;
  }
  const perPage = params.per_page;
  if (params.pagination === 'keyset') {
    let start = 0;
    if (params.page_token !== undefined) {
      const after = decodeToken(params.page_token);
      const index = entries.findIndex((e) => e.path === after || e.id === after);
      if (index < 0)
        throw new ApiError(400, { message: `400 Bad request - could not find starting OID: ${params.page_token}` });
      start = index + 1;
    }
    const page = entries.slice(start, start + perPage);
    const last = page[page.length - 1];
    if (last && page.length === perPage && start + perPage < entries.length) {
      const query = new URLSearchParams(ctx.querystring);
      query.set('page_token', encodeToken(last.path));
      const sorted = new URLSearchParams([...query].sort(([a], [b]) => a.localeCompare(b)));
      ctx.set('Link', `<${baseUrl}${ctx.path}?${sorted.toString()}>; rel="next"`);
    }
    ctx.body = page.map(presentEntry);
    return;
  }
  if (params.page === 1) {
    // GitLab's first legacy page is served by Gitaly with offset headers built from the total.
    setPaginationHeaders(ctx, baseUrl, { page: 1, per_page: perPage }, entries.length);
    ctx.body = entries.slice(0, perPage).map(presentEntry);
    return;
  }
  ctx.body = paginateArray(ctx, baseUrl, { page: params.page, per_page: perPage }, entries).map(presentEntry);
}

/** A blob by id (any revision naming a blob), or GitLab's `404 Blob Not Found`. */
async function findBlob(gitDir: string, sha: string) {
  if (!isValidRevision(sha)) throw notFound('Blob');
  const info = await blobInfo(gitDir, sha).catch(() => null);
  if (!info) throw notFound('Blob');
  return info;
}

export function registerRepositoryRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/repository/tree',
    { summary: 'List a repository tree', params: treeParams, tags: ['repositories'] },
    tree,
  );

  api.get(
    '/projects/:id/repository/blobs/:sha',
    {
      summary: 'A blob, base64-encoded',
      params: z.object({ id: p.string(), sha: p.string() }),
      tags: ['repositories'],
    },
    async (ctx, params) => {
      const { project, gitDir } = await loadRepository(ctx, params.id);
      const info = await findBlob(gitDir, params.sha);
      // GitLab's check_rate_limit_for_blob: large blobs are served, a few a minute per project.
      if (info.size > LARGE_BLOB_BYTES) await checkRateLimit(ctx, LARGE_BLOB_RATE_LIMIT, [project.id]);
      const data = await readBlobContent(gitDir, info);
      ctx.body = { size: info.size, encoding: 'base64', content: data.toString('base64'), sha: info.oid };
    },
  );

  api.get(
    '/projects/:id/repository/blobs/:sha/raw',
    {
      summary: 'The raw content of a blob',
      params: z.object({ id: p.string(), sha: p.string() }),
      tags: ['repositories'],
    },
    async (ctx, params) => {
      const { gitDir } = await loadRepository(ctx, params.id);
      const info = await findBlob(gitDir, params.sha);
      await sendBlob(ctx, gitDir, info, 'inline');
    },
  );
}

/**
 * Sends a blob with GitLab's raw headers: no caching, a type sniffed from the first bytes as
 * Workhorse does (text as text/plain; charset=utf-8), inline for text, images and PDF,
 * attachment for everything else (and SVG). The blob id is its strong ETag: `If-None-Match`
 * answers 304, one `Range` 206 (416 past the end), HEAD the headers only. Small blobs go out as
 * one buffer; larger ones are written by git into the connection itself when it is a plain one
 * and the whole blob is asked for (sendDirect), else streamed (a range skips git's first bytes).
 */
export async function sendBlob(
  ctx: AppContext,
  gitDir: string,
  info: { oid: string; size: number; type: string },
  disposition: string,
): Promise<void> {
  const object = { oid: info.oid, size: info.size, type: 'blob' as const };
  const etag = `"${info.oid}"`;
  ctx.set('ETag', etag);
  ctx.set('Cache-Control', 'max-age=0, private, must-revalidate, no-store, no-cache');
  ctx.set('Expires', 'Fri, 01 Jan 1990 00:00:00 GMT');
  ctx.set('Accept-Ranges', 'bytes');
  if (notModified(ctx, etag)) {
    ctx.status = 304;
    return;
  }
  const wanted = requestedRange(ctx, etag);
  const range = wanted && resolveRange(wanted, info.size);
  if (wanted && !range) {
    rangeNotSatisfiable(ctx, info.size);
    return;
  }

  // A large blob goes from git straight into the client's connection when it is a plain one.
  const socket = info.size > INLINE_BLOB_BYTES && !range ? directSocket(ctx) : null;
  let first: Buffer;
  if (info.size <= INLINE_BLOB_BYTES) {
    first = await readBlobContent(gitDir, object);
    ctx.body = range ? first.subarray(range.start, range.end + 1) : first;
  } else if (socket || ctx.method === 'HEAD') {
    first = await blobHead(gitDir, object);
  } else {
    const blob = streamBlob(gitDir, object);
    // The first chunk decides the type; it is put back in front of the rest.
    first = await firstChunk(blob.stream);
    if (first.length > 0) blob.stream.unshift(first);
    ctx.res.on('close', () => blob.kill());
    ctx.body = range ? sliceStream(blob.stream, range.start, range.end, blob.kill) : blob.stream;
  }
  const sniffed = sniffContent(first.subarray(0, 512));
  ctx.set('Content-Disposition', sniffed.inline ? disposition : disposition.replace(/^inline/, 'attachment'));
  ctx.type = sniffed.type;
  if (range) partialContent(ctx, range, info.size);
  else ctx.status = 200;
  ctx.length = range ? range.end - range.start + 1 : info.size;
  if (socket) await sendDirect(ctx, socket, (output) => writeBlobTo(gitDir, object, output));
}
