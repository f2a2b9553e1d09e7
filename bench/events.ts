/**
 * The first page of `GET /projects/:id/events` on a project with 1,000,000 events against the
 * same request on a project with 100 events, in the same run (issue 17's goal: within 2×). The
 * events are written by one INSERT ... SELECT over generate_series, straight into the server's
 * database; the requests go through HTTP as a client's would.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres.js';
import { BENCH_TOKEN, benchApi, type Measurement, measurement, median, startDepotServer, stop } from './harness.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const BIG = 1_000_000;
const SMALL = 100;

/** Fills a project with `count` events: nine pushes in ten, the rest memberships, one a second back in time. */
async function fill(client: pg.Client, projectId: number, authorId: number, count: number): Promise<void> {
  await client.query(
    `INSERT INTO events (action, author_id, project_id, push_data, created_at)
     SELECT CASE WHEN g % 10 = 0 THEN 'joined' ELSE 'pushed' END, $1, $2,
       CASE WHEN g % 10 = 0 THEN 'null'::jsonb ELSE jsonb_build_object(
         'commit_count', 1, 'action', 'pushed', 'ref_type', 'branch',
         'commit_from', md5(g::text) || '00000000', 'commit_to', md5((g + 1)::text) || '00000000',
         'ref', 'main', 'commit_title', 'Change ' || g, 'ref_count', null) END,
       now() - make_interval(secs => $3 - g)
     FROM generate_series(1, $3::int) AS g`,
    [authorId, projectId, count],
  );
}

async function timeGet(url: string): Promise<{ ms: number; rows: number }> {
  const started = performance.now();
  const res = await fetch(url, { headers: { 'PRIVATE-TOKEN': BENCH_TOKEN } });
  const body = (await res.json()) as unknown[];
  const ms = performance.now() - started;
  if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
  return { ms, rows: body.length };
}

/** Medians of request pairs run in turn (a, b, a, b...) after a warm-up, so load hits both alike. */
async function interleaved(urls: string[]): Promise<number[]> {
  for (let i = 0; i < 20; i++) for (const url of urls) await timeGet(url);
  const values: number[][] = urls.map(() => []);
  for (let i = 0; i < RUNS; i++) {
    for (const [k, url] of urls.entries()) values[k]?.push((await timeGet(url)).ms);
  }
  return values.map(median);
}

export async function run(): Promise<{ measurements: Measurement[]; notes: string[] }> {
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-events-'));
  const pgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-events-pg-'));
  fs.chmodSync(pgDir, 0o755);
  const external = process.env.BENCH_DATABASE_URL;
  const database = external ? null : await startEmbeddedPostgres({ storageDir: pgDir, durable: false });
  const url = external ?? (database?.url as string);
  const { child, api } = await startDepotServer(storage, { DATABASE_URL: url });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const out: Measurement[] = [];
  const notes: string[] = [];
  try {
    const me = await benchApi(api, 'GET', '/user');
    const big = await benchApi(api, 'POST', '/projects', { name: 'busy', path: 'busy', visibility: 'public' });
    const small = await benchApi(api, 'POST', '/projects', { name: 'quiet', path: 'quiet', visibility: 'public' });
    const filled = performance.now();
    await fill(client, big.id, me.id, BIG);
    await fill(client, small.id, me.id, SMALL);
    await client.query('VACUUM ANALYZE events');
    notes.push(`${BIG.toLocaleString('en')} events written in ${((performance.now() - filled) / 1000).toFixed(1)} s`);

    const feed = (id: number, query = '') => `${api}/projects/${id}/events${query}`;
    const [bigFirst, smallFirst] = await interleaved([feed(big.id), feed(small.id)]);
    out.push(
      measurement(
        `first page of project events, ${BIG.toLocaleString('en')} events`,
        'ms',
        bigFirst as number,
        smallFirst as number,
        `the same on ${SMALL} events`,
        'lower',
        '≤ 2×',
      ),
    );
    const [bigJoined, smallJoined] = await interleaved([
      feed(big.id, '?action=joined&per_page=100'),
      feed(small.id, '?action=joined&per_page=100'),
    ]);
    out.push(
      measurement(
        `project events filtered by action, 100 a page, ${BIG.toLocaleString('en')} events`,
        'ms',
        bigJoined as number,
        smallJoined as number,
        `the same on ${SMALL} events`,
        'lower',
        '≤ 2×',
      ),
    );
    const [bigUser] = await interleaved([`${api}/users/${me.id}/events`]);
    notes.push(
      `GET /users/:id/events of the author of all ${(BIG + SMALL).toLocaleString('en')} events: ${(bigUser as number).toFixed(2)} ms (median)`,
    );
    notes.push(
      `median of ${RUNS} interleaved requests after 20 warm-up rounds; X-Total is counted up to 10,001 rows as GitLab's EventsFinder counts it`,
    );
  } finally {
    await client.end();
    await stop(child);
    await database?.stop();
    fs.rmSync(storage, { recursive: true, force: true });
    fs.rmSync(pgDir, { recursive: true, force: true });
  }
  return { measurements: out, notes };
}
