import fs from 'node:fs';

/**
 * Fail points (as etcd's gofail or TiKV's fail-rs), a testing aid: `failpoint(name)` does
 * nothing unless DEPOT_FAILPOINTS (read once, when this module loads; a comma-separated list)
 * names that point, in which case the process group dies at once with SIGKILL, as in a power
 * cut: the server, its cluster workers, the git spawner and every git it started. The embedded
 * database runs in a process group of its own and survives; the crash tests kill it too.
 * test/kill-steps.test.ts kills the server at each point below and checks that nothing is lost.
 * Never set DEPOT_FAILPOINTS in production.
 */
export const FAILPOINTS = [
  // The merge of a merge request (src/services/merge-requests.ts).
  'merge:after-lock',
  'merge:after-squash-commit',
  'merge:after-merge-commit',
  'merge:after-intent',
  'merge:after-ref-update',
  'merge:after-db',
  'merge:after-source-branch-removal',
  // A push's pipeline, made by the durable job ci_create_pipeline (src/jobs/ci.ts,
  // src/services/ci/pipelines.ts).
  'pipeline:after-claim',
  'pipeline:after-config-read',
  'pipeline:after-pipeline-row',
  'pipeline:after-jobs-rows',
  'pipeline:after-hooks-queued',
  'pipeline:after-commit',
  'pipeline:before-job-finish',
] as const;

export type FailpointName = (typeof FAILPOINTS)[number];

/** The line a fail point writes to standard error just before it kills the process group. */
export const failpointMarker = (name: string) => `depot failpoint hit: ${name}`;

const armed: ReadonlySet<string> | null = (() => {
  const names = (process.env.DEPOT_FAILPOINTS ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  return names.length > 0 ? new Set(names) : null;
})();

/** Kills the process group here when DEPOT_FAILPOINTS names this point; free otherwise. */
export function failpoint(name: FailpointName): void {
  if (armed === null || !armed.has(name)) return;
  // Synchronous, so the line is out before the signal: the test tells this death from another.
  try {
    fs.writeSync(2, `${failpointMarker(name)}\n`);
  } catch {
    // standard error closed: die all the same
  }
  try {
    process.kill(0, 'SIGKILL');
  } finally {
    process.kill(process.pid, 'SIGKILL');
  }
}
