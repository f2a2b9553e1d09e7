import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gitText, runGit } from './command.js';
import { GitError } from './errors.js';
import { updateRef } from './update-ref.js';
import { isValidBranchName, isValidRepoPath } from './validate.js';

export const ZERO_OID = '0000000000000000000000000000000000000000';

export interface GitIdentity {
  name: string;
  email: string;
  date: Date;
}

export interface FileWrite {
  path: string;
  content: Buffer;
  /** `100644` (default) or `100755`. */
  mode?: '100644' | '100755';
}

const identityEnv = (author: GitIdentity, committer: GitIdentity): Record<string, string> => ({
  GIT_AUTHOR_NAME: author.name,
  GIT_AUTHOR_EMAIL: author.email,
  GIT_AUTHOR_DATE: `${Math.floor(author.date.getTime() / 1000)} +0000`,
  GIT_COMMITTER_NAME: committer.name,
  GIT_COMMITTER_EMAIL: committer.email,
  GIT_COMMITTER_DATE: `${Math.floor(committer.date.getTime() / 1000)} +0000`,
});

/**
 * Writes files on top of `parent` (or an empty tree) as one commit and moves `branch` to it
 * with a compare-and-swap ref update: it fails with a `conflict` GitError if the branch moved.
 * Returns the new commit id.
 */
export async function commitFiles(
  gitDir: string,
  options: {
    branch: string;
    parent: string | null;
    files: FileWrite[];
    message: string;
    author: GitIdentity;
    committer?: GitIdentity;
  },
): Promise<string> {
  if (!isValidBranchName(options.branch)) throw new GitError('invalid_argument', 'invalid branch name');
  const indexFile = path.join(os.tmpdir(), `depot-index-${randomBytes(8).toString('hex')}`);
  const env = { GIT_INDEX_FILE: indexFile };
  try {
    if (options.parent) {
      await runGit({ gitDir, env, subcommand: 'read-tree', args: [`${options.parent}^{tree}`], endOfOptions: true });
    } else {
      await runGit({ gitDir, env, subcommand: 'read-tree', flags: ['--empty'] });
    }
    const entries: string[] = [];
    for (const file of options.files) {
      if (!isValidRepoPath(file.path)) throw new GitError('invalid_argument', 'invalid file path');
      const blob = await gitText({ gitDir, subcommand: 'hash-object', flags: ['-w', '--stdin'], input: file.content });
      entries.push(`${file.mode ?? '100644'} ${blob}\t${file.path}\0`);
    }
    // --index-info reads NUL-terminated entries, so any file name passes through unchanged.
    await runGit({ gitDir, env, subcommand: 'update-index', flags: ['-z', '--index-info'], input: entries.join('') });
    const tree = await gitText({ gitDir, env, subcommand: 'write-tree' });
    const committer = options.committer ?? options.author;
    const commit = await gitText({
      gitDir,
      env: identityEnv(options.author, committer),
      subcommand: 'commit-tree',
      flags: options.parent ? [['-p', options.parent]] : [],
      args: [tree],
      input: options.message,
    });
    await updateRef(gitDir, 'depot: commit', [`refs/heads/${options.branch}`, commit, options.parent ?? ZERO_OID]);
    return commit;
  } finally {
    await fs.rm(indexFile, { force: true });
  }
}

/** One change of GitLab's commits API, with content already decoded. */
export type FileAction =
  | { action: 'create' | 'update'; path: string; content: Buffer; executable?: boolean }
  | { action: 'delete'; path: string }
  | { action: 'move'; path: string; previousPath: string; content: Buffer | null }
  | { action: 'chmod'; path: string; executable: boolean };

/** Why an action cannot apply, in Gitaly's words (GitLab answers them as 400 messages). */
export class ActionError extends GitError {
  constructor(message: string) {
    super('invalid_argument', message);
  }
}

interface IndexEntry {
  mode: string;
  oid: string;
}

/** Every file of the tree (`ls-tree -r`, so no directories), by path. */
async function readTreeEntries(gitDir: string, treeish: string): Promise<Map<string, IndexEntry>> {
  const out = await runGit({
    gitDir,
    subcommand: 'ls-tree',
    flags: ['-r', '-z', '--full-tree'],
    args: [treeish],
    endOfOptions: true,
  });
  const entries = new Map<string, IndexEntry>();
  for (const record of out.stdout.toString('utf8').split('\0')) {
    if (!record) continue;
    const tab = record.indexOf('\t');
    const [mode, , oid] = record.slice(0, tab).split(' ') as [string, string, string];
    entries.set(record.slice(tab + 1), { mode, oid });
  }
  return entries;
}

/** Does `file` clash with an existing file or directory (`a` vs `a/b`)? */
function clashes(entries: Map<string, IndexEntry>, file: string): string | null {
  if (entries.has(file)) return 'A file with this name already exists';
  const parts = file.split('/');
  for (let i = 1; i < parts.length; i++) {
    if (entries.has(parts.slice(0, i).join('/'))) return 'A file with this name already exists';
  }
  const prefix = `${file}/`;
  for (const name of entries.keys()) if (name.startsWith(prefix)) return 'A directory with this name already exists';
  return null;
}

/**
 * Applies actions on top of `parent`'s files (or nothing), writes the result through a scratch
 * index and returns the new tree id, or throws ActionError with GitLab's message when an action
 * does not fit the tree. Three git commands whatever the number of files, and one per content.
 */
export async function treeWithActions(gitDir: string, parent: string | null, actions: FileAction[]): Promise<string> {
  const indexFile = path.join(os.tmpdir(), `depot-index-${randomBytes(8).toString('hex')}`);
  const env = { GIT_INDEX_FILE: indexFile };
  try {
    const entries = parent ? await readTreeEntries(gitDir, `${parent}^{tree}`) : new Map<string, IndexEntry>();
    const hash = (content: Buffer) =>
      gitText({ gitDir, subcommand: 'hash-object', flags: ['-w', '--stdin'], input: content });
    const modeFor = (executable: boolean | undefined, previous?: IndexEntry) =>
      executable === undefined ? (previous?.mode ?? '100644') : executable ? '100755' : '100644';
    for (const action of actions) {
      for (const p of action.action === 'move' ? [action.path, action.previousPath] : [action.path]) {
        if (!isValidRepoPath(p)) throw new ActionError('Path cannot include directory traversal');
      }
      const existing = entries.get(action.path);
      switch (action.action) {
        case 'create': {
          const clash = clashes(entries, action.path);
          if (clash) throw new ActionError(clash);
          entries.set(action.path, { mode: modeFor(action.executable), oid: await hash(action.content) });
          break;
        }
        case 'update':
          if (!existing || existing.mode === '160000') throw new ActionError("A file with this name doesn't exist");
          entries.set(action.path, { mode: modeFor(action.executable, existing), oid: await hash(action.content) });
          break;
        case 'delete':
          if (!existing) throw new ActionError("A file with this name doesn't exist");
          entries.delete(action.path);
          break;
        case 'chmod':
          if (!existing || existing.mode === '160000') throw new ActionError("A file with this name doesn't exist");
          entries.set(action.path, { mode: modeFor(action.executable), oid: existing.oid });
          break;
        case 'move': {
          const previous = entries.get(action.previousPath);
          if (!previous) throw new ActionError("A file with this name doesn't exist");
          entries.delete(action.previousPath);
          const clash = clashes(entries, action.path);
          if (clash) throw new ActionError(clash);
          const oid = action.content === null ? previous.oid : await hash(action.content);
          entries.set(action.path, { mode: previous.mode, oid });
          break;
        }
      }
    }
    // A fresh index from the map: NUL-terminated records pass any file name unchanged.
    const records = [...entries].map(([file, e]) => `${e.mode} ${e.oid}\t${file}\0`).join('');
    if (records)
      await runGit({ gitDir, env, subcommand: 'update-index', flags: ['-z', '--index-info'], input: records });
    return await gitText({ gitDir, env, subcommand: 'write-tree' });
  } finally {
    await fs.rm(indexFile, { force: true });
  }
}

/**
 * Writes a commit of `tree` on `parent` and moves `branch` to it only if the branch is still at
 * `expectedOld` (ZERO_OID: must not exist). A concurrent writer makes it fail with `conflict`.
 */
export async function commitTree(
  gitDir: string,
  options: {
    tree: string;
    parent: string | null;
    branch: string;
    expectedOld: string;
    message: string;
    author: GitIdentity;
    committer: GitIdentity;
  },
): Promise<string> {
  if (!isValidBranchName(options.branch)) throw new GitError('invalid_argument', 'invalid branch name');
  const commit = await gitText({
    gitDir,
    env: identityEnv(options.author, options.committer),
    subcommand: 'commit-tree',
    flags: options.parent ? [['-p', options.parent]] : [],
    args: [options.tree],
    input: options.message,
  });
  await updateRef(gitDir, 'depot: commit', [`refs/heads/${options.branch}`, commit, options.expectedOld]);
  return commit;
}
