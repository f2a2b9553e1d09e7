/**
 * Sustained load (issue 23): 50 clients over a mix of reads, API writes, pushes, clones, archives,
 * runner polls and webhook deliveries, against Depot on its embedded database with WORKERS=2, for
 * a duration given in seconds (`npx tsx bench/load.ts 600` for the report; `npm run bench -- load`
 * runs LOAD_DURATION, 60 s by default). It checks that no request failed, that every
 * acknowledged write and push is there at the end, and samples the memory of the whole process
 * group (server processes, git, embedded PostgreSQL) every 5 s: the curve is printed and written to
 * bench/results/load.json, and the figure is the memory at the end against the memory after
 * warm-up (the first fifth of the run).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { BENCH_TOKEN, benchApi, type Measurement, measurement, report, startDepotServer, stop } from './harness.js';

const exec = promisify(execFile);
const CLIENTS = 50;
const SAMPLE_MS = 5_000;
const MIB = 2 ** 20;

/** Anonymous resident memory of the server's process tree and the embedded database's. */
function memoryOf(serverPid: number, storage: string): number {
  const pids = new Set<number>();
  const walk = (pid: number) => {
    pids.add(pid);
    try {
      for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
        const children = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
        for (const child of children ? children.split(' ') : []) walk(Number(child));
      }
    } catch {
      // ended
    }
  };
  walk(serverPid);
  try {
    walk(Number(fs.readFileSync(path.join(storage, 'db', 'postmaster.pid'), 'utf8').split('\n')[0]));
  } catch {
    // no embedded database (BENCH_DATABASE_URL)
  }
  let total = 0;
  for (const pid of pids) {
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      total += Number(/RssAnon:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
    } catch {
      // ended
    }
  }
  return total;
}

const gitEnv = {
  ...process.env,
  GIT_TERMINAL_PROMPT: '0',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 'Load',
  GIT_AUTHOR_EMAIL: 'load@example.com',
  GIT_COMMITTER_NAME: 'Load',
  GIT_COMMITTER_EMAIL: 'load@example.com',
};
const git = (cwd: string, ...args: string[]) => exec('git', args, { cwd, env: gitEnv, maxBuffer: 64 * MIB });

export async function run(durationS = Number(process.env.LOAD_DURATION ?? 60)) {
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-load-'));
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-load-clients-'));
  // Webhook deliveries land here.
  let delivered = 0;
  const receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      delivered += 1;
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const server = await startDepotServer(storage, { WORKERS: '2' });
  const notes: string[] = [];
  try {
    const { api, origin } = server;
    const project = await benchApi(api, 'POST', '/projects', { name: 'load', initialize_with_readme: true });
    const id = project.id as number;
    const openapi = (await (await fetch(`${api}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    // Webhooks and runners arrive with their modules: the mix uses them when the routes exist.
    const hooks = '/api/v4/projects/{id}/hooks' in openapi.paths;
    // Each client is a user of its own (GitLab's archive limit is 5 a minute per user and project,
    // which each client keeps to).
    const clientTokens: string[] = [];
    for (let c = 0; c < CLIENTS; c++) {
      const user = await benchApi(api, 'POST', '/users', {
        username: `load${c}`,
        email: `load${c}@example.com`,
        name: `Load ${c}`,
        password: `load-password-${c}-long`,
        skip_confirmation: true,
      });
      await benchApi(api, 'POST', `/projects/${id}/members`, { user_id: user.id, access_level: 30 });
      const token = await benchApi(api, 'POST', `/users/${user.id}/personal_access_tokens`, {
        name: 'load',
        scopes: ['api'],
      });
      clientTokens.push(token.token);
    }
    await benchApi(api, 'PUT', `/projects/${id}`, { default_branch: 'main' });
    const runners = '/api/v4/jobs/request' in openapi.paths;
    if (hooks) {
      await benchApi(api, 'PUT', '/application/settings', { allow_local_requests_from_web_hooks_and_services: true });
      await benchApi(api, 'POST', `/projects/${id}/hooks`, { url: hookUrl, push_events: true });
    } else notes.push('no webhook routes in this build: the mix has no webhook deliveries');
    if (!runners) notes.push('no runner routes in this build: the mix has no runner polls');
    const remote = new URL('/root/load.git', origin);
    remote.username = 'root';
    remote.password = BENCH_TOKEN;

    const counts: Record<string, number> = {};
    const failures: string[] = [];
    const acknowledged = new Map<string, string>();
    const request = async (c: number, what: string, method: string, route: string, body?: unknown, ok = [200, 201]) => {
      const res = await fetch(`${api}${route}`, {
        method,
        headers: { 'PRIVATE-TOKEN': clientTokens[c] as string, 'Content-Type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const buffer = await res.arrayBuffer();
      counts[what] = (counts[what] ?? 0) + 1;
      if (!ok.includes(res.status)) {
        failures.push(`${what} ${method} ${route}: ${res.status} ${Buffer.from(buffer).toString().slice(0, 200)}`);
      }
      return { status: res.status, body: buffer };
    };
    let stopAt = 0;
    let sequence = 0;
    const client = async (c: number) => {
      const work = path.join(scratch, `client-${c}`);
      let cloned = false;
      const archives: number[] = [];
      while (Date.now() < stopAt) {
        const roll = Math.random();
        sequence += 1;
        const n = sequence;
        try {
          if (roll < 0.45) {
            const routes = [
              `/projects/${id}`,
              `/projects/${id}/repository/tree`,
              `/projects/${id}/repository/files/README.md/raw?ref=main`,
              `/projects/${id}/repository/commits?per_page=20`,
              `/projects/${id}/repository/branches?per_page=20`,
              `/projects/${id}/events`,
            ];
            await request(c, 'read', 'GET', routes[n % routes.length] as string);
          } else if (roll < 0.6) {
            const branch = `api-${c}-${n}`;
            const res = await request(c, 'write', 'POST', `/projects/${id}/repository/commits`, {
              branch,
              start_branch: 'main',
              commit_message: branch,
              actions: [{ action: 'create', file_path: `${branch}.txt`, content: `${n}\n` }],
            });
            if (res.status === 201) acknowledged.set(branch, JSON.parse(Buffer.from(res.body).toString()).id);
          } else if (roll < 0.7 && archives.filter((t) => t > Date.now() - 60_000).length < 5) {
            archives.push(Date.now());
            await request(c, 'archive', 'GET', `/projects/${id}/repository/archive.tar.gz?sha=main`);
          } else if (roll < 0.8 && runners) {
            await request(c, 'runner poll', 'POST', '/jobs/request', { token: 'glrt-load-unknown' }, [201, 204, 403]);
          } else if (roll < 0.9) {
            // Clone once, then push a branch of this client's own.
            if (!cloned) {
              fs.rmSync(work, { recursive: true, force: true });
              await git(scratch, 'clone', '-q', remote.toString(), work);
              counts.clone = (counts.clone ?? 0) + 1;
              cloned = true;
            } else {
              const branch = `push-${c}-${n}`;
              await git(work, 'checkout', '-q', '-B', branch, 'origin/main');
              fs.writeFileSync(path.join(work, `${branch}.txt`), `${n}\n`);
              await git(work, 'add', '.');
              await git(work, 'commit', '-q', '-m', branch);
              const sha = (await git(work, 'rev-parse', 'HEAD')).stdout.trim();
              await git(work, 'push', '-q', 'origin', `${branch}:${branch}`);
              acknowledged.set(branch, sha);
              counts.push = (counts.push ?? 0) + 1;
            }
          } else {
            fs.rmSync(`${work}-fresh`, { recursive: true, force: true });
            await git(scratch, 'clone', '-q', '--depth', '1', remote.toString(), `${work}-fresh`);
            counts.clone = (counts.clone ?? 0) + 1;
          }
        } catch (error) {
          failures.push(`client ${c}: ${String(error).slice(0, 300)}`);
        }
      }
    };

    const curve: { second: number; mib: number }[] = [];
    const started = Date.now();
    stopAt = started + durationS * 1000;
    const sampler = setInterval(() => {
      curve.push({
        second: Math.round((Date.now() - started) / 1000),
        mib: Math.round(memoryOf(server.child.pid as number, storage) / MIB),
      });
    }, SAMPLE_MS);
    await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
    clearInterval(sampler);

    // Nothing lost: every acknowledged commit and push is its branch's tip.
    const tips = new Map<string, string>();
    for (let page = 1; ; page++) {
      const list = (await benchApi(api, 'GET', `/projects/${id}/repository/branches?per_page=100&page=${page}`)) as {
        name: string;
        commit: { id: string };
      }[];
      for (const b of list) tips.set(b.name, b.commit.id);
      if (list.length < 100) break;
    }
    const lost = [...acknowledged].filter(([branch, sha]) => tips.get(branch) !== sha);
    const warm = curve.filter((s) => s.second >= durationS / 5);
    const warmMib = warm[0]?.mib ?? curve[0]?.mib ?? 0;
    const endMib = curve.at(-1)?.mib ?? 0;
    const peakMib = Math.max(...curve.map((s) => s.mib));
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    notes.push(
      `${durationS} s, ${CLIENTS} clients, WORKERS=2, embedded PostgreSQL: ${total} operations ${JSON.stringify(counts)}`,
      `failures: ${failures.length}${failures.length ? ` (first: ${failures.slice(0, 5).join(' | ')})` : ''}`,
      `acknowledged writes and pushes: ${acknowledged.size}, lost: ${lost.length}`,
      `webhook deliveries received: ${delivered}`,
      `memory (MiB, every ${SAMPLE_MS / 1000} s): ${curve.map((s) => `${s.second}s=${s.mib}`).join(' ')}`,
      `peak ${peakMib} MiB`,
    );
    const measurements: Measurement[] = [
      measurement(
        'memory at the end vs after warm-up (server processes, git, PostgreSQL; MiB)',
        'MiB',
        endMib,
        warmMib,
        'after warm-up',
        'lower',
        'flat: ≤ 1.2×',
      ),
      measurement(
        'operations lost or failed vs operations',
        'operations',
        failures.length + lost.length,
        total,
        'operations',
        'lower',
        '0',
      ),
    ];
    return { measurements, notes };
  } finally {
    await stop(server.child);
    receiver.close();
    fs.rmSync(storage, { recursive: true, force: true });
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const seconds = Number(process.argv[2] ?? process.env.LOAD_DURATION ?? 60);
  const outcome = await run(seconds);
  report('load', outcome.measurements, outcome.notes);
  for (const note of outcome.notes) process.stdout.write(`${note}\n`);
}
