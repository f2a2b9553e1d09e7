import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { MAX_BATCH_OBJECT_BYTES, type ObjectInfo, objectInfo, readObject } from './catfile.js';
import { type GitStream, streamGit } from './command.js';

/** Blobs up to this size are served from the batch process in one piece; larger ones stream. */
export const INLINE_BLOB_BYTES = 1024 * 1024;

export interface BlobStream {
  info: ObjectInfo;
  stream: Readable;
  kill(): void;
}

/** Looks up a blob by id or revision path (`<commit>:<path>`); null when it is not a blob. */
export async function blobInfo(gitDir: string, rev: string): Promise<ObjectInfo | null> {
  const info = await objectInfo(gitDir, rev);
  return info && info.type === 'blob' ? info : null;
}

/**
 * git streams a packed blob only when it is larger than core.bigFileThreshold (512 MiB by
 * default); below that it inflates the whole blob in memory first. Lowering the threshold for
 * this one command makes every blob we stream go through git's streaming reader.
 */
export const STREAM_CONFIG = { 'core.bigFileThreshold': `${INLINE_BLOB_BYTES}` };

/**
 * The content of a blob as a stream with back-pressure, from a dedicated `git cat-file blob`, so
 * memory does not grow with size (small blobs are read whole: readBlobContent).
 */
export function streamBlob(gitDir: string, info: ObjectInfo): BlobStream {
  const git = catBlob(gitDir, info);
  git.done.catch((error: Error) => git.stdout.destroy(error));
  return { info, stream: git.stdout, kill: git.kill };
}

/** Runs `git cat-file blob` with its stdout on `socket`: git writes the content to the client itself. */
export function writeBlobTo(gitDir: string, info: ObjectInfo, socket: Socket): GitStream {
  return catBlob(gitDir, info, socket);
}

/** `git cat-file blob` through git's streaming reader, to a pipe or to `output`. */
function catBlob(gitDir: string, info: ObjectInfo, output?: Socket): GitStream {
  return streamGit({ gitDir, subcommand: 'cat-file', config: STREAM_CONFIG, args: ['blob', info.oid], output });
}

/** The first bytes of a blob (one read of git's output, up to 64 KiB), to tell its type; git is stopped then. */
export async function blobHead(gitDir: string, info: ObjectInfo): Promise<Buffer> {
  const blob = streamBlob(gitDir, info);
  try {
    return await firstChunk(blob.stream);
  } finally {
    blob.kill();
    blob.stream.destroy();
  }
}

/** The first chunk a stream gives (empty when it ends at once), left for the caller to put back. */
export function firstChunk(reader: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const onReadable = () => {
      const chunk = reader.read() as Buffer | null;
      if (chunk === null) return;
      cleanup();
      resolve(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.alloc(0));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const cleanup = () => {
      reader.off('readable', onReadable);
      reader.off('end', onEnd);
      reader.off('error', onError);
    };
    reader.on('readable', onReadable);
    reader.on('end', onEnd);
    reader.on('error', onError);
    onReadable();
  });
}

/** Reads a whole blob (for JSON answers); the caller bounds the size. */
export async function readBlob(gitDir: string, oid: string): Promise<Buffer | null> {
  const object = await readObject(gitDir, oid);
  return object && object.type === 'blob' ? object.data : null;
}

/** GitLab reads at most this much of a blob to tell an LFS pointer (Gitlab::Git::Blob::LFS_POINTER_MAX_SIZE). */
export const LFS_POINTER_MAX_BYTES = 200;

/** The object a Git LFS pointer file names, or null when the content is not a pointer. */
export function parseLfsPointer(content: Buffer): { oid: string; size: number } | null {
  if (content.length > LFS_POINTER_MAX_BYTES) return null;
  const text = content.toString('utf8');
  if (!text.startsWith('version https://git-lfs.github.com/spec')) return null;
  const oid = /sha256:([0-9a-f]{64})/.exec(text)?.[1];
  const size = /size ([0-9]+)/.exec(text)?.[1];
  return oid && size ? { oid, size: Number(size) } : null;
}

/**
 * A blob's content in pieces: in one piece from the pooled batch process up to `wholeUpTo` bytes,
 * else streamed from its own `git cat-file blob`.
 */
async function* blobChunks(gitDir: string, info: ObjectInfo, wholeUpTo: number): AsyncGenerator<Buffer> {
  if (info.size <= wholeUpTo) {
    const object = await readObject(gitDir, info.oid);
    yield object?.data ?? Buffer.alloc(0);
    return;
  }
  for await (const chunk of streamBlob(gitDir, info).stream) yield chunk as Buffer;
}

/** The whole content of a blob: from the pooled batch process when it fits, else streamed. */
export async function readBlobContent(gitDir: string, info: ObjectInfo): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of blobChunks(gitDir, info, MAX_BATCH_OBJECT_BYTES)) chunks.push(chunk);
  // One piece (the batch process's) is returned as it is, not copied.
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
}

/** SHA-256 (hex) of a blob's content, streamed past INLINE_BLOB_BYTES. */
export async function blobSha256(gitDir: string, info: ObjectInfo): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of blobChunks(gitDir, info, INLINE_BLOB_BYTES)) hash.update(chunk);
  return hash.digest('hex');
}
