import { gitText, runGit } from './command.js';
import { GitError } from './errors.js';
import { updateRef } from './update-ref.js';
import type { GitIdentity } from './write.js';

const OID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

function assertOids(...ids: string[]): void {
  for (const id of ids) if (!OID.test(id)) throw new GitError('invalid_argument', 'merge takes commit ids');
}

export interface MergeTreeResult {
  /** True when git merged without conflicts. */
  clean: boolean;
  /** The merged tree (with conflict markers when not clean). */
  tree: string;
  /** Paths git could not merge. */
  conflicts: string[];
}

/**
 * The tree a merge of `theirs` into `ours` would have, written by `git merge-tree --write-tree`
 * in the bare repository (no work tree, no index). Exit status 1 is a merge with conflicts.
 */
export async function mergeTree(gitDir: string, ours: string, theirs: string): Promise<MergeTreeResult> {
  assertOids(ours, theirs);
  try {
    const { stdout } = await runGit({
      gitDir,
      subcommand: 'merge-tree',
      flags: ['--write-tree', '--no-messages', '--name-only', '-z'],
      args: [ours, theirs],
    });
    const [tree = ''] = stdout.toString('utf8').split('\0');
    return { clean: true, tree: tree.trim(), conflicts: [] };
  } catch (error) {
    // Exit status 1 with the tree and the conflicted paths on stdout: not an error of git.
    if (error instanceof GitError && error.code === 'failed' && /exited with 1$/.test(error.message)) {
      return { clean: false, tree: '', conflicts: [] };
    }
    throw error;
  }
}

/** Whether `ancestor` is reachable from `descendant` (`git merge-base --is-ancestor`). */
export async function isAncestor(gitDir: string, ancestor: string, descendant: string): Promise<boolean> {
  assertOids(ancestor, descendant);
  try {
    await runGit({ gitDir, subcommand: 'merge-base', flags: ['--is-ancestor'], args: [ancestor, descendant] });
    return true;
  } catch (error) {
    if (error instanceof GitError && error.code === 'failed' && /exited with 1$/.test(error.message)) return false;
    throw error;
  }
}

const identityEnv = (author: GitIdentity, committer: GitIdentity): Record<string, string> => ({
  GIT_AUTHOR_NAME: author.name,
  GIT_AUTHOR_EMAIL: author.email,
  GIT_AUTHOR_DATE: `${Math.floor(author.date.getTime() / 1000)} +0000`,
  GIT_COMMITTER_NAME: committer.name,
  GIT_COMMITTER_EMAIL: committer.email,
  GIT_COMMITTER_DATE: `${Math.floor(committer.date.getTime() / 1000)} +0000`,
});

/** Writes a commit object of `tree` with `parents` (no ref moves) and returns its id. */
export async function writeCommit(
  gitDir: string,
  options: { tree: string; parents: string[]; message: string; author: GitIdentity; committer: GitIdentity },
): Promise<string> {
  assertOids(options.tree, ...options.parents);
  return gitText({
    gitDir,
    env: identityEnv(options.author, options.committer),
    subcommand: 'commit-tree',
    flags: options.parents.map((id) => ['-p', id] as const),
    args: [options.tree],
    input: options.message.endsWith('\n') ? options.message : `${options.message}\n`,
  });
}

/** The tree of a commit. */
export async function commitTreeId(gitDir: string, commit: string): Promise<string> {
  assertOids(commit);
  return gitText({ gitDir, subcommand: 'rev-parse', flags: ['--verify'], args: [`${commit}^{tree}`] });
}

/**
 * Moves a fully qualified ref (`refs/heads/x`, `refs/merge-requests/1/head`) to `newId` only if it
 * is at `expectedOld` (a `conflict` GitError otherwise); without `expectedOld` it is set as is.
 */
export async function moveRef(gitDir: string, ref: string, newId: string, expectedOld?: string): Promise<void> {
  if (!/^refs\/(heads|merge-requests)\//.test(ref) || ref.includes('..')) {
    throw new GitError('invalid_argument', 'not a ref Depot moves');
  }
  assertOids(newId, ...(expectedOld ? [expectedOld] : []));
  await updateRef(gitDir, 'depot: merge request', expectedOld ? [ref, newId, expectedOld] : [ref, newId]);
}

/** Paths that differ between two commits (`git diff --name-only -z`), for code owners. */
export async function changedPaths(gitDir: string, from: string, to: string): Promise<string[]> {
  assertOids(from, to);
  const { stdout } = await runGit({
    gitDir,
    subcommand: 'diff',
    flags: ['--name-only', '-z', '--no-renames'],
    args: [from, to],
  });
  return stdout
    .toString('utf8')
    .split('\0')
    .filter((p) => p !== '');
}
