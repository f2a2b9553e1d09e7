import { runGit } from './command.js';
import { RefLockedError } from './errors.js';
import { removeStaleRefLock } from './locks.js';

/**
 * `git update-ref` as a compare-and-swap (`args` are the ref, the new id and the expected old
 * id, or the ref and the expected id with `-d`). A lock left behind by a crashed writer long ago
 * is removed and the update tried once more; a live writer's lock is a conflict as before.
 */
export async function updateRef(gitDir: string, message: string, args: readonly string[], remove = false) {
  const command = {
    gitDir,
    subcommand: 'update-ref',
    flags: [['-m', message] as const, ...(remove ? ['-d'] : [])],
    args,
  };
  try {
    await runGit(command);
  } catch (error) {
    if (!(error instanceof RefLockedError) || !(await removeStaleRefLock(gitDir, error.lockPath))) throw error;
    await runGit(command);
  }
}
