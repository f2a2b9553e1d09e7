import { gitText } from './command.js';

export type ContainingRefType = 'branch' | 'tag' | 'all';

export interface ContainingRef {
  type: 'branch' | 'tag';
  name: string;
}

const KINDS = [
  { type: 'branch', prefix: 'refs/heads/' },
  { type: 'tag', prefix: 'refs/tags/' },
] as const;

/**
 * The branches and tags whose history holds `commitId` (GitLab's ContainingCommitFinder): branches
 * first, then tags, each sorted by name as git lists them. At most `limit` of each kind are read,
 * enough for the page asked for plus one to tell whether another follows.
 */
export async function refsContaining(
  gitDir: string,
  commitId: string,
  type: ContainingRefType,
  limit: number,
): Promise<ContainingRef[]> {
  const refs: ContainingRef[] = [];
  for (const kind of KINDS) {
    if (type !== 'all' && type !== kind.type) continue;
    const out = await gitText({
      gitDir,
      subcommand: 'for-each-ref',
      flags: [['--contains', commitId], '--format=%(refname)', '--sort=refname', `--count=${Math.max(1, limit)}`],
      args: [kind.prefix],
    });
    for (const ref of out.split('\n')) {
      if (ref.startsWith(kind.prefix)) refs.push({ type: kind.type, name: ref.slice(kind.prefix.length) });
    }
  }
  return refs;
}
