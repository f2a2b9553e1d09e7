import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { findProjectLfsObject } from '../db/queries/lfs.js';
import type { Project } from '../db/schema.js';
import { blobSha256, LFS_POINTER_MAX_BYTES, parseLfsPointer, readBlobContent } from '../git/blob.js';
import { objectInfo, readObject } from '../git/catfile.js';
import { listCommits } from '../git/log.js';
import { resolveCommitId } from '../git/refs.js';
import { readTreeEntry } from '../git/tree.js';
import { notFound } from '../http/errors.js';
import type { Deps } from './deps.js';

/** A file found at a ref: what GitLab's `assign_file_vars!` loads. */
export interface RepositoryFile {
  /** The ref as the caller wrote it (null when the default branch was used). */
  ref: string | null;
  commitId: string;
  path: string;
  name: string;
  blobId: string;
  size: number;
  executable: boolean;
}

/** A file with the metadata GitLab's `blob_data` adds (and the content, when asked). */
export interface RepositoryFileDetails extends RepositoryFile {
  contentSha256: string;
  lastCommitId: string;
  content?: Buffer;
}

/**
 * The blob at `path` in `ref` (the default branch when null): `404 Commit Not Found` for a ref
 * that names no commit, `404 File Not Found` for a path that is not a file there. Directories
 * and submodules are not files; symlinks are (their content is the link target).
 */
export async function findRepositoryFile(
  gitDir: string,
  project: Pick<Project, 'default_branch'>,
  ref: string | null,
  path: string,
): Promise<RepositoryFile> {
  const rev = ref ?? project.default_branch;
  const commitId = rev ? await resolveCommitId(gitDir, rev) : null;
  if (!commitId) throw notFound('Commit');
  const entry = await readTreeEntry(gitDir, commitId, path);
  if (entry?.type !== 'blob') throw notFound('File');
  const info = await objectInfo(gitDir, entry.id);
  if (!info) throw notFound('File');
  return {
    ref,
    commitId,
    path,
    name: entry.name,
    blobId: entry.id,
    size: info.size,
    executable: entry.mode === '100755',
  };
}

/**
 * Adds the content's SHA-256 and the last commit that touched the path (git log with a literal
 * pathspec, as GitLab's last_commit_id_for_path). `withContent` also returns the bytes.
 */
export async function describeRepositoryFile(
  gitDir: string,
  file: RepositoryFile,
  withContent: boolean,
): Promise<RepositoryFileDetails> {
  const info = { oid: file.blobId, type: 'blob' as const, size: file.size };
  const [content, last] = await Promise.all([
    withContent ? readBlobContent(gitDir, info) : Promise.resolve(undefined),
    listCommits(gitDir, { include: [file.commitId], paths: [file.path], maxCount: 1 }),
  ]);
  const contentSha256 = content ? createHash('sha256').update(content).digest('hex') : await blobSha256(gitDir, info);
  return { ...file, contentSha256, lastCommitId: last[0]?.id ?? file.commitId, ...(content ? { content } : {}) };
}

/** An LFS object on disk, ready to be sent. */
export interface StoredLfsObject {
  oid: string;
  size: number;
  path: string;
}

/**
 * The stored LFS object a pointer file names, when the file is a pointer. Null when it is an
 * ordinary file (it is then served as it is); GitLab's bare `404 Not Found` when it is a pointer
 * whose object this project may not read or that is missing from storage.
 */
export async function findLfsObjectForFile(
  deps: Deps,
  project: Project,
  gitDir: string,
  file: RepositoryFile,
): Promise<StoredLfsObject | null> {
  if (file.size > LFS_POINTER_MAX_BYTES) return null;
  const blob = await readObject(gitDir, file.blobId);
  const pointer = blob ? parseLfsPointer(blob.data) : null;
  if (!pointer) return null;
  const row = await findProjectLfsObject(deps.db, project.id, pointer.oid);
  if (!row) throw notFound();
  const path = deps.storages.lfsObjectPath(project.repository_storage, pointer.oid);
  const stat = await fs.stat(path).catch(() => null);
  if (!stat?.isFile()) throw notFound();
  return { oid: pointer.oid, size: stat.size, path };
}
