/** Errors of the repository engine. Git's stderr is classified here and nowhere else. */
export type GitErrorCode =
  | 'not_found'
  | 'invalid_argument'
  | 'timeout'
  | 'repository_missing'
  | 'conflict'
  | 'git_missing'
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

/** Turns a failed git run into a typed error. */
export function classifyGitFailure(args: readonly string[], exitCode: number | null, stderr: string): GitError {
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
