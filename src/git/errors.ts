import { constants as fsConstants, statfsSync } from 'node:fs';
import { access, statfs } from 'node:fs/promises';
import path from 'node:path';

/** Errors of the repository engine. Git's stderr is classified here and nowhere else. */
export type GitErrorCode =
  | 'not_found'
  | 'invalid_argument'
  | 'timeout'
  | 'repository_missing'
  | 'conflict'
  | 'git_missing'
  | 'storage_read_only'
  | 'storage_full'
  | 'failed';

export class GitError extends Error {
  constructor(
    readonly code: GitErrorCode,
    message: string,
    /** Raw stderr, for logs only: never sent to clients. */
    readonly stderr = '',
  ) {
    super(message);
  }
}

export class InvalidArgumentError extends GitError {
  constructor(message: string) {
    super('invalid_argument', message);
  }
}

/**
 * A ref could not be created because its name clashes with an existing ref's path (`a` exists,
 * `a/b` wanted, or the other way round). Still a `conflict`, for callers that do not care.
 */
export class RefNameConflictError extends GitError {
  constructor(stderr: string) {
    super('conflict', 'reference name conflicts with an existing reference', stderr);
  }
}

/**
 * A ref update found git's lock file for the ref already there: another writer holds it, or one
 * that died holding it left it behind. Still a `conflict`, for callers that do not care.
 */
export class RefLockedError extends GitError {
  constructor(
    readonly lockPath: string,
    stderr: string,
  ) {
    super('conflict', 'reference is locked', stderr);
  }
}

const NOT_FOUND_PATTERNS = [
  /unknown revision or path not in the working tree/,
  /bad revision/,
  /not a valid object name/i,
  /Not a valid object name/,
  /does not exist in/,
  /not a tree object/,
  /bad object/,
  /invalid object name/,
  /could not get object info/,
  /ambiguous argument/,
];

/** What a failed write says when its filesystem refuses it (git runs in the C locale: strerror's English). */
const READ_ONLY_PATTERN = /Read-only file system/;
const FULL_PATTERN = /No space left on device|Disk quota exceeded/;

/**
 * A failed write whose message names the file but not the reason: git's ref backend says only
 * "couldn't write '<lock>'" when a write (not the open) fails, which is how a full disk shows.
 */
const WRITE_FAILED_AT = /couldn't write '([^']+)'/;
/** Below this much free space where a write failed, the storage counts as full. */
const FULL_BELOW_BYTES = 64 * 1024;

/** Whether the filesystem holding `file` has (next to) no space left for this process. */
function outOfSpaceAt(file: string): boolean {
  try {
    const stats = statfsSync(path.dirname(file));
    // root may use the blocks reserved for it; others only the available ones.
    const blocks = process.getuid?.() === 0 ? stats.bfree : stats.bavail;
    return blocks * stats.bsize < FULL_BELOW_BYTES;
  } catch {
    return false;
  }
}

/** Turns a failed git run into a typed error. */
export function classifyGitFailure(args: readonly string[], exitCode: number | null, stderr: string): GitError {
  // A storage that refuses writes is the cause, whatever else git went on to complain about.
  if (READ_ONLY_PATTERN.test(stderr))
    return new GitError('storage_read_only', 'repository storage is read-only', stderr);
  if (FULL_PATTERN.test(stderr)) return new GitError('storage_full', 'repository storage is full', stderr);
  const unwritten = WRITE_FAILED_AT.exec(stderr)?.[1];
  if (unwritten && outOfSpaceAt(unwritten)) return new GitError('storage_full', 'repository storage is full', stderr);
  if (/not a git repository/i.test(stderr)) {
    return new GitError('repository_missing', 'repository not found', stderr);
  }
  if (NOT_FOUND_PATTERNS.some((re) => re.test(stderr))) {
    return new GitError('not_found', 'object not found', stderr);
  }
  if (/' exists; cannot create '/.test(stderr)) return new RefNameConflictError(stderr);
  const lock = /Unable to create '([^']+\.lock)': File exists/.exec(stderr);
  if (lock) return new RefLockedError(lock[1] as string, stderr);
  if (/cannot lock ref|is at [0-9a-f]+ but expected|reference already exists/.test(stderr)) {
    return new GitError('conflict', 'reference changed concurrently', stderr);
  }
  return new GitError('failed', `git ${args[0] ?? ''} exited with ${exitCode}`, stderr);
}

/** errno codes of a filesystem that refuses writes. */
const READ_ONLY_ERRNO = new Set(['EROFS']);
const FULL_ERRNO = new Set(['ENOSPC', 'EDQUOT']);

/**
 * Whether `error` (a git failure, or a Node fs error, possibly as the `cause` of another) means
 * the storage refuses writes: mounted read-only, or out of space or quota. Undefined otherwise.
 */
export function storageFault(error: unknown): 'read_only' | 'full' | undefined {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof GitError) {
      if (e.code === 'storage_read_only') return 'read_only';
      if (e.code === 'storage_full') return 'full';
    }
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (READ_ONLY_ERRNO.has(code)) return 'read_only';
      if (FULL_ERRNO.has(code)) return 'full';
    }
  }
  return undefined;
}

/**
 * Asks the filesystem holding `target` (or, when it does not exist yet, the directory it would be
 * made in) whether it would take a write now, without writing: access(2)
 * answers EROFS on a read-only mount (even for root), statfs tells the space left. For a push,
 * which otherwise fails deep inside git with a vaguer message.
 */
export async function probeStorageWrites(target: string): Promise<'read_only' | 'full' | undefined> {
  // The nearest directory that exists: where the first write would go.
  let dir = target;
  while (
    !(await access(dir).then(
      () => true,
      () => false,
    ))
  ) {
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
  try {
    await access(dir, fsConstants.W_OK);
  } catch (error) {
    const fault = storageFault(error);
    if (fault) return fault;
  }
  try {
    const stats = await statfs(dir);
    const blocks = process.getuid?.() === 0 ? stats.bfree : stats.bavail;
    if (blocks * stats.bsize < FULL_BELOW_BYTES) return 'full';
  } catch {
    // no answer: let the write itself tell
  }
  return undefined;
}
