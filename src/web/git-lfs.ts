import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Middleware } from 'koa';
import { findProjectLfsObject, linkLfsObject } from '../db/queries/lfs.js';
import type { AppContext, AppState } from '../http/context.js';
import { readLimited } from '../lib/streams.js';
import { acquireWriteLease, READ_ONLY_MESSAGE } from '../services/write-leases.js';
import { authorizeGit, type GitAccess, GitHttpError } from './git-http.js';

/** `/<full path>.git/info/lfs/objects/batch|verify`, `/<full path>.git/gitlab-lfs/objects/<oid>[/<size>]`. */
const ROUTE =
  /^\/(.+?)\.git\/(?:info\/lfs\/objects\/(batch|verify)|gitlab-lfs\/objects\/([0-9a-f]{64})(?:\/(\d{1,15}))?)$/;
const LFS_TYPE = 'application/vnd.git-lfs+json';
const OID = /^[0-9a-f]{64}$/;
/** Seconds an action href stays valid for the client (it re-requests a batch after). */
const EXPIRES_IN = 3600;
const MAX_BATCH_BODY = 10 * 1024 * 1024;

interface LfsPointer {
  oid: string;
  size: number;
}

function lfsError(ctx: AppContext, status: number, message: string, challenge = false): void {
  ctx.status = status;
  ctx.type = LFS_TYPE;
  ctx.body = { message, documentation_url: `${ctx.state.deps.config.baseUrl}/help` };
  if (challenge) ctx.set('WWW-Authenticate', 'Basic realm="GitLab"');
}

async function readJson(ctx: AppContext): Promise<unknown> {
  const body = await readLimited(ctx.req, MAX_BATCH_BODY, () => new GitHttpError(413, 'Request body too large'));
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new GitHttpError(422, 'Unprocessable entity: the request body is not JSON');
  }
}

function pointers(value: unknown): LfsPointer[] | null {
  if (!Array.isArray(value)) return null;
  const out: LfsPointer[] = [];
  for (const item of value) {
    const { oid, size } = (item ?? {}) as { oid?: unknown; size?: unknown };
    if (typeof oid !== 'string' || typeof size !== 'number') return null;
    out.push({ oid, size });
  }
  return out;
}

/**
 * Runs an LFS write (an upload, a link) under a write lease: a storage move copies LFS objects,
 * so it waits for these as for pushes, and they are refused while it holds the repository.
 */
async function underLfsLease(ctx: AppContext, access: GitAccess, write: () => Promise<void>): Promise<void> {
  const lease = await acquireWriteLease(ctx.state.deps, access.project, 'lfs');
  if (!lease) throw new GitHttpError(403, READ_ONLY_MESSAGE);
  try {
    await write();
  } finally {
    await lease.release();
  }
}

/** Is the object stored for this project (database link and file with the right size)? */
async function stored(ctx: AppContext, access: GitAccess, pointer: LfsPointer): Promise<boolean> {
  const deps = ctx.state.deps;
  const row = await findProjectLfsObject(deps.db, access.project.id, pointer.oid);
  if (!row || Number(row.size) !== pointer.size) return false;
  const file = deps.storages.lfsObjectPath(access.project.repository_storage, pointer.oid);
  return fs.promises
    .stat(file)
    .then((s) => s.size === pointer.size)
    .catch(() => false);
}

async function batch(ctx: AppContext, fullPath: string): Promise<void> {
  const body = (await readJson(ctx)) as { operation?: unknown; objects?: unknown; transfers?: unknown };
  const operation = body.operation;
  const objects = pointers(body.objects);
  if ((operation !== 'download' && operation !== 'upload') || !objects) {
    throw new GitHttpError(422, 'Unprocessable entity: operation and objects are required');
  }
  if (Array.isArray(body.transfers) && body.transfers.length > 0 && !body.transfers.includes('basic')) {
    throw new GitHttpError(422, 'Unprocessable entity: only the basic transfer is supported');
  }
  const access = await authorizeGit(ctx, fullPath, operation === 'upload' ? 'git-receive-pack' : 'git-upload-pack');
  const base = `${ctx.state.deps.config.baseUrl}/${access.project.full_path}.git`;
  const authorization = ctx.get('Authorization');
  const header = authorization ? { Authorization: authorization } : {};
  const answers = [];
  for (const object of objects) {
    if (!OID.test(object.oid) || !Number.isSafeInteger(object.size) || object.size < 0) {
      answers.push({ ...object, error: { code: 422, message: 'Validation error: invalid oid or size' } });
      continue;
    }
    const have = await stored(ctx, access, object);
    if (operation === 'download') {
      answers.push(
        have
          ? {
              ...object,
              authenticated: true,
              actions: {
                download: { href: `${base}/gitlab-lfs/objects/${object.oid}`, header, expires_in: EXPIRES_IN },
              },
            }
          : {
              ...object,
              error: {
                code: 404,
                message: "Object does not exist on the server or you don't have permissions to access it",
              },
            },
      );
      continue;
    }
    // Upload: nothing to send when we hold it; a file another project uploaded is linked.
    if (have) {
      answers.push(object);
      continue;
    }
    const file = ctx.state.deps.storages.lfsObjectPath(access.project.repository_storage, object.oid);
    const size = await fs.promises.stat(file).then(
      (s) => s.size,
      () => -1,
    );
    if (size === object.size) {
      await underLfsLease(ctx, access, () =>
        linkLfsObject(ctx.state.deps.db, access.project.id, object.oid, object.size),
      );
      answers.push(object);
      continue;
    }
    answers.push({
      ...object,
      authenticated: true,
      actions: {
        upload: {
          href: `${base}/gitlab-lfs/objects/${object.oid}/${object.size}`,
          header: { ...header, 'Content-Type': 'application/octet-stream' },
          expires_in: EXPIRES_IN,
        },
        verify: { href: `${base}/info/lfs/objects/verify`, header, expires_in: EXPIRES_IN },
      },
    });
  }
  ctx.status = 200;
  ctx.type = LFS_TYPE;
  ctx.body = { transfer: 'basic', objects: answers };
}

async function verify(ctx: AppContext, fullPath: string): Promise<void> {
  const body = (await readJson(ctx)) as { oid?: unknown; size?: unknown };
  const access = await authorizeGit(ctx, fullPath, 'git-receive-pack');
  if (typeof body.oid !== 'string' || !OID.test(body.oid) || typeof body.size !== 'number') {
    throw new GitHttpError(422, 'Unprocessable entity: oid and size are required');
  }
  if (!(await stored(ctx, access, { oid: body.oid, size: body.size }))) {
    lfsError(ctx, 404, 'Not found.');
    return;
  }
  ctx.status = 200;
  ctx.type = LFS_TYPE;
  ctx.body = { message: 'Object verified.' };
}

async function download(ctx: AppContext, fullPath: string, oid: string): Promise<void> {
  const access = await authorizeGit(ctx, fullPath, 'git-upload-pack');
  const row = await findProjectLfsObject(ctx.state.deps.db, access.project.id, oid);
  const file = ctx.state.deps.storages.lfsObjectPath(access.project.repository_storage, oid);
  const stat = row ? await fs.promises.stat(file).catch(() => null) : null;
  if (!row || !stat) {
    lfsError(ctx, 404, 'Not found.');
    return;
  }
  ctx.status = 200;
  ctx.type = 'application/octet-stream';
  ctx.length = stat.size;
  ctx.body = fs.createReadStream(file);
}

/**
 * Stores an uploaded object: streamed to a temporary file beside its final place while its
 * SHA-256 and size are checked, then renamed into place (atomic) and linked to the project.
 */
async function upload(ctx: AppContext, fullPath: string, oid: string, size: number): Promise<void> {
  const access = await authorizeGit(ctx, fullPath, 'git-receive-pack');
  await underLfsLease(ctx, access, () => store(ctx, access, oid, size));
  ctx.status = 200;
  ctx.body = null;
}

async function store(ctx: AppContext, access: GitAccess, oid: string, size: number): Promise<void> {
  const deps = ctx.state.deps;
  const file = deps.storages.lfsObjectPath(access.project.repository_storage, oid);
  await fs.promises.mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  const hash = createHash('sha256');
  let received = 0;
  const check = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      if (received > size) return callback(new GitHttpError(400, 'The object is larger than its declared size'));
      hash.update(chunk);
      callback(null, chunk);
    },
  });
  try {
    await pipeline(ctx.req, check, fs.createWriteStream(temp, { mode: 0o644 }));
    if (received !== size || hash.digest('hex') !== oid) {
      throw new GitHttpError(400, 'The object does not match its oid and size');
    }
    await fs.promises.rename(temp, file);
  } catch (error) {
    await fs.promises.rm(temp, { force: true });
    throw error;
  }
  await linkLfsObject(deps.db, access.project.id, oid, size);
}

/** The Git LFS server (batch API, basic transfer) beside each repository's Git remote. */
export function gitLfs(): Middleware<AppState, AppContext> {
  return async (ctx, next) => {
    const match = ROUTE.exec(ctx.path);
    if (!match) return next();
    const [, fullPath, endpoint, oid, size] = match as unknown as [string, string, string?, string?, string?];
    try {
      if (endpoint === 'batch' && ctx.method === 'POST') return await batch(ctx, fullPath);
      if (endpoint === 'verify' && ctx.method === 'POST') return await verify(ctx, fullPath);
      if (oid && size === undefined && (ctx.method === 'GET' || ctx.method === 'HEAD')) {
        return await download(ctx, fullPath, oid);
      }
      if (oid && size !== undefined && ctx.method === 'PUT') return await upload(ctx, fullPath, oid, Number(size));
      return next();
    } catch (error) {
      if (!(error instanceof GitHttpError)) throw error;
      lfsError(ctx, error.status, error.message, error.challenge);
    }
  };
}
