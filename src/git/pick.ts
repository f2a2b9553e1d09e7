import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { readObject } from './catfile.js';
import { checkGitVersion, gitText, streamGit } from './command.js';
import { type Commit, parseCommitObject, type Signature } from './commit.js';
import { GitError } from './errors.js';
import { updateRef } from './update-ref.js';
import { isValidBranchName } from './validate.js';

/**
 * Cherry-pick and revert computed in the bare repository: a three-way merge of trees with
 * `git merge-tree --write-tree` (no work tree, no index), then `git commit-tree`. Git 2.40 took
 * `--merge-base`; on older git (2.39, Debian 12) the same merge is asked with two throw-away
 * commits whose only parent is the base, so that it is their one merge base.
 */

/** Why a pick or revert could not be made, as GitLab's `error_code`. */
export type PickFailure = 'conflict' | 'empty';

export class PickError extends GitError {
  constructor(readonly reason: PickFailure) {
    super('invalid_argument', reason === 'conflict' ? 'the change does not apply' : 'the change is already there');
  }
}

export interface PickPlan {
  /** The commit whose tree is the merge base, or null for the empty tree (a root commit). */
  base: string | null;
  /** The tree the change is taken to (the change is base → theirs). */
  theirsTree: string;
  /** An existing commit with tree `theirsTree` and `base` as its only parent, if there is one. */
  theirsCommit?: string | undefined;
}

/** The plan of `git cherry-pick` (mainline 1 for merges): the change parent → commit. */
export function cherryPickPlan(commit: Commit): PickPlan {
  const base = commit.parentIds[0] ?? null;
  const direct = commit.parentIds.length === 1 || (base === null && commit.parentIds.length === 0);
  return { base, theirsTree: commit.tree, ...(direct ? { theirsCommit: commit.id } : {}) };
}

/** The plan of `git revert` (mainline 1 for merges): the change commit → parent. */
export async function revertPlan(gitDir: string, commit: Commit): Promise<PickPlan> {
  const parent = commit.parentIds[0];
  if (!parent) return { base: commit.id, theirsTree: await emptyTree(gitDir) };
  // Through the cat-file pool: no git process for the parent's tree.
  const object = await readObject(gitDir, parent);
  if (!object) throw new GitError('not_found', 'parent commit missing');
  return { base: commit.id, theirsTree: parseCommitObject(parent, object.data).tree };
}

async function emptyTree(gitDir: string): Promise<string> {
  return gitText({ gitDir, subcommand: 'mktree', input: '' });
}

let mergeBaseOption: Promise<boolean> | undefined;

/** Whether this git's merge-tree takes `--merge-base` (git 2.40 and newer). */
function hasMergeBaseOption(): Promise<boolean> {
  mergeBaseOption ??= checkGitVersion()
    .then((version) => {
      const [major, minor] = version.split('.').map(Number) as [number, number];
      return major > 2 || (major === 2 && minor >= 40);
    })
    .catch(() => false);
  return mergeBaseOption;
}

/** For tests and benchmarks: force the path taken on git without `--merge-base`. */
export function useMergeBaseOption(value: boolean | undefined): void {
  mergeBaseOption = value === undefined ? undefined : Promise.resolve(value);
}

const FIXED_IDENTITY = {
  GIT_AUTHOR_NAME: 'Depot',
  GIT_AUTHOR_EMAIL: 'depot@localhost',
  GIT_AUTHOR_DATE: '946684800 +0000',
  GIT_COMMITTER_NAME: 'Depot',
  GIT_COMMITTER_EMAIL: 'depot@localhost',
  GIT_COMMITTER_DATE: '946684800 +0000',
};

/**
 * A commit of `tree` on `parent` that only serves as a merge side (fixed identity and date),
 * written as a loose object directly: the same bytes `git commit-tree` would write, without a
 * process (this runs on every pick on git without `--merge-base`). The object format follows
 * the tree id's length (SHA-1 or SHA-256).
 */
async function sideCommit(gitDir: string, tree: string, parent: string | null): Promise<string> {
  const identity = `${FIXED_IDENTITY.GIT_AUTHOR_NAME} <${FIXED_IDENTITY.GIT_AUTHOR_EMAIL}> ${FIXED_IDENTITY.GIT_AUTHOR_DATE}`;
  const body = Buffer.from(
    `tree ${tree}\n${parent ? `parent ${parent}\n` : ''}author ${identity}\ncommitter ${identity}\n\nmerge side\n`,
  );
  const object = Buffer.concat([Buffer.from(`commit ${body.length}\0`), body]);
  const id = createHash(tree.length === 64 ? 'sha256' : 'sha1')
    .update(object)
    .digest('hex');
  const dir = path.join(gitDir, 'objects', id.slice(0, 2));
  const file = path.join(dir, id.slice(2));
  if (
    await fs.stat(file).then(
      () => true,
      () => false,
    )
  )
    return id;
  // Not recursive (objects/ is there): Node's recursive mkdir reports a read-only filesystem as
  // ENOENT, which would hide the storage fault from the error mapping.
  await fs.mkdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  const temporary = path.join(dir, `tmp_obj_${process.pid}_${randomBytes(6).toString('hex')}`);
  try {
    await fs.writeFile(temporary, deflateSync(object), { mode: 0o444 });
    await fs.rename(temporary, file);
  } catch (error) {
    // A full storage: leave no half-written object file behind.
    await fs.rm(temporary, { force: true });
    throw error;
  }
  return id;
}

const TREE_LINE = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

/** Runs merge-tree and reads its first line: the tree, written even when files conflict. */
async function mergeTree(gitDir: string, flags: (string | readonly [string, string])[], ours: string, theirs: string) {
  const git = streamGit({
    gitDir,
    subcommand: 'merge-tree',
    flags: ['--write-tree', '--no-messages', ...flags],
    args: [ours, theirs],
  });
  const chunks: Buffer[] = [];
  for await (const chunk of git.stdout as AsyncIterable<Buffer>) chunks.push(chunk);
  const tree = Buffer.concat(chunks).toString('utf8').split('\n', 1)[0] ?? '';
  try {
    await git.done;
    return { tree, conflicted: false };
  } catch (error) {
    // Exit status 1 with a tree on stdout: the merge is done and some files conflict.
    if (error instanceof GitError && error.code === 'failed' && TREE_LINE.test(tree)) return { tree, conflicted: true };
    throw error;
  }
}

/**
 * Applies the plan's change on `oursCommit` (whose tree is `oursTree`) and returns the merged
 * tree, or throws PickError: `conflict` when files conflict, `empty` when nothing changes.
 */
export async function pickTree(gitDir: string, oursCommit: string, oursTree: string, plan: PickPlan): Promise<string> {
  let result: { tree: string; conflicted: boolean };
  if (plan.base !== null && (await hasMergeBaseOption())) {
    const theirs = plan.theirsCommit ?? (await sideCommit(gitDir, plan.theirsTree, plan.base));
    result = await mergeTree(gitDir, [`--merge-base=${plan.base}`], oursCommit, theirs);
  } else {
    const [ours, theirs] = await Promise.all([
      sideCommit(gitDir, oursTree, plan.base),
      plan.theirsCommit ?? sideCommit(gitDir, plan.theirsTree, plan.base),
    ]);
    const flags = plan.base === null ? ['--allow-unrelated-histories'] : [];
    result = await mergeTree(gitDir, flags, ours, theirs);
  }
  if (result.conflicted) throw new PickError('conflict');
  if (result.tree === oursTree) throw new PickError('empty');
  return result.tree;
}

/** `@<seconds> <±hhmm>`: a signature's date as git reads it back unchanged. */
export function gitDate(sig: Pick<Signature, 'time' | 'tzMinutes'>): string {
  const sign = sig.tzMinutes < 0 ? '-' : '+';
  const abs = Math.abs(sig.tzMinutes);
  return `${sig.time} ${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}${String(abs % 60).padStart(2, '0')}`;
}

export interface PickIdentity {
  name: string;
  email: string;
  /** Seconds since the epoch and offset, as in a commit. */
  time: number;
  tzMinutes: number;
}

/** Writes the commit of `tree` on `parent` (no ref moves). */
export function writePickCommit(
  gitDir: string,
  options: { tree: string; parent: string; message: string; author: PickIdentity; committer: PickIdentity },
): Promise<string> {
  return gitText({
    gitDir,
    env: {
      GIT_AUTHOR_NAME: options.author.name,
      GIT_AUTHOR_EMAIL: options.author.email,
      GIT_AUTHOR_DATE: gitDate(options.author),
      GIT_COMMITTER_NAME: options.committer.name,
      GIT_COMMITTER_EMAIL: options.committer.email,
      GIT_COMMITTER_DATE: gitDate(options.committer),
    },
    subcommand: 'commit-tree',
    flags: [['-p', options.parent]],
    args: [options.tree],
    input: options.message,
  });
}

/** Moves `branch` from `expectedOld` to `commit`; a concurrent move is a `conflict` GitError. */
export async function moveBranch(gitDir: string, branch: string, commit: string, expectedOld: string): Promise<void> {
  if (!isValidBranchName(branch)) throw new GitError('invalid_argument', 'invalid branch name');
  await updateRef(gitDir, 'depot: pick', [`refs/heads/${branch}`, commit, expectedOld]);
}
