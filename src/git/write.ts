import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gitText, runGit } from './command.js';
import { GitError } from './errors.js';
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
    await runGit({
      gitDir,
      subcommand: 'update-ref',
      flags: [['-m', 'depot: commit']],
      args: [`refs/heads/${options.branch}`, commit, options.parent ?? ZERO_OID],
    });
    return commit;
  } finally {
    await fs.rm(indexFile, { force: true });
  }
}
