import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '..');
export const RESULTS_DIR = path.join(ROOT, 'bench', 'results');

/** One measured figure: the subject, its baseline from the same run, and their ratio. */
export interface Measurement {
  name: string;
  unit: string;
  subject: number;
  baseline: number;
  baselineName: string;
  /** subject / baseline for times; baseline / subject is not used, so read with `better`. */
  ratio: number;
  /** Which direction is better for the ratio. */
  better: 'lower' | 'higher';
  goal?: string;
}

export interface BenchResult {
  benchmark: string;
  date: string;
  machine: { cpus: number; cpuModel: string; memoryGiB: number; node: string };
  measurements: Measurement[];
  notes?: string[];
}

export function measurement(
  name: string,
  unit: string,
  subject: number,
  baseline: number,
  baselineName: string,
  better: 'lower' | 'higher',
  goal?: string,
): Measurement {
  return { name, unit, subject, baseline, baselineName, ratio: subject / baseline, better, ...(goal ? { goal } : {}) };
}

/** Prints a result table and writes bench/results/<benchmark>.json. */
export function report(benchmark: string, measurements: Measurement[], notes: string[] = []): BenchResult {
  const result: BenchResult = {
    benchmark,
    date: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
    },
    measurements,
    notes,
  };
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  fs.writeFileSync(path.join(RESULTS_DIR, `${benchmark}.json`), `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`\n== ${benchmark}\n`);
  for (const m of measurements) {
    const fmt = (v: number) => (v >= 100 ? v.toFixed(0) : v.toFixed(3));
    process.stdout.write(
      `${m.name}: ${fmt(m.subject)} ${m.unit} vs ${m.baselineName} ${fmt(m.baseline)} ${m.unit} → ratio ${m.ratio.toFixed(2)}× (${m.better} is better)${m.goal ? `, goal ${m.goal}` : ''}\n`,
    );
  }
  for (const note of notes) process.stdout.write(`  note: ${note}\n`);
  return result;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A clean environment for child processes. */
export const cleanEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: process.env.HOME ?? '/tmp',
  ...extra,
});

/** Spawns a TypeScript entry point as `npm start` does: node with tsx's loader, no wrapper process. */
export function spawnTs(script: string, env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: ROOT,
    env: cleanEnv(env),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
}

/** Polls `url` until it answers 200; returns the elapsed milliseconds since `since`. */
export async function waitFor(url: string, since: number, timeoutMs = 120_000): Promise<number> {
  while (performance.now() - since < timeoutMs) {
    try {
      const res = await fetch(url);
      if (res.ok) return performance.now() - since;
    } catch {
      // not yet listening
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${url} did not answer in time`);
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
}

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

/** The administrator token every benchmark server starts with (`ADMIN_TOKEN`). */
export const BENCH_TOKEN = 'glpat-bench-token-000000000000';

export interface DepotServer {
  child: ChildProcess;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** `<origin>/api/v4` */
  api: string;
}

/**
 * Starts Depot (`src/main.ts`, as `npm start` does) on an empty storage, on PostgreSQL when
 * BENCH_DATABASE_URL is set (an empty database) and its embedded server otherwise, and waits until
 * it is ready.
 */
export async function startDepotServer(storage: string, env: Record<string, string> = {}): Promise<DepotServer> {
  const port = await freePort();
  fs.chmodSync(storage, 0o755); // as root the embedded database runs as postgres, who must reach it
  const child = spawnTs('src/main.ts', {
    ...env,
    STORAGE_DIR: storage,
    PORT: String(port),
    LOG_LEVEL: 'warn',
    SEED_DEMO: 'false',
    ADMIN_TOKEN: BENCH_TOKEN,
    ...(process.env.BENCH_DATABASE_URL ? { DATABASE_URL: process.env.BENCH_DATABASE_URL } : {}),
  });
  const origin = `http://127.0.0.1:${port}`;
  try {
    await waitFor(`${origin}/-/readiness`, performance.now());
  } catch (error) {
    await stop(child);
    throw error;
  }
  return { child, origin, api: `${origin}/api/v4` };
}

/** Calls the API as the benchmark's administrator; an error status throws. */
export async function benchApi(api: string, method: string, route: string, body?: unknown): Promise<any> {
  const res = await fetch(`${api}${route}`, {
    method,
    headers: { 'PRIVATE-TOKEN': BENCH_TOKEN, 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
  return text === '' ? undefined : JSON.parse(text);
}

/** A process and all its descendants, from /proc (Linux). */
export function processTree(pid: number): number[] {
  const pids = [pid];
  try {
    for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
      const children = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      for (const child of children ? children.split(' ') : []) pids.push(...processTree(Number(child)));
    }
  } catch {
    // the process ended while it was read
  }
  return pids;
}

/**
 * Anonymous resident memory (heap, stacks, buffers) of a process and all its descendants, in
 * bytes (Linux /proc RssAnon). File-backed pages are left out: git maps pack files, and those
 * pages are the kernel's evictable page cache, not memory the server holds.
 */
export function treeRss(pid: number): number {
  let total = 0;
  for (const member of processTree(pid)) {
    try {
      const status = fs.readFileSync(`/proc/${member}/status`, 'utf8');
      total += Number(/RssAnon:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
    } catch {
      // ended while read
    }
  }
  return total;
}
