import { readObject } from './catfile.js';
import { streamGit } from './command.js';
import { type Commit, parseCommitObject } from './commit.js';
import { GitError } from './errors.js';
import { isValidRepoPath } from './validate.js';

/** Consecutive lines of a file last changed by the same commit (GitLab's blame range). */
export interface BlameGroup {
  commit: Commit;
  lines: string[];
}

export interface BlameRange {
  /** First line, 1-based. */
  start: number;
  /** Last line, inclusive. */
  end: number;
}

// `<sha> <orig line> <final line>[ <lines in group>]`: the header of each blamed line.
const HEADER = /^([0-9a-f]{40}(?:[0-9a-f]{24})?) \d+ \d+(?: \d+)?$/;

/** git's refusal of a `-L` range past the end of the file. */
const OUT_OF_RANGE = /has only \d+ lines?|invalid -L range/;

/**
 * `git blame --porcelain` of `path` at `commitId`, parsed as it streams: lines are grouped by
 * consecutive commit as GitLab's Gitlab::Blame does, and each commit is read (through the
 * pooled cat-file process) as soon as blame first names it, so the reads overlap git's work.
 * A range past the end of the file gives no groups, as GitLab answers it.
 */
export async function blameFile(
  gitDir: string,
  commitId: string,
  path: string,
  range?: BlameRange,
): Promise<BlameGroup[]> {
  if (!isValidRepoPath(path)) throw new GitError('invalid_argument', 'invalid path');
  const git = streamGit({
    gitDir,
    subcommand: 'blame',
    flags: ['--porcelain', ...(range ? [['-L', `${range.start},${range.end}`] as const] : [])],
    args: [commitId],
    paths: [path],
  });
  const commits = new Map<string, Promise<Commit | null>>();
  const order: { sha: string; lines: string[] }[] = [];
  let current: { sha: string; lines: string[] } | null = null;
  let sha = '';
  let rest: Buffer = Buffer.alloc(0);

  const takeLine = (line: Buffer) => {
    if (line[0] === 0x09) {
      const text = line.toString('utf8', 1);
      if (current?.sha !== sha) {
        current = { sha, lines: [] };
        order.push(current);
      }
      current.lines.push(text);
      return;
    }
    const header = HEADER.exec(line.toString('latin1'));
    if (!header) return;
    sha = header[1] as string;
    if (!commits.has(sha)) {
      const id = sha;
      const pending = readObject(gitDir, id).then((object) => (object ? parseCommitObject(id, object.data) : null));
      // Awaited once blame is done; until then a failure must not count as unhandled.
      pending.catch(() => {});
      commits.set(id, pending);
    }
  };

  try {
    for await (const chunk of git.stdout as AsyncIterable<Buffer>) {
      let data = rest.length > 0 ? Buffer.concat([rest, chunk]) : chunk;
      let newline = data.indexOf(0x0a);
      while (newline >= 0) {
        takeLine(data.subarray(0, newline));
        data = data.subarray(newline + 1);
        newline = data.indexOf(0x0a);
      }
      rest = Buffer.from(data);
    }
    if (rest.length > 0) takeLine(rest);
    await git.done;
  } catch (error) {
    git.kill();
    if (range && error instanceof GitError && OUT_OF_RANGE.test(error.stderr)) return [];
    throw error;
  }
  const resolved = new Map<string, Commit>();
  for (const [id, pending] of commits) {
    const commit = await pending;
    if (!commit) throw new GitError('not_found', `commit ${id} vanished during blame`);
    resolved.set(id, commit);
  }
  return order.map((group) => ({ commit: resolved.get(group.sha) as Commit, lines: group.lines }));
}
