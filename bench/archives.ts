/**
 * Archive downloads with the archive cache (issue 27), against native git in the same run, on a
 * release-like tree (111 MiB of text, a 34 MB tar.gz):
 * - 8 concurrent downloads of a cached archive against 8 concurrent `git archive` (goal ≥ 20×);
 * - 8 concurrent first downloads of one archive against one `git archive` (goal ≤ 1.3×), and how
 *   many `git archive` processes ran for them (goal: one);
 * - 304 answers per second against the `/-/liveness` floor (goal ≥ 0.5×);
 * - the server's memory growth while 50 clients stream, cached and while generating (< 64 MiB).
 * Clients are curl processes writing to /dev/null, as CI jobs fetch archives.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { INLINE_BLOB_BYTES } from '../src/git/blob.js';
import { gitEnvironment } from '../src/git/command.js';
import { Storages } from '../src/storage/storages.js';
import { benchRepository } from './fixtures/repositories.js';
import { benchApi, type Measurement, measurement, median, startDepotServer, stop, treeRss } from './harness.js';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CONNECTIONS = 50;

/** Samples until stopped: the peak memory growth of the server's tree (MiB) and the `git archive` pids seen. */
function sampler(serverPid: number, storage: string) {
  const before = treeRss(serverPid);
  let peak = before;
  const archives = new Set<number>();
  const timer = setInterval(() => {
    peak = Math.max(peak, treeRss(serverPid));
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let argv = '';
      try {
        argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      if (argv.includes('\0archive\0') && argv.includes(storage)) archives.add(Number(entry));
    }
  }, 10);
  return () => {
    clearInterval(timer);
    return { growthMiB: (Math.max(peak, treeRss(serverPid)) - before) / 2 ** 20, archives: archives.size };
  };
}

/** Downloads a URL with curl into /dev/null; rejects unless it answers 200 with a body. */
function curl(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code} %{size_download}', url], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d;
    });
    child.on('close', () => {
      const [status, size] = out.split(' ').map(Number);
      if (status === 200 && (size ?? 0) > 0) resolve(size as number);
      else reject(new Error(`${url}: ${out}`));
    });
  });
}

/** Runs `git archive` as Depot does (same streaming threshold), its output read and dropped. */
function gitArchive(gitDir: string, sha: string, prefix: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'git',
      [
        `--git-dir=${gitDir}`,
        '-c',
        `core.bigFileThreshold=${INLINE_BLOB_BYTES}`,
        'archive',
        '--format=tar.gz',
        `--prefix=${prefix}/`,
        sha,
      ],
      { env: gitEnvironment(), stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let bytes = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    child.on('close', (code) => (code === 0 ? resolve(bytes) : reject(new Error(`git archive: ${code}`))));
  });
}

/** Milliseconds for `n` copies of `task` started together to all finish. */
async function together(n: number, task: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await Promise.all(Array.from({ length: n }, task));
  return performance.now() - started;
}

/** Requests per second at 50 connections; every answer must have `status`. */
async function rate(url: string, headers: Record<string, string>, status: '2xx' | '3xx'): Promise<number> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_S, headers });
  const others = (['1xx', '2xx', '3xx', '4xx', '5xx'] as const)
    .filter((kind) => kind !== status)
    .reduce((sum, kind) => sum + result[kind], 0);
  if (result.errors > 0 || others > 0) throw new Error(`${url}: ${result.errors} errors, ${others} not ${status}`);
  return result.requests.average;
}

export async function run(): Promise<{ measurements: Measurement[]; notes: string[] }> {
  const gitDir = await benchRepository('release');
  const sha = await new Promise<string>((resolve) => {
    const child = spawn('git', [`--git-dir=${gitDir}`, 'rev-parse', 'main'], { env: gitEnvironment() });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d;
    });
    child.on('close', () => resolve(out.trim()));
  });
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-archives-'));
  const { child, api } = await startDepotServer(storage);
  const out: Measurement[] = [];
  const notes: string[] = [];
  try {
    // One project per archive: each has its own archive (the prefix is the project's path) and
    // its own anonymous rate-limit budget (GitLab's 100 a minute).
    const url: Record<string, string> = {};
    const firsts = Array.from({ length: RUNS }, (_, i) => `first${i}`);
    for (const name of [...firsts, 'cached', 'memory', 'joined', 'revalidate']) {
      const project = await benchApi(api, 'POST', '/projects', { name, path: name, visibility: 'public' });
      const target = path.join(storage, 'repositories', 'default', `${Storages.hashedPath(project.id)}.git`);
      fs.rmSync(target, { recursive: true, force: true });
      fs.symlinkSync(gitDir, target);
      url[name] = `${api}/projects/${project.id}/repository/archive.tar.gz?sha=${sha}`;
    }
    const repositories = path.join(storage, 'repositories');
    // Subject and baseline are measured back to back, round after round, and the medians
    // compared: the host's load moves between rounds, not within one.

    // One git archive alone, then 8 first downloads of one (uncached) archive at once.
    const oneGitTimes: number[] = [];
    const firstTimes: number[] = [];
    let processes = 0;
    for (const name of firsts) {
      oneGitTimes.push(await together(1, () => gitArchive(gitDir, sha, `${name}-${sha}-${sha}`)));
      const sample = sampler(child.pid as number, repositories);
      firstTimes.push(await together(8, () => curl(url[name] as string)));
      processes = Math.max(processes, sample().archives);
    }
    const [oneGit, first] = [median(oneGitTimes), median(firstTimes)];
    out.push(
      measurement(
        '8 concurrent first downloads of one archive (tar.gz, 34 MB)',
        'ms',
        first,
        oneGit,
        'one git archive',
        'lower',
        '≤ 1.3×',
      ),
      measurement('git archive processes run for 8 first downloads', 'processes', processes, 1, 'one', 'lower', '= 1×'),
    );

    // 8 downloads of a cached archive at once, against 8 git archive at once.
    await curl(url.cached as string);
    const cachedTimes: number[] = [];
    const eightGitTimes: number[] = [];
    for (let i = 0; i < Math.min(RUNS, 2); i++) {
      cachedTimes.push(await together(8, () => curl(url.cached as string)));
      eightGitTimes.push(await together(8, () => gitArchive(gitDir, sha, `cached-${sha}-${sha}`)));
    }
    const [cached, eightGit] = [median(cachedTimes), median(eightGitTimes)];
    out.push(
      measurement(
        '8 concurrent downloads of a cached archive (34 MB each)',
        'archives/s',
        8 / (cached / 1000),
        8 / (eightGit / 1000),
        '8 concurrent git archive',
        'higher',
        '≥ 20×',
      ),
    );

    // Revalidation: a 304 per request, against the middleware floor.
    const byCommit = url.revalidate as string;
    const byBranch = byCommit.replace(`sha=${sha}`, 'sha=main');
    const etagOf = async (target: string) => (await fetch(target, { method: 'HEAD' })).headers.get('etag') as string;
    const [commitTag, branchTag] = [await etagOf(byCommit), await etagOf(byBranch)];
    const rates: Record<'liveness' | 'commit' | 'branch', number[]> = { liveness: [], commit: [], branch: [] };
    for (let i = 0; i < 2; i++) {
      rates.liveness.push(await rate(`${new URL(api).origin}/-/liveness`, {}, '2xx'));
      rates.commit.push(await rate(byCommit, { 'If-None-Match': commitTag }, '3xx'));
      rates.branch.push(await rate(byBranch, { 'If-None-Match': branchTag }, '3xx'));
    }
    const liveness = median(rates.liveness);
    for (const [name, key] of [
      ['commit id', 'commit'],
      ['branch', 'branch'],
    ] as const) {
      out.push(
        measurement(
          `304 Not Modified for an archive by ${name} (${CONNECTIONS} connections)`,
          'req/s',
          median(rates[key]),
          liveness,
          'GET /-/liveness, the middleware floor',
          'higher',
          '≥ 0.5×',
        ),
      );
    }

    // Memory while 50 clients stream: a cached archive, then one being generated.
    await curl(url.memory as string);
    for (const [name, key] of [
      ['a cached archive', 'memory'],
      ['an archive while it is generated', 'joined'],
    ] as const) {
      const sample = sampler(child.pid as number, repositories);
      const ms = await together(CONNECTIONS, () => curl(url[key] as string));
      const { growthMiB, archives } = sample();
      out.push(
        measurement(
          `server memory growth, ${CONNECTIONS} clients streaming ${name}`,
          'MiB',
          growthMiB,
          64,
          'limit 64 MiB',
          'lower',
          '< 1×',
        ),
      );
      notes.push(`${CONNECTIONS} clients, ${name}: ${(ms / 1000).toFixed(1)} s in all, ${archives} git archive run`);
    }
    const metrics = await (await fetch(`${new URL(api).origin}/-/metrics`)).text();
    const counter = (result: string) =>
      Number(new RegExp(`^depot_archive_cache_requests_total\\{result="${result}"\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
    const list = (values: number[]) => values.map((v) => v.toFixed(0)).join(', ');
    notes.push(
      `cache: ${counter('miss')} misses, ${counter('joined')} joined, ${counter('hit')} hits`,
      `rounds: one git archive ${list(oneGitTimes)} ms, 8 first downloads ${list(firstTimes)} ms; ` +
        `8 cached downloads ${list(cachedTimes)} ms, 8 git archive ${list(eightGitTimes)} ms; ` +
        `liveness ${list(rates.liveness)}, 304 by commit ${list(rates.commit)}, by branch ${list(rates.branch)} req/s`,
    );
  } finally {
    await stop(child);
    fs.rmSync(storage, { recursive: true, force: true });
  }
  return { measurements: out, notes };
}
