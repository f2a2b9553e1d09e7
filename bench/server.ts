/**
 * The request path and the embedded database (issue 15): request rates of the routes API
 * clients call most against `GET /-/liveness` of the same server in the same run (the floor
 * every route passes through), the memory of the whole process group (server, git spawner,
 * embedded PostgreSQL), WORKERS=2 against WORKERS=1, and the first and later start.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import {
  BENCH_TOKEN,
  freePort,
  type Measurement,
  measurement,
  median,
  processTree,
  spawnTs,
  stop,
  waitFor,
} from './harness.js';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
const CONNECTIONS = 50;
const WARM_REQUESTS = 10_000;
const STARTS = 3;
const MIB = 2 ** 20;

interface Server {
  child: ChildProcess;
  origin: string;
  ms: number;
}

/** Starts Depot as `npm start` does (node with tsx's loader, no wrapper process). */
async function startDepot(storage: string, env: Record<string, string> = {}): Promise<Server> {
  const port = await freePort();
  const since = performance.now();
  const child = spawnTs('src/main.ts', {
    STORAGE_DIR: storage,
    PORT: String(port),
    LOG_LEVEL: 'warn',
    ADMIN_TOKEN: BENCH_TOKEN,
    ...env,
  });
  const origin = `http://127.0.0.1:${port}`;
  const ms = await waitFor(`${origin}/-/readiness`, since);
  return { child, origin, ms };
}

async function api(origin: string, method: string, route: string, token: string, body?: unknown): Promise<any> {
  const res = await fetch(`${origin}/api/v4${route}`, {
    method,
    headers: { 'PRIVATE-TOKEN': token, 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
  return text === '' ? undefined : JSON.parse(text);
}

/** Requests per second at saturation (the median of autocannon's per-second samples). */
async function rate(url: string, headers: Record<string, string> = {}): Promise<number> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_S, headers });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result.requests.average;
}

/**
 * Memory of the server's whole process group: the server, its spawner and git, and the embedded
 * PostgreSQL server (its own process group) with its backends. PSS shares each page among the
 * processes that map it (PostgreSQL's shared buffers, node's code), so the sum counts each once;
 * RSS, summed, counts shared pages again for every process.
 */
function groupMemory(server: ChildProcess, storage: string): { pss: number; rss: number; processes: number } {
  // The embedded server is a child of the process that started it, in a process group of its own.
  const pids = new Set(processTree(server.pid as number));
  try {
    const postmaster = Number(fs.readFileSync(path.join(storage, 'db', 'postmaster.pid'), 'utf8').split('\n')[0]);
    for (const pid of processTree(postmaster)) pids.add(pid);
  } catch {
    // external database
  }
  let pss = 0;
  let rss = 0;
  for (const pid of pids) {
    try {
      const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
      pss += Number(/^Pss:\s+(\d+)/m.exec(rollup)?.[1] ?? 0) * 1024;
      rss += Number(/^Rss:\s+(\d+)/m.exec(rollup)?.[1] ?? 0) * 1024;
    } catch {
      // ended while read
    }
  }
  return { pss: pss / MIB, rss: rss / MIB, processes: pids.size };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 2_000));

export async function run(): Promise<{ measurements: Measurement[]; notes: string[] }> {
  const notes: string[] = [];
  const firsts: number[] = [];
  const laters: number[] = [];
  const storages: string[] = [];
  try {
    for (let i = 0; i < STARTS; i++) {
      const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-server-'));
      fs.chmodSync(storage, 0o755); // as root the embedded database runs as postgres, who must reach it
      storages.push(storage);
      const first = await startDepot(storage);
      firsts.push(first.ms);
      await stop(first.child);
      const later = await startDepot(storage);
      laters.push(later.ms);
      await stop(later.child);
    }
    const storage = storages[0] as string;
    let server = await startDepot(storage);
    await settle();
    const idle = groupMemory(server.child, storage);

    // A private project with a developer who reads it with a token of their own (the full
    // authentication and access path), and the seeded public demo/sample for anonymous reads.
    const { origin } = server;
    const user = await api(origin, 'POST', '/users', BENCH_TOKEN, {
      username: 'reader',
      email: 'reader@example.com',
      name: 'Reader',
      password: 'a-long-reader-password',
      skip_confirmation: true,
    });
    const token = (
      await api(origin, 'POST', `/users/${user.id}/personal_access_tokens`, BENCH_TOKEN, {
        name: 'bench',
        scopes: ['api'],
      })
    ).token as string;
    const project = await api(origin, 'POST', '/projects', BENCH_TOKEN, {
      name: 'private',
      visibility: 'private',
      initialize_with_readme: true,
    });
    await api(origin, 'POST', `/projects/${project.id}/members`, BENCH_TOKEN, { user_id: user.id, access_level: 30 });
    const demo = await api(origin, 'GET', '/projects/demo%2Fsample', BENCH_TOKEN);
    const entries = (await api(origin, 'GET', `/projects/${demo.id}/repository/tree`, BENCH_TOKEN)) as {
      type: string;
      id: string;
    }[];
    const blob = entries.find((e) => e.type === 'blob')?.id as string;
    const auth = { 'PRIVATE-TOKEN': token };
    const base = `${origin}/api/v4/projects`;

    const floor = await rate(`${origin}/-/liveness`);
    const authTree = await rate(`${base}/${project.id}/repository/tree`, auth);
    const authProject = await rate(`${base}/${project.id}`, auth);
    const anonTree = await rate(`${base}/${demo.id}/repository/tree`);
    const anonBlob = await rate(`${base}/${demo.id}/repository/blobs/${blob}`);
    const anonRaw = await rate(`${base}/${demo.id}/repository/blobs/${blob}/raw`);
    await autocannon({
      url: `${base}/${project.id}/repository/tree`,
      connections: 10,
      amount: WARM_REQUESTS,
      headers: auth,
    });
    await settle();
    const busy = groupMemory(server.child, storage);
    notes.push(
      `memory idle after start: ${idle.pss.toFixed(1)} MiB PSS (${idle.rss.toFixed(1)} MiB RSS summed) over ${idle.processes} processes; ` +
        `after ${WARM_REQUESTS} requests: ${busy.pss.toFixed(1)} MiB PSS (${busy.rss.toFixed(1)} MiB RSS) over ${busy.processes}`,
    );
    await stop(server.child);

    server = await startDepot(storage, { WORKERS: '2' });
    await settle();
    const twoIdle = groupMemory(server.child, storage);
    const twoTree = await rate(`${server.origin}/api/v4/projects/${project.id}/repository/tree`, auth);
    await stop(server.child);
    notes.push(`WORKERS=2 idle: ${twoIdle.pss.toFixed(1)} MiB PSS over ${twoIdle.processes} processes`);
    notes.push(`${os.cpus().length} cores; autocannon runs on the same cores as the server`);

    const floorName = 'GET /-/liveness of the same server';
    return {
      measurements: [
        measurement('authenticated tree (50 connections)', 'req/s', authTree, floor, floorName, 'higher', '≥ 0.5×'),
        measurement('authenticated GET /projects/:id', 'req/s', authProject, floor, floorName, 'higher', '≥ 0.3×'),
        measurement('anonymous tree', 'req/s', anonTree, floor, floorName, 'higher', '≥ 0.5×'),
        measurement('anonymous blob', 'req/s', anonBlob, floor, floorName, 'higher', '≥ 0.5×'),
        measurement('anonymous raw', 'req/s', anonRaw, floor, floorName, 'higher', '≥ 0.5×'),
        measurement('process group memory, idle after start (PSS)', 'MiB', idle.pss, 200, 'limit', 'lower', '≤ 1×'),
        measurement(
          `process group memory after ${WARM_REQUESTS} requests (PSS)`,
          'MiB',
          busy.pss,
          200,
          'limit',
          'lower',
          '≤ 1×',
        ),
        measurement('authenticated tree, WORKERS=2', 'req/s', twoTree, authTree, 'WORKERS=1', 'higher', '≥ 1.3×'),
        measurement('first start (empty storage)', 'ms', median(firsts), 5_000, 'limit', 'lower', '≤ 1×'),
        measurement('later start', 'ms', median(laters), 1_500, 'limit', 'lower', '≤ 1×'),
      ],
      notes,
    };
  } finally {
    for (const storage of storages) fs.rmSync(storage, { recursive: true, force: true });
  }
}
