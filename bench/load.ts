/**
 * Sustained load (issue 23): 50 clients over a mix of reads, API writes, pushes, clones, archives,
 * runner polls and webhook deliveries, against Depot on its embedded database with WORKERS=2, for
 * a duration given in seconds (`npx tsx bench/load.ts 600` for the report; `npm run bench -- load`
 * runs LOAD_DURATION, 60 s by default). It checks that no request failed, that every
 * acknowledged write and push is there at the end, and samples the memory of every process
 * (server processes, their git spawners, git, embedded PostgreSQL and its backends; PSS of
 * anonymous and shared memory, so PostgreSQL's shared buffers count once) every 5 s, with the V8
 * heap of each server process read from /-/metrics. The figures are the slope of the total after
 * warm-up (least squares, MiB per minute, against a goal of 1) and the last minute's mean against
 * the first minute's after warm-up; the curve, by process, goes into the notes and
 * bench/results/load.json. LOAD_WARMUP sets the warm-up in seconds (the first fifth of the run
 * otherwise), LOAD_CURVE_FILE writes every sample (by process, with the heaps) as JSON, and
 * LOAD_NODE_OPTIONS is given to the server as NODE_OPTIONS (`--heapsnapshot-signal=SIGUSR2` to take
 * heap snapshots of a server process with `kill -USR2`).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  BENCH_TOKEN,
  benchApi,
  type Measurement,
  measurement,
  processTree,
  report,
  startDepotServer,
  stop,
} from './harness.js';

const exec = promisify(execFile);
const CLIENTS = 50;
/** Registered runners the clients poll as (client c is runner c mod RUNNERS). */
const RUNNERS = 10;
const SAMPLE_MS = 5_000;
const MIB = 2 ** 20;

/** One process's memory: anonymous and shared-memory pages (PSS, so a page shared by n processes counts 1/n). */
interface ProcessMemory {
  pid: number;
  ppid: number;
  role: string;
  /** Pss_Anon + Pss_Shmem in bytes: what the process holds, file-backed pages (code, git's mapped packs) left out. */
  held: number;
}

function readProcess(pid: number): Omit<ProcessMemory, 'role'> & { shared: number; argv: string; comm: string } {
  const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(rollup)?.[1] ?? 0) * 1024;
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // comm is in parentheses and may hold spaces: the fields after the last ')' are fixed.
  const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  return {
    pid,
    ppid,
    held: kib('Pss_Anon') + kib('Pss_Shmem'),
    shared: kib('Pss_Shmem'),
    argv: fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '),
    comm: fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(),
  };
}

/**
 * The memory of the server's process tree and the embedded database's, process by process with a
 * role each: `primary`, `worker <pid>` (the cluster's server processes), `spawner of <pid>` (the
 * git spawner of the primary or of a server process), `esbuild` (tsx's transform service), `postgres` (the postmaster and its backends;
 * shared buffers are shared memory and count once in PSS), `git <subcommand>` (the long-lived
 * `cat-file` batch processes; clones, pushes, archives and housekeeping in flight), `git` (a
 * spawner's child not yet exec'd) and `other`.
 */
function memoryOf(serverPid: number, storage: string): ProcessMemory[] {
  const pids = new Set(processTree(serverPid));
  let postmaster = 0;
  try {
    postmaster = Number(fs.readFileSync(path.join(storage, 'db', 'postmaster.pid'), 'utf8').split('\n')[0]);
    for (const pid of processTree(postmaster)) pids.add(pid);
  } catch {
    // no embedded database (BENCH_DATABASE_URL)
  }
  const read = new Map<number, ReturnType<typeof readProcess>>();
  for (const pid of pids) {
    try {
      read.set(pid, readProcess(pid));
    } catch {
      // ended while read
    }
  }
  // Node processes the primary forked: its server processes (cluster workers) and its own spawner.
  const isSpawner = (p: { argv: string }) => p.argv.includes('spawner.mjs');
  const serverProcesses = new Set(
    [...read.values()]
      .filter((p) => p.ppid === serverPid && !isSpawner(p) && p.comm.startsWith('node'))
      .map((p) => p.pid),
  );
  serverProcesses.add(serverPid);
  const seen: ProcessMemory[] = [];
  for (const p of read.values()) {
    let role = 'other';
    if (p.pid === serverPid) role = 'primary';
    else if (p.pid === postmaster || p.argv.startsWith('postgres')) role = 'postgres';
    else if (serverProcesses.has(p.pid)) role = `worker ${p.pid}`;
    // A spawner's child between fork and exec still shows the spawner's command line.
    else if (isSpawner(p) && serverProcesses.has(p.ppid)) role = `spawner of ${p.ppid}`;
    else if (isSpawner(p)) role = 'git';
    else if (p.comm.startsWith('git')) role = `git ${gitSubcommand(p.argv)}`;
    else if (p.comm.includes('esbuild')) role = 'esbuild';
    if (role === 'postgres') {
      // Shared memory is PostgreSQL's buffer cache (shared_buffers, a fixed size), counted as the
      // database first touches its pages: apart from the backends' own memory.
      seen.push({ pid: p.pid, ppid: p.ppid, role, held: p.held - p.shared });
      seen.push({ pid: p.pid, ppid: p.ppid, role: 'postgres shared buffers', held: p.shared });
    } else seen.push({ pid: p.pid, ppid: p.ppid, role, held: p.held });
  }
  return seen;
}

/**
 * The git subcommand of a command line (`git --git-dir=… cat-file --batch-command` is `cat-file`,
 * `git-upload-pack …` is `upload-pack`), so that long-lived batch processes, clones, pushes and
 * housekeeping are told apart.
 */
function gitSubcommand(argv: string): string {
  const words = argv.trim().split(' ');
  const first = path.basename(words[0] ?? '');
  if (first.startsWith('git-')) return first.slice(4);
  for (let i = 1; i < words.length; i++) {
    const word = words[i] as string;
    if (word === '-c' || word === '-C') i += 1;
    else if (!word.startsWith('-')) return word;
  }
  return '?';
}

/** Sums by role (spawners and workers kept apart by pid). */
function byRole(processes: ProcessMemory[]): Record<string, number> {
  const sums: Record<string, number> = {};
  for (const p of processes) sums[p.role] = (sums[p.role] ?? 0) + p.held;
  return sums;
}

/** A server process's own figures from `/-/metrics` (prom-client's defaults), in bytes. */
interface HeapFigures {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
}

/** One `/-/metrics` answer on a connection of its own, so that the cluster hands it to the next server process. */
function scrapeOnce(origin: string): Promise<HeapFigures | null> {
  return new Promise((resolve) => {
    const req = http.get(`${origin}/-/metrics`, { agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => {
        const value = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
        resolve({
          rss: value('process_resident_memory_bytes'),
          heapUsed: value('nodejs_heap_size_used_bytes'),
          heapTotal: value('nodejs_heap_size_total_bytes'),
          external: value('nodejs_external_memory_bytes'),
        });
      });
      res.on('error', () => resolve(null));
    });
    req.on('error', () => resolve(null));
  });
}

/**
 * The V8 heap of each server process (worker pid → figures): metrics are scraped a few times on
 * fresh connections and each answer is given to the worker whose resident size, read from /proc
 * at once, is nearest to the one it reports (the answers carry no pid).
 */
async function heapsOf(origin: string, workers: number[]): Promise<Map<number, HeapFigures>> {
  const found = new Map<number, HeapFigures>();
  for (let attempt = 0; attempt < workers.length * 2 && found.size < workers.length; attempt++) {
    const figures = await scrapeOnce(origin);
    if (!figures) continue;
    let best = 0;
    let distance = Number.POSITIVE_INFINITY;
    for (const pid of workers) {
      try {
        const rss = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
        if (Math.abs(rss - figures.rss) < distance) {
          distance = Math.abs(rss - figures.rss);
          best = pid;
        }
      } catch {
        // ended
      }
    }
    if (best) found.set(best, figures);
  }
  return found;
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
  // LOAD_NODE_OPTIONS reaches the server processes as NODE_OPTIONS (e.g. `--heapsnapshot-signal=SIGUSR2`).
  const server = await startDepotServer(storage, {
    WORKERS: '2',
    ...(process.env.LOAD_NODE_OPTIONS ? { NODE_OPTIONS: process.env.LOAD_NODE_OPTIONS } : {}),
  });
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
    // Runners poll with tokens of their own, and every write's pipeline gives them a job to run.
    const runnerTokens: string[] = [];
    if (runners) {
      const registration = await benchApi(api, 'POST', `/projects/${id}/runners/reset_registration_token`);
      for (let r = 0; r < RUNNERS; r++) {
        const runner = await benchApi(api, 'POST', '/runners', { token: registration.token, description: `load ${r}` });
        runnerTokens.push(runner.token);
      }
      await benchApi(api, 'POST', `/projects/${id}/repository/files/.gitlab-ci.yml`, {
        branch: 'main',
        commit_message: 'CI for the load',
        content: 'build:\n  script:\n    - echo load\n',
      });
    }
    const remote = new URL('/root/load.git', origin);
    remote.username = 'root';
    remote.password = BENCH_TOKEN;

    const counts: Record<string, number> = {};
    const failures: string[] = [];
    // Each acknowledged commit and push, in the order its client made them.
    const acknowledged: { branch: string; sha: string }[] = [];
    // Each client writes to two branches of its own, so that the repository's refs stay as many
    // through the run; LOAD_NEW_BRANCHES=1 makes a new branch for every write instead (4,000 and more
    // by the end of 10 minutes, which every branch listing and clone then carries).
    const newBranches = process.env.LOAD_NEW_BRANCHES === '1';
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
      let apiBranchMade = false;
      let pushBranchMade = false;
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
            const branch = newBranches ? `api-${c}-${n}` : `api-${c}`;
            const res = await request(c, 'write', 'POST', `/projects/${id}/repository/commits`, {
              branch,
              ...(newBranches || !apiBranchMade ? { start_branch: 'main' } : {}),
              commit_message: `api-${c}-${n}`,
              actions: [{ action: 'create', file_path: `api-${c}-${n}.txt`, content: `${n}\n` }],
            });
            if (res.status === 201) {
              acknowledged.push({ branch, sha: JSON.parse(Buffer.from(res.body).toString()).id });
              apiBranchMade = true;
            }
          } else if (roll < 0.7 && archives.filter((t) => t > Date.now() - 60_000).length < 5) {
            archives.push(Date.now());
            await request(c, 'archive', 'GET', `/projects/${id}/repository/archive.tar.gz?sha=main`);
          } else if (roll < 0.8 && runners) {
            // A runner's poll; a job it gets is run at once: its log, then success.
            const token = runnerTokens[c % RUNNERS] as string;
            const res = await request(c, 'runner poll', 'POST', '/jobs/request', { token }, [201, 204]);
            if (res.status === 201) {
              const job = JSON.parse(Buffer.from(res.body).toString()) as { id: number; token: string };
              await request(c, 'job finished', 'PUT', `/jobs/${job.id}`, { token: job.token, state: 'success' }, [200]);
            }
          } else if (roll < 0.9) {
            // Clone once, then push a branch of this client's own.
            if (!cloned) {
              fs.rmSync(work, { recursive: true, force: true });
              await git(scratch, 'clone', '-q', remote.toString(), work);
              counts.clone = (counts.clone ?? 0) + 1;
              cloned = true;
            } else {
              const branch = newBranches ? `push-${c}-${n}` : `push-${c}`;
              if (newBranches || !pushBranchMade) await git(work, 'checkout', '-q', '-B', branch, 'origin/main');
              fs.writeFileSync(path.join(work, `push-${c}-${n}.txt`), `${n}\n`);
              await git(work, 'add', '.');
              await git(work, 'commit', '-q', '-m', `push-${c}-${n}`);
              const sha = (await git(work, 'rev-parse', 'HEAD')).stdout.trim();
              await git(work, 'push', '-q', 'origin', `${branch}:${branch}`);
              acknowledged.push({ branch, sha });
              pushBranchMade = true;
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

    const curve: {
      second: number;
      mib: number;
      roles: Record<string, number>;
      heaps: Record<string, { used: number; total: number; external: number }>;
    }[] = [];
    const started = Date.now();
    stopAt = started + durationS * 1000;
    const sample = async () => {
      const processes = memoryOf(server.child.pid as number, storage);
      const roles = byRole(processes);
      const mib = Object.values(roles).reduce((a, b) => a + b, 0) / MIB;
      const workers = processes.filter((p) => p.role.startsWith('worker')).map((p) => p.pid);
      const heaps = await heapsOf(origin, workers);
      const round = (bytes: number) => Math.round(bytes / MIB);
      curve.push({
        second: Math.round((Date.now() - started) / 1000),
        mib: Math.round(mib),
        roles: Object.fromEntries(Object.entries(roles).map(([role, bytes]) => [role, round(bytes)])),
        heaps: Object.fromEntries(
          [...heaps].map(([pid, h]) => [
            `worker ${pid}`,
            { used: round(h.heapUsed), total: round(h.heapTotal), external: round(h.external) },
          ]),
        ),
      });
    };
    await sample();
    const sampler = setInterval(() => void sample(), SAMPLE_MS);
    await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
    clearInterval(sampler);
    if (process.env.LOAD_CURVE_FILE) fs.writeFileSync(process.env.LOAD_CURVE_FILE, JSON.stringify(curve));

    // The branches' tips.
    const tips = new Map<string, string>();
    for (let page = 1; ; page++) {
      const list = (await benchApi(api, 'GET', `/projects/${id}/repository/branches?per_page=100&page=${page}`)) as {
        name: string;
        commit: { id: string };
      }[];
      for (const b of list) tips.set(b.name, b.commit.id);
      if (list.length < 100) break;
    }
    // Nothing lost: each branch's tip is the last commit acknowledged on it, and every commit
    // acknowledged on it is in its history.
    const last = new Map(acknowledged.map((a) => [a.branch, a.sha]));
    const histories = new Map<string, Set<string>>();
    if (!newBranches) {
      for (const branch of last.keys()) {
        const ids = new Set<string>();
        for (let page = 1; ; page++) {
          const list = (await benchApi(
            api,
            'GET',
            `/projects/${id}/repository/commits?ref_name=${encodeURIComponent(branch)}&per_page=100&page=${page}`,
          )) as { id: string }[];
          for (const commit of list) ids.add(commit.id);
          if (list.length < 100) break;
        }
        histories.set(branch, ids);
      }
    }
    const lost = [
      ...[...last].filter(([branch, sha]) => tips.get(branch) !== sha).map(([branch]) => `tip of ${branch}`),
      ...acknowledged.filter((a) => !newBranches && !histories.get(a.branch)?.has(a.sha)).map((a) => a.sha),
    ];
    // Warm-up: PostgreSQL's shared buffers fill, V8 sizes its heaps and the caches fill (the
    // 10-minute runs level off within two minutes); LOAD_WARMUP overrides the first fifth.
    const warmupS = Number(process.env.LOAD_WARMUP ?? durationS / 5);
    const warm = curve.filter((s) => s.second >= warmupS);
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
    // A minute's mean at each end of the steady part (single samples swing with the git processes in flight).
    const perMinute = 60_000 / SAMPLE_MS;
    const warmMib = mean(warm.slice(0, perMinute).map((s) => s.mib));
    const endMib = mean(warm.slice(-perMinute).map((s) => s.mib));
    const peakMib = Math.max(...curve.map((s) => s.mib));
    const slopeOf = (points: { second: number; value: number }[]) => {
      // Least squares, MiB per minute.
      const xs = points.map((p) => p.second / 60);
      const mx = mean(xs);
      const my = mean(points.map((p) => p.value));
      let num = 0;
      let den = 0;
      points.forEach((p, i) => {
        num += ((xs[i] as number) - mx) * (p.value - my);
        den += ((xs[i] as number) - mx) ** 2;
      });
      return den === 0 ? 0 : num / den;
    };
    const slope = slopeOf(warm.map((s) => ({ second: s.second, value: s.mib })));
    const roles = [...new Set(curve.flatMap((s) => Object.keys(s.roles)))].sort();
    // The slope of the processes whose roles `include` picks, summed sample by sample.
    const slopeOfRoles = (include: (role: string) => boolean) =>
      slopeOf(
        warm.map((s) => ({
          second: s.second,
          value: Object.entries(s.roles).reduce((sum, [role, mib]) => sum + (include(role) ? mib : 0), 0),
        })),
      );
    const roleSlopes = roles.map((role) => `${role} ${slopeOfRoles((r) => r === role).toFixed(2)}`);
    // Everything but PostgreSQL's buffer cache, which is counted page by page as the growing
    // database first touches it, up to shared_buffers.
    const buffers = 'postgres shared buffers';
    const privateSlope = slopeOfRoles((role) => role !== buffers);
    // Depot's own processes (the primary, the server processes, their git spawners): what a leak
    // in Depot would grow; git children grow with the repository, PostgreSQL with its tables.
    const ownSlope = slopeOfRoles(
      (role) => role === 'primary' || role.startsWith('worker ') || role.startsWith('spawner of '),
    );
    const sharedBuffers = (() => {
      try {
        const conf = fs.readFileSync(path.join(storage, 'db', 'postgresql.conf'), 'utf8');
        return /^shared_buffers\s*=\s*(\S+)/m.exec(conf)?.[1] ?? 'not set';
      } catch {
        return 'unknown';
      }
    })();
    const minutes = curve.filter(
      (s, i) => i === 0 || Math.floor(s.second / 60) > Math.floor((curve[i - 1]?.second ?? 0) / 60),
    );
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    notes.push(
      `${durationS} s, ${CLIENTS} clients, WORKERS=2, embedded PostgreSQL: ${total} operations ${JSON.stringify(counts)}`,
      `failures: ${failures.length}${failures.length ? ` (first: ${failures.slice(0, 5).join(' | ')})` : ''}`,
      `acknowledged writes and pushes: ${acknowledged.length} on ${last.size} branches${newBranches ? ' (a new branch for each)' : ' (two of its own for each client)'}, lost: ${lost.length}${lost.length ? ` (${lost.slice(0, 5).join(', ')})` : ''}`,
      `webhook deliveries received: ${delivered}`,
      'memory: PSS of anonymous and shared memory (Pss_Anon + Pss_Shmem) of every process of the server and of the embedded PostgreSQL, so shared buffers count once and mapped files (code, git packs) not at all',
      `memory (MiB, every ${SAMPLE_MS / 1000} s): ${curve.map((s) => `${s.second}s=${s.mib}`).join(' ')}`,
      `memory by process at each minute (MiB): ${minutes
        .map(
          (s) =>
            `${s.second}s ${Object.entries(s.roles)
              .map(([role, mib]) => `${role}=${mib}`)
              .join(', ')}`,
        )
        .join(' | ')}`,
      `V8 heap of each server process at each minute (used/total MiB, external MiB): ${minutes
        .map(
          (s) =>
            `${s.second}s ${Object.entries(s.heaps)
              .map(([worker, h]) => `${worker}=${h.used}/${h.total}, ${h.external}`)
              .join('; ')}`,
        )
        .join(' | ')}`,
      `after warm-up (${warmupS} s): mean of the first minute ${warmMib.toFixed(0)} MiB, of the last ${endMib.toFixed(0)} MiB, slope ${slope.toFixed(2)} MiB/min (least squares over ${warm.length} samples); by process (MiB/min): ${roleSlopes.join(', ')}`,
      `peak ${peakMib} MiB`,
      `PostgreSQL's shared buffers (shared_buffers = ${sharedBuffers}): ${curve.at(0)?.roles[buffers] ?? 0} MiB touched at the start, ${warm.at(0)?.roles[buffers] ?? 0} after warm-up, ${curve.at(-1)?.roles[buffers] ?? 0} at the end`,
    );
    const measurements: Measurement[] = [
      measurement(
        'memory slope after warm-up (server processes, git, PostgreSQL; MiB/min, least squares)',
        'MiB/min',
        slope,
        1,
        'goal limit',
        'lower',
        '≤ 1×',
      ),
      measurement(
        "memory slope after warm-up, all but PostgreSQL's shared buffers (a cache of fixed size; MiB/min)",
        'MiB/min',
        privateSlope,
        1,
        'goal limit',
        'lower',
        '≤ 1×',
      ),
      measurement(
        "memory slope after warm-up, Depot's own processes (primary, server processes, git spawners; MiB/min)",
        'MiB/min',
        ownSlope,
        1,
        'goal limit',
        'lower',
        '≤ 1×',
      ),
      measurement(
        "memory, the last minute's mean vs the first minute's after warm-up (MiB)",
        'MiB',
        endMib,
        warmMib,
        'first minute after warm-up',
        'lower',
        'flat: ≤ 1.1×',
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
