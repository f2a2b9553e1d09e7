import { type GitCommand, gitText, runGit, streamGit } from './command.js';
import { type Commit, parseSignature } from './commit.js';
import { GitError } from './errors.js';
import { isValidRepoPath } from './validate.js';

// One record per commit: fields separated by NUL, records ended by \x01\x02 (messages may hold
// anything but NUL, and git refuses NUL in messages).
const FORMAT = '%H%x00%T%x00%P%x00%an <%ae> %ad%x00%cn <%ce> %cd%x00%B%x01%x02';
const RECORD_END = '\x01\x02';

export interface LogOptions {
  /** Resolved commit ids (never raw user input): `ids` reachable from these... */
  include: string[];
  /** ...and not from these. */
  exclude?: string[];
  paths?: string[];
  since?: Date;
  until?: Date;
  skip?: number;
  maxCount?: number;
  firstParent?: boolean;
  noMerges?: boolean;
  /** `topo` for --topo-order; default is git's date order. */
  order?: 'default' | 'topo';
  /** Oldest first. */
  reverse?: boolean;
  author?: string;
  /** All refs instead of `include`. */
  all?: boolean;
}

function logFlags(o: LogOptions): (string | [string, string])[] {
  const flags: (string | [string, string])[] = [];
  if (o.skip) flags.push(`--skip=${o.skip}`);
  if (o.maxCount !== undefined) flags.push(`--max-count=${o.maxCount}`);
  if (o.firstParent) flags.push('--first-parent');
  if (o.noMerges) flags.push('--no-merges');
  if (o.order === 'topo') flags.push('--topo-order');
  if (o.reverse) flags.push('--reverse');
  if (o.since) flags.push(`--since=${Math.floor(o.since.getTime() / 1000)}`);
  if (o.until) flags.push(`--until=${Math.floor(o.until.getTime() / 1000)}`);
  if (o.author) flags.push(`--author=${o.author}`);
  if (o.all) flags.push('--all');
  return flags;
}

function revisions(o: LogOptions): string[] {
  for (const id of [...o.include, ...(o.exclude ?? [])]) {
    if (!/^[0-9a-f]{40,64}$/.test(id)) throw new GitError('invalid_argument', 'log takes resolved commit ids');
  }
  return [...(o.all ? [] : o.include), ...(o.exclude ?? []).map((id) => `^${id}`)];
}

function checkPaths(paths: string[] | undefined): string[] | undefined {
  if (!paths || paths.length === 0) return undefined;
  for (const p of paths) if (!isValidRepoPath(p)) throw new GitError('invalid_argument', 'invalid path');
  // Literal pathspecs: `*` or `:(...)` in a user path mean nothing special.
  return paths.map((p) => `:(literal)${p}`);
}

export function parseLogRecords(text: string): Commit[] {
  const commits: Commit[] = [];
  for (const raw of text.split(RECORD_END)) {
    const record = raw.replace(/^\n/, '');
    if (record === '') continue;
    const [id, tree, parents, author, committer, message] = record.split('\0') as string[];
    commits.push({
      id: id as string,
      tree: tree as string,
      parentIds: parents ? parents.split(' ') : [],
      author: parseSignature(author as string),
      committer: parseSignature(committer as string),
      message: message ?? '',
    });
  }
  return commits;
}

/** The `git log` that prints the selected commits as parseLogRecords reads them. */
function logCommand(gitDir: string, options: LogOptions): GitCommand {
  return {
    gitDir,
    subcommand: 'log',
    flags: [
      `--format=${FORMAT}`,
      '--date=raw',
      '--no-color',
      '--no-decorate',
      '--encoding=UTF-8',
      ...logFlags(options),
    ],
    args: revisions(options),
    endOfOptions: true,
    paths: checkPaths(options.paths) ?? [],
  };
}

/** Commits in git's log order (newest first unless `reverse`). */
export async function listCommits(gitDir: string, options: LogOptions): Promise<Commit[]> {
  const { stdout } = await runGit(logCommand(gitDir, options));
  return parseLogRecords(stdout.toString('utf8'));
}

/** Streams commits in batches (for ranges too big to hold as one string). */
export async function* streamCommits(gitDir: string, options: LogOptions): AsyncGenerator<Commit> {
  const stream = streamGit(logCommand(gitDir, options));
  let pending = '';
  const decoder = new TextDecoder('utf-8');
  try {
    for await (const chunk of stream.stdout) {
      pending += decoder.decode(chunk as Buffer, { stream: true });
      const last = pending.lastIndexOf(RECORD_END);
      if (last < 0) continue;
      const complete = pending.slice(0, last + RECORD_END.length);
      pending = pending.slice(last + RECORD_END.length);
      yield* parseLogRecords(complete);
    }
    pending += decoder.decode();
    yield* parseLogRecords(pending);
    await stream.done;
  } finally {
    stream.kill();
  }
}

/** How many commits `git rev-list --count` finds for the same selection. */
export async function countCommits(gitDir: string, options: LogOptions): Promise<number> {
  const flags = logFlags({ ...options, skip: 0, maxCount: undefined, reverse: false, order: 'default' }).filter(
    (f) => f !== '--skip=0',
  );
  const out = await gitText({
    gitDir,
    subcommand: 'rev-list',
    flags: ['--count', ...flags],
    args: revisions(options),
    endOfOptions: true,
    paths: checkPaths(options.paths) ?? [],
  });
  return Number(out);
}
