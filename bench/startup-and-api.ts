/**
 * Start-up time of `npm start` (first start on an empty storage directory, then a later start)
 * against a bare Koa process, and GET /api/v4/projects/:id throughput against a bare Koa
 * handler serving the same body, all in the same run.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { BENCH_TOKEN, freePort, type Measurement, measurement, median, spawnTs, stop, waitFor } from './harness.js';

const RUNS = 3;
const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
const CONNECTIONS = 10;

async function startDepot(storage: string, port: number) {
  const since = performance.now();
  const child = spawnTs('src/main.ts', {
    STORAGE_DIR: storage,
    PORT: String(port),
    LOG_LEVEL: 'warn',
    ADMIN_TOKEN: BENCH_TOKEN,
  });
  const ms = await waitFor(`http://127.0.0.1:${port}/-/readiness`, since);
  return { child, ms };
}

async function startBare(port: number, body: unknown) {
  const since = performance.now();
  const child = spawnTs('bench/fixtures/bare-koa.ts', { PORT: String(port), BODY_JSON: JSON.stringify(body) });
  const ms = await waitFor(`http://127.0.0.1:${port}/-/readiness`, since);
  return { child, ms };
}

async function throughput(url: string, headers: Record<string, string>): Promise<number> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_S, headers });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result.requests.average;
}

export async function run(): Promise<Measurement[]> {
  const firsts: number[] = [];
  const laters: number[] = [];
  const bares: number[] = [];
  let projectBody: unknown = {};
  let depotRps = 0;
  for (let i = 0; i < RUNS; i++) {
    const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-'));
    try {
      const port = await freePort();
      const first = await startDepot(storage, port);
      firsts.push(first.ms);
      await stop(first.child);
      const later = await startDepot(storage, port);
      laters.push(later.ms);
      if (i === RUNS - 1) {
        // Throughput on the seeded public project, authenticated as root (the full auth path).
        const headers = { 'PRIVATE-TOKEN': BENCH_TOKEN };
        const url = `http://127.0.0.1:${port}/api/v4/projects/1`;
        projectBody = await (await fetch(url, { headers })).json();
        depotRps = await throughput(url, headers);
      }
      await stop(later.child);
      const bare = await startBare(await freePort(), {});
      bares.push(bare.ms);
      await stop(bare.child);
    } finally {
      fs.rmSync(storage, { recursive: true, force: true });
    }
  }
  const barePort = await freePort();
  const bare = await startBare(barePort, projectBody);
  const bareRps = await throughput(`http://127.0.0.1:${barePort}/api/v4/projects/1`, {});
  await stop(bare.child);
  return [
    measurement(
      'first start (empty storage: database init, root, demo seed)',
      'ms',
      median(firsts),
      median(bares),
      'bare Koa process start',
      'lower',
    ),
    measurement('later start', 'ms', median(laters), median(bares), 'bare Koa process start', 'lower'),
    measurement(
      `GET /api/v4/projects/:id (${CONNECTIONS} connections, ${DURATION_S}s)`,
      'req/s',
      depotRps,
      bareRps,
      'bare Koa handler, same body',
      'higher',
    ),
  ];
}
