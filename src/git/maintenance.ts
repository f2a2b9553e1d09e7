import { runGit } from './command.js';

/** A first commit-graph of a large history computes a Bloom filter per commit: give it time. */
const MAINTENANCE_TIMEOUT_MS = 10 * 60_000;

/**
 * What one upkeep run does to the packs, as GitLab's housekeeping tasks name them:
 * - `heuristic`: `git gc --auto`, packing loose objects and consolidating packs once git's own
 *   thresholds are passed (6,700 loose objects or 50 packs by default);
 * - `incremental_repack`: `git repack -d`, the loose objects into one new pack;
 * - `full_repack`: `git repack -A -d --pack-kept-objects`, everything into one pack, with a
 *   reachability bitmap when bitmaps are on;
 * - `gc`: `git gc`, a full repack plus packed refs and pruned stale objects, bitmaps likewise.
 */
export type HousekeepingTask = 'heuristic' | 'incremental_repack' | 'full_repack' | 'gc';

/** The tasks from least to most thorough: a stronger one does all a weaker one would. */
export const HOUSEKEEPING_TASKS: readonly HousekeepingTask[] = ['heuristic', 'incremental_repack', 'full_repack', 'gc'];

export interface OptimizeOptions {
  task?: HousekeepingTask;
  /** Write a reachability bitmap with a full repack or gc (`housekeeping_bitmaps_enabled`). */
  bitmaps?: boolean;
}

/**
 * Upkeep of a repository after changes, as Gitaly's housekeeping does it (pushes run no `gc` of
 * their own, see runService), always in this process rather than detached, so a storage move
 * never copies a repository that a background gc is rewriting: the packs as `task` says, then
 * the commit-graph, brought up to date with every reachable commit: a new layer for the commits
 * not yet in it (`--split`, layers merged as they grow) with changed-path Bloom filters. History
 * walks then read commits from the graph instead of parsing each one. On the 50,000-commit
 * bench history: `for-each-ref --merged` 198 → 26 ms, `merge-base` 44 → 6 ms, `git log --
 * <path>` 601 → 61 ms; the first write took 2.2 s, one after a push of a few commits a few ms.
 */
export async function optimizeRepository(gitDir: string, options: OptimizeOptions = {}): Promise<void> {
  const task = options.task ?? 'heuristic';
  const bitmaps = options.bitmaps ?? true;
  // The graph is written below, split and with Bloom filters; gc would write a whole one.
  const gcConfig = {
    'gc.autoDetach': 'false',
    'gc.writeCommitGraph': 'false',
    'repack.writeBitmaps': bitmaps ? 'true' : 'false',
  };
  const timeoutMs = MAINTENANCE_TIMEOUT_MS;
  if (task === 'heuristic') {
    await runGit({ gitDir, config: gcConfig, subcommand: 'gc', flags: ['--auto', '--quiet'], timeoutMs });
  } else if (task === 'incremental_repack') {
    await runGit({ gitDir, subcommand: 'repack', flags: ['-d', '-q'], timeoutMs });
  } else if (task === 'full_repack') {
    const flags = [
      '-A',
      '-d',
      '--pack-kept-objects',
      '-q',
      bitmaps ? '--write-bitmap-index' : '--no-write-bitmap-index',
    ];
    await runGit({ gitDir, subcommand: 'repack', flags, timeoutMs });
  } else {
    await runGit({ gitDir, config: gcConfig, subcommand: 'gc', flags: ['--quiet'], timeoutMs });
  }
  await runGit({
    gitDir,
    subcommand: 'commit-graph',
    action: 'write',
    flags: ['--reachable', '--split', '--changed-paths', '--no-progress'],
    timeoutMs,
  });
}
