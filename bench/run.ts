/**
 * Runs the benchmarks (`npm run bench`, or `npm run bench -- <name>` for one). Each prints its
 * figures as ratios against a baseline measured in the same run and writes
 * bench/results/<name>.json.
 */

import * as archives from './archives.js';
import * as changelog from './changelog.js';
import * as events from './events.js';
import * as gitHttp from './git-http.js';
import { type Measurement, report } from './harness.js';
import * as load from './load.js';
import * as repository from './repository.js';
import * as repositoryOperations from './repository-operations.js';
import * as runnerPoll from './runner-poll.js';
import * as server from './server.js';
import * as startupAndApi from './startup-and-api.js';
import * as storageMove from './storage-move.js';

type Outcome = Measurement[] | { measurements: Measurement[]; notes: string[] };

const BENCHMARKS: Record<string, { run: () => Promise<Outcome> }> = {
  'startup-and-api': startupAndApi,
  server,
  repository,
  'git-http': gitHttp,
  changelog,
  'storage-move': storageMove,
  archives,
  'repository-operations': repositoryOperations,
  events,
  'runner-poll': runnerPoll,
  load,
};

const wanted = process.argv.slice(2);
for (const name of wanted) {
  if (!BENCHMARKS[name]) {
    process.stderr.write(`unknown benchmark ${name}; known: ${Object.keys(BENCHMARKS).join(', ')}\n`);
    process.exit(2);
  }
}
for (const [name, bench] of Object.entries(BENCHMARKS)) {
  if (wanted.length > 0 && !wanted.includes(name)) continue;
  const outcome = await bench.run();
  if (Array.isArray(outcome)) report(name, outcome);
  else report(name, outcome.measurements, outcome.notes);
}
