import { runGit } from './command.js';
import { GitError } from './errors.js';

/** GitLab reads contributors from this many newest non-merge commits of the ref. */
export const CONTRIBUTOR_COMMIT_LIMIT = 2000;

export interface Contributor {
  name: string;
  email: string;
  commits: number;
}

/**
 * Groups the newest CONTRIBUTOR_COMMIT_LIMIT non-merge commits reachable from `commitId` by
 * exact author email; the name is the newest non-blank author name of that email.
 * Returned in first-seen (newest commit) order; the caller sorts.
 */
export async function contributors(gitDir: string, commitId: string): Promise<Contributor[]> {
  if (!/^[0-9a-f]{40,64}$/.test(commitId)) throw new GitError('invalid_argument', 'contributors take a commit id');
  const { stdout } = await runGit({
    gitDir,
    subcommand: 'log',
    flags: ['--no-merges', `--max-count=${CONTRIBUTOR_COMMIT_LIMIT}`, '--format=%an%x00%ae', '--no-mailmap'],
    args: [commitId],
    endOfOptions: true,
  });
  const byEmail = new Map<string, Contributor>();
  for (const line of stdout.toString('utf8').split('\n')) {
    if (line === '') continue;
    const nul = line.indexOf('\0');
    const name = line.slice(0, nul);
    const email = line.slice(nul + 1);
    const entry = byEmail.get(email);
    if (entry) {
      entry.commits += 1;
      if (entry.name.trim() === '' && name.trim() !== '') entry.name = name;
    } else {
      byEmail.set(email, { name, email, commits: 1 });
    }
  }
  return [...byEmail.values()];
}
