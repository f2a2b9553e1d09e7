import { gitText } from './command.js';
import { GitError } from './errors.js';

/**
 * The best common ancestor of resolved commit ids (`git merge-base`); with more than two, of
 * the first and a hypothetical merge of the others, as git defines it. Null when unrelated.
 */
export async function mergeBase(gitDir: string, commitIds: string[]): Promise<string | null> {
  for (const id of commitIds)
    if (!/^[0-9a-f]{40,64}$/.test(id)) throw new GitError('invalid_argument', 'merge-base takes commit ids');
  try {
    const out = await gitText({ gitDir, subcommand: 'merge-base', args: commitIds, endOfOptions: true });
    return out.split('\n')[0] || null;
  } catch (error) {
    // Exit status 1 with no output: the commits share no history.
    if (error instanceof GitError && error.code === 'failed' && error.stderr === '') return null;
    throw error;
  }
}
