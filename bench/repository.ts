/**
 * The repository read endpoints against native git and a bare Koa handler, in the same run:
 * archives (time and server memory), a 500 MiB raw blob (throughput and memory), requests per
 * second for tree/blob/raw, and contributors, compare and merge base on 50,000 commits.
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
import {
  benchApi,
  freePort,
  type Measurement,
  measurement,
  median,
  spawnTs,
  startDepotServer,
  stop,
  treeRss,
  waitFor,
} from './harness.js';

const CONNECTIONS = 50;
const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
/** BENCH_ONLY=archive,raw,rps,history,loop runs only those sections. */
const ONLY = new Set((process.env.BENCH_ONLY ?? 'archive,raw,rps,history,loop').split(','));

/** Samples a process tree's RSS until stopped; returns the peak growth over the first sample. */
function memorySampler(pid: number) {
  const before = treeRss(pid);
  let peak = before;
  const timer = setInterval(() => {
    peak = Math.max(peak, treeRss(pid));
  }, 25);
  return () => {
    clearInterval(timer);
    peak = Math.max(peak, treeRss(pid));
    return (peak - before) / 2 ** 20;
  };
}

/** Milliseconds to read a URL's whole body, and its size. */
async function timeDownload(url: string): Promise<{ ms: number; bytes: number }> {
  const started = performance.now();
  const res = await fetch(url);
  if (!res.ok || !res.body) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  let bytes = 0;
  for await (const chunk of res.body) bytes += (chunk as Uint8Array).length;
  return { ms: performance.now() - started, bytes };
}

/** Milliseconds for a git command to run, its stdout read (and discarded) by this process. */
function timeGit(gitDir: string, args: string[]): Promise<{ ms: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn('git', [`--git-dir=${gitDir}`, ...args], {
      env: gitEnvironment(),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let bytes = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    child.on('close', (code) =>
      code === 0 ? resolve({ ms: performance.now() - started, bytes }) : reject(new Error(`git ${args[0]}: ${code}`)),
    );
  });
}

async function gitOut(gitDir: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment() });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.on('close', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`git ${args[0]}: ${code}`))));
  });
}

async function medianOf(times: number, fn: () => Promise<{ ms: number }>): Promise<number> {
  await fn(); // warm-up: page cache, cat-file processes, JIT
  const values: number[] = [];
  for (let i = 0; i < times; i++) values.push((await fn()).ms);
  return median(values);
}

async function rps(url: string): Promise<number> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_S });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result.requests.average;
}

interface Server {
  base: string;
  pid: number;
  child: ReturnType<typeof spawnTs>;
}

/**
 * The longest event-loop stall of a server, in ms, over 60 sequential reads that each run git:
 * commit lists (`git log`) and diffs of a commit (`git diff`, streamed). prom-client samples the
 * delay with a 10 ms timer and resets at each scrape; its minimum is that sampling interval, so
 * the stall is max − min.
 */
async function loopStall(repository: string): Promise<number> {
  const metricsUrl = `${new URL(repository).origin}/-/metrics`;
  const lagMax = async () => {
    const text = await (await fetch(metricsUrl)).text();
    const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
    return (read('nodejs_eventloop_lag_max_seconds') - read('nodejs_eventloop_lag_min_seconds')) * 1000;
  };
  const urls = [`${repository}/commits?ref_name=main&per_page=5`, `${repository}/commits/main/diff`];
  for (const url of urls) await timeDownload(url);
  await lagMax();
  for (let i = 0; i < 60; i++) await timeDownload(urls[i % 2] as string);
  return lagMax();
}

/** Starts Depot on an empty storage and makes public projects served from the generated repositories. */
async function startDepot(storage: string, repos: Record<string, string>, env: Record<string, string> = {}) {
  const { child, api: base } = await startDepotServer(storage, env);
  const ids: Record<string, number> = {};
  for (const [name, gitDir] of Object.entries(repos)) {
    const project = await benchApi(base, 'POST', '/projects', { name, path: name, visibility: 'public' });
    const target = path.join(storage, 'repositories', 'default', `${Storages.hashedPath(project.id)}.git`);
    fs.rmSync(target, { recursive: true, force: true });
    fs.symlinkSync(gitDir, target);
    ids[name] = project.id;
  }
  return { server: { base, pid: child.pid as number, child } satisfies Server, ids };
}

export async function run(): Promise<{ measurements: Measurement[]; notes: string[] }> {
  // Only the repositories the chosen sections read are built (the three take ~1 GiB).
  const repos = {
    history: ['rps', 'history', 'loop'].some((s) => ONLY.has(s)) ? await benchRepository('history') : '',
    large: ONLY.has('archive') ? await benchRepository('large') : '',
    huge: ONLY.has('raw') ? await benchRepository('huge-blob') : '',
  };
  /** A revision of a fixture, or '-' when its sections are not run. */
  const revOf = (gitDir: string, rev: string) => (gitDir ? gitOut(gitDir, 'rev-parse', rev) : Promise.resolve('-'));
  const largeSha = await revOf(repos.large, 'main');
  const hugeBlob = await revOf(repos.huge, 'main:huge.bin');
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-repo-'));
  const { server, ids } = await startDepot(
    storage,
    Object.fromEntries(Object.entries(repos).filter(([, gitDir]) => gitDir !== '')),
  );
  const out: Measurement[] = [];
  const notes: string[] = [];
  try {
    const p = (name: keyof typeof repos) => `${server.base}/projects/${ids[name]}/repository`;

    // Archives: the whole 200 MiB tree, through the API and from git archive.
    for (const [format, suffix] of !ONLY.has('archive')
      ? []
      : ([
          ['tar.gz', 'tar.gz'],
          ['zip', 'zip'],
        ] as const)) {
      const url = `${p('large')}/archive.${suffix}?sha=${largeSha}`;
      const api = await medianOf(RUNS, () => timeDownload(url));
      const git = await medianOf(RUNS, () => timeGit(repos.large, ['archive', `--format=${format}`, largeSha]));
      out.push(measurement(`archive ${format} of 200 MiB`, 'ms', api, git, 'git archive', 'lower', '≤ 1.2×'));
      const sample = memorySampler(server.pid);
      await timeDownload(url);
      const growth = sample();
      out.push(
        measurement(`server memory growth, archive ${format}`, 'MiB', growth, 64, 'limit 64 MiB', 'lower', '< 1×'),
      );
    }

    // Raw blob of 500 MiB: throughput and memory.
    if (ONLY.has('raw')) {
      const rawUrl = `${p('huge')}/blobs/${hugeBlob}/raw`;
      const sample = memorySampler(server.pid);
      const rawApi = await medianOf(RUNS, () => timeDownload(rawUrl));
      const rawGrowth = sample();
      const rawGit = await medianOf(RUNS, () =>
        timeGit(repos.huge, ['-c', `core.bigFileThreshold=${INLINE_BLOB_BYTES}`, 'cat-file', 'blob', hugeBlob]),
      );
      const mib = 500;
      out.push(
        measurement(
          'raw blob 500 MiB throughput',
          'MiB/s',
          mib / (rawApi / 1000),
          mib / (rawGit / 1000),
          'git cat-file blob',
          'higher',
          '≥ 0.8×',
        ),
      );
      out.push(
        measurement('server memory growth, raw blob 500 MiB', 'MiB', rawGrowth, 64, 'limit 64 MiB', 'lower', '< 1×'),
      );
    }

    // Requests per second on small reads, against a bare Koa handler with the same body.
    const smallPath = 'src/module1/part0/file1.txt';
    const historySha = await revOf(repos.history, 'main');
    const smallBlob = await revOf(repos.history, `main:${smallPath}`);
    // The floor: /-/liveness passes only the request middleware (request id, log, metrics, error
    // mapping) and answers a constant; no API route can be faster than it.
    const endpoints: [string, string, string | undefined][] = !ONLY.has('rps')
      ? []
      : [
          ['tree', `${p('history')}/tree?path=src/module1/part0&ref=${historySha}`, '≥ 0.5×'],
          ['blob', `${p('history')}/blobs/${smallBlob}`, '≥ 0.5×'],
          ['raw', `${p('history')}/blobs/${smallBlob}/raw`, '≥ 0.5×'],
          ['/-/liveness, the middleware floor', `${new URL(server.base).origin}/-/liveness`, undefined],
        ];
    for (const [name, url, goal] of endpoints) {
      const res = await fetch(url);
      const body = await res.text();
      if (!res.ok) throw new Error(`${url}: ${res.status} ${body}`);
      const depot = await rps(url);
      const barePort = await freePort();
      const bare = spawnTs('bench/fixtures/bare-koa.ts', { PORT: String(barePort), BODY_TEXT: body });
      await waitFor(`http://127.0.0.1:${barePort}/-/readiness`, performance.now());
      const baseline = await rps(`http://127.0.0.1:${barePort}/x`);
      await stop(bare);
      out.push(
        measurement(
          `GET ${name} (${CONNECTIONS} connections)`,
          'req/s',
          depot,
          baseline,
          'bare Koa handler, same body',
          'higher',
          goal,
        ),
      );
    }

    // History-wide operations on 50,000 commits.
    const history: [string, string, string[], string][] = !ONLY.has('history')
      ? []
      : [
          [
            'contributors',
            `${p('history')}/contributors`,
            ['shortlog', '-sne', '--no-merges', '--max-count=2000', 'main'],
            'git shortlog -sne',
          ],
          [
            'compare main...side',
            `${p('history')}/compare?from=main&to=side`,
            ['diff', 'main...side'],
            'git diff main...side',
          ],
          [
            'merge base',
            `${p('history')}/merge_base?refs[]=main&refs[]=side`,
            ['merge-base', 'main', 'side'],
            'git merge-base',
          ],
        ];
    for (const [name, url, args, baselineName] of history) {
      const api = await medianOf(RUNS + 2, () => timeDownload(url));
      const git = await medianOf(RUNS + 2, () => timeGit(repos.history, args));
      out.push(measurement(`${name} (50,000 commits)`, 'ms', api, git, baselineName, 'lower', '≤ 1.5×'));
    }
    // The server's event loop while it runs git: the longest stall over a series of reads that each
    // start git processes, against the same server starting them itself (DEPOT_SPAWNER=off),
    // where each fork copies the page tables of PGlite's memory.
    if (ONLY.has('loop')) {
      const viaSpawner = await loopStall(p('history'));
      const forkStorage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-fork-'));
      const forking = await startDepot(forkStorage, { history: repos.history }, { DEPOT_SPAWNER: 'off' });
      try {
        const direct = await loopStall(`${forking.server.base}/projects/${forking.ids.history}/repository`);
        out.push(
          measurement(
            'longest event-loop stall over 60 reads that start git',
            'ms',
            viaSpawner,
            direct,
            'git started by the server itself',
            'lower',
            '—',
          ),
        );
      } finally {
        await stop(forking.server.child);
        fs.rmSync(forkStorage, { recursive: true, force: true });
      }
    }
    notes.push(
      `repositories: history ${repos.history ? await gitOut(repos.history, 'rev-list', '--count', '--all') : '-'} commits; large ${largeSha.slice(0, 8)}; huge blob ${hugeBlob.slice(0, 8)}`,
    );
  } finally {
    await stop(server.child);
    fs.rmSync(storage, { recursive: true, force: true });
  }
  return { measurements: out, notes };
}
