import { gitText } from './command.js';
import { GitError } from './errors.js';

/** The paths one commit added, modified and removed against its first parent (all added for a root commit). */
export interface ChangedPaths {
  added: string[];
  modified: string[];
  removed: string[];
}

const COMMIT_ID = /^[0-9a-f]{40,64}$/;

/**
 * What a commit changed, as GitLab's push payloads list it per commit: no rename detection (a
 * rename is a removal and an addition), merges compared with their first parent.
 */
export async function changedPaths(
  gitDir: string,
  commitId: string,
  parentId: string | undefined,
): Promise<ChangedPaths> {
  for (const id of [commitId, parentId]) {
    if (id !== undefined && !COMMIT_ID.test(id)) throw new GitError('invalid_argument', 'diff-tree takes commit ids');
  }
  const out = await gitText({
    gitDir,
    subcommand: 'diff-tree',
    flags: ['-r', '-z', '--no-commit-id', '--no-renames', '--name-status', ...(parentId ? [] : ['--root'])],
    args: parentId ? [parentId, commitId] : [commitId],
  });
  const result: ChangedPaths = { added: [], modified: [], removed: [] };
  const fields = out.split('\0');
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const status = fields[i] as string;
    const path = fields[i + 1] as string;
    if (status.startsWith('A')) result.added.push(path);
    else if (status.startsWith('D')) result.removed.push(path);
    else result.modified.push(path);
  }
  return result;
}
