/**
 * Which commits of a range make changelog entries (app/finders/repositories/
 * changelog_commits_finder.rb): those carrying the trailer, minus commits reverted by a newer
 * commit of the same range.
 */
import type { Commit } from '../git/commit.js';
import { parseTrailers } from '../git/commit.js';

/** GitLab's cap on the commits between `from` and `to`. */
export const MAX_CHANGELOG_COMMITS = 15_000;

export const DEFAULT_TRAILER = 'Changelog';

const REVERT_LINE = /(?<![^\n])This reverts commit ([0-9a-f]{40})/i;
const LONG_TITLE_CHARS = 100;

/** The first line of the message; `No commit message` for a blank one (GitLab's `full_title`). */
export function fullCommitTitle(message: string): string {
  if (message.trim() === '') return 'No commit message';
  return message.split(/[\r\n]/, 1)[0] ?? '';
}

/**
 * GitLab's commit `title`: a first line of 100 characters or more is cut at the last space at
 * or before character 78 (hard at 78 without one) and ends in `...`.
 */
export function changelogTitle(message: string): string {
  const title = fullCommitTitle(message);
  if (title.length < LONG_TITLE_CHARS) return title;
  const stop = 81 - 3;
  const space = title.lastIndexOf(' ', stop);
  return `${title.slice(0, space >= 0 ? space : stop)}...`;
}

/** The SHA a commit says it reverts, read from its description (the whole message for long titles). */
function revertedSha(commit: Commit): string | null {
  const full = fullCommitTitle(commit.message);
  const newline = commit.message.indexOf('\n');
  const description =
    full.length >= LONG_TITLE_CHARS ? commit.message : newline >= 0 ? commit.message.slice(newline + 1) : '';
  return REVERT_LINE.exec(description)?.[1] ?? null;
}

/** A commit that makes an entry, with its trailers (a repeated key keeps its last value). */
export interface ChangelogCommit {
  commit: Commit;
  trailers: Record<string, string>;
  /** The trailer's value: the raw category. */
  category: string;
}

/**
 * Filters commits given newest first, one at a time. A commit reverted by a newer one is
 * skipped without reading its own revert line, so a revert of a revert brings the original
 * back; a revert appears only when it carries the trailer itself. The trailer name is
 * case-sensitive.
 */
export class ChangelogCommitSelector {
  private readonly reverted = new Set<string>();
  constructor(private readonly trailer: string) {}

  /** The commit's entry data, or null when it makes no entry. */
  select(commit: Commit): ChangelogCommit | null {
    if (this.reverted.has(commit.id)) return null;
    const sha = revertedSha(commit);
    if (sha) this.reverted.add(sha);
    // Cheap test first: most commits of a long range do not mention the trailer at all.
    if (!commit.message.includes(this.trailer)) return null;
    const pairs = parseTrailers(commit.message);
    if (!pairs.some(([key]) => key === this.trailer)) return null;
    // fromEntries: a later repeated key wins, and a key such as `__proto__` stays a plain key.
    const trailers: Record<string, string> = Object.fromEntries(pairs);
    return { commit, trailers, category: trailers[this.trailer] as string };
  }
}

/** The entries among `commits` (newest first), as ChangelogCommitSelector decides. */
export async function* selectChangelogCommits(
  commits: AsyncIterable<Commit> | Iterable<Commit>,
  trailer: string,
): AsyncGenerator<ChangelogCommit> {
  const selector = new ChangelogCommitSelector(trailer);
  for await (const commit of commits) {
    const selected = selector.select(commit);
    if (selected) yield selected;
  }
}
