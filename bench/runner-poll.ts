/**
 * CI (issue 19): the server's CPU while 100 runners poll `POST /jobs/request` every 3 s (goal:
 * under 10 % of one core), against the same request rate of `GET /-/liveness`; and the time
 * from a push (a commits API call) of a CI file with 50 jobs to its pipeline existing (goal:
 * within 200 ms), against the commit alone.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchApi, type Measurement, measurement, median, processTree, startDepotServer, stop } from './harness.js';

const RUNNERS = 100;
const POLL_INTERVAL_MS = 3000;
const WINDOW_MS = Number(process.env.BENCH_DURATION ?? 30) * 1000;
const PIPELINE_JOBS = 50;
const PUSHES = 5;
const CLOCK_TICKS = 100; // USER_HZ on Linux

/** CPU seconds used so far by a process and its descendants (utime + stime, from /proc). */
function treeCpuSeconds(pid: number): number {
  let ticks = 0;
  for (const member of processTree(pid)) {
    try {
      const stat = fs.readFileSync(`/proc/${member}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // ended while read
    }
  }
  return ticks / CLOCK_TICKS;
}

/** Runs `fire` for each of `clients` every interval (spread evenly) for the window; CPU % of one core. */
async function cpuPercentDuring(pid: number, clients: number, fire: (i: number) => Promise<void>): Promise<number> {
  const before = treeCpuSeconds(pid);
  const started = performance.now();
  const timers: NodeJS.Timeout[] = [];
  for (let i = 0; i < clients; i++) {
    const offset = (POLL_INTERVAL_MS / clients) * i;
    timers.push(
      setTimeout(() => {
        void fire(i);
        timers.push(setInterval(() => void fire(i), POLL_INTERVAL_MS));
      }, offset),
    );
  }
  await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
  for (const t of timers) clearInterval(t);
  const seconds = (performance.now() - started) / 1000;
  return ((treeCpuSeconds(pid) - before) / seconds) * 100;
}

export async function run(): Promise<{ measurements: Measurement[]; notes: string[] }> {
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-ci-'));
  const server = await startDepotServer(storage);
  try {
    const project = await benchApi(server.api, 'POST', '/projects', { name: 'ci-bench', initialize_with_readme: true });
    const registration = (await benchApi(server.api, 'POST', '/runners/reset_registration_token')).token as string;
    const tokens: string[] = [];
    for (let i = 0; i < RUNNERS; i++) {
      // Tagged so that they never take the benchmark's own jobs: every poll is a 204.
      const runner = await benchApi(server.api, 'POST', '/runners', {
        token: registration,
        tag_list: 'bench-poll',
        run_untagged: false,
      });
      tokens.push(runner.token);
    }
    const pid = server.child.pid as number;
    const poll = async (i: number) => {
      const res = await fetch(`${server.api}/jobs/request`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token: tokens[i], info: { name: 'gitlab-runner', version: '17.0.0' } }),
      });
      await res.arrayBuffer();
    };
    const liveness = async () => {
      const res = await fetch(`${server.origin}/-/liveness`);
      await res.arrayBuffer();
    };
    const polling = await cpuPercentDuring(pid, RUNNERS, poll);
    const floor = await cpuPercentDuring(pid, RUNNERS, liveness);

    // Pushes of a CI file with 50 jobs: from the commit request to the pipeline with its jobs.
    const jobs = Object.fromEntries(
      Array.from({ length: PIPELINE_JOBS }, (_, i) => [
        `job-${i}`,
        { stage: i % 2 ? 'test' : 'build', script: ['true'] },
      ]),
    );
    const commitTimes: number[] = [];
    const pipelineTimes: number[] = [];
    for (let i = 0; i < PUSHES; i++) {
      const content = JSON.stringify({ variables: { RUN: String(i) }, ...jobs });
      const started = performance.now();
      await benchApi(server.api, 'POST', `/projects/${project.id}/repository/commits`, {
        branch: 'main',
        commit_message: `CI ${i}`,
        actions: [{ action: i === 0 ? 'create' : 'update', file_path: '.gitlab-ci.yml', content }],
      });
      commitTimes.push(performance.now() - started);
      for (;;) {
        const pipelines = await benchApi(server.api, 'GET', `/projects/${project.id}/pipelines?per_page=1`);
        if (pipelines.length > 0 && pipelines[0].iid === i + 1) break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      pipelineTimes.push(performance.now() - started);
    }
    const pipelineMs = median(pipelineTimes);
    const commitMs = median(commitTimes);
    return {
      measurements: [
        measurement(
          `CPU, ${RUNNERS} runners polling every 3 s`,
          '% of a core',
          polling,
          10,
          'goal limit',
          'lower',
          '< 1×',
        ),
        measurement(
          `CPU, ${RUNNERS} runners polling every 3 s`,
          '% of a core',
          polling,
          floor,
          'GET /-/liveness at the same rate',
          'lower',
        ),
        measurement(
          `push of ${PIPELINE_JOBS} jobs → pipeline exists (median of ${PUSHES})`,
          'ms',
          pipelineMs,
          commitMs + 200,
          'the commit + 200 ms',
          'lower',
          '≤ 1×',
        ),
        measurement(
          `pipeline after the commit returned (median of ${PUSHES})`,
          'ms',
          pipelineMs - commitMs,
          200,
          'goal limit',
          'lower',
          '≤ 1×',
        ),
      ],
      notes: [
        'CPU is utime + stime of the server process tree (Node, git, embedded PostgreSQL) from /proc over the window',
        'every poll answers 204 (the runners are tagged so they take no job); the pipeline is made by a durable job the push wakes',
      ],
    };
  } finally {
    await stop(server.child);
    fs.rmSync(storage, { recursive: true, force: true });
  }
}
