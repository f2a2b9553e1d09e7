import { Readable } from 'node:stream';
import { MAX_BATCH_OBJECT_BYTES, type ObjectInfo, objectInfo, readObject } from './catfile.js';
import { streamGit } from './command.js';

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
 * The content of a blob as a stream with back-pressure: small blobs from the pooled batch
 * process, large ones from a dedicated `git cat-file blob` so memory does not grow with size.
 */
export async function streamBlob(gitDir: string, info: ObjectInfo): Promise<BlobStream> {
  if (info.size <= INLINE_BLOB_BYTES && info.size <= MAX_BATCH_OBJECT_BYTES) {
    const object = await readObject(gitDir, info.oid);
    return { info, stream: Readable.from([object?.data ?? Buffer.alloc(0)]), kill: () => {} };
  }
  const git = streamGit({ gitDir, subcommand: 'cat-file', args: ['blob', info.oid] });
  git.done.catch((error: Error) => git.stdout.destroy(error));
  return { info, stream: git.stdout, kill: git.kill };
}

/** Reads a whole blob (for JSON answers); the caller bounds the size. */
export async function readBlob(gitDir: string, oid: string): Promise<Buffer | null> {
  const object = await readObject(gitDir, oid);
  return object && object.type === 'blob' ? object.data : null;
}
