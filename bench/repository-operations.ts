/**
 * Repository operations (issue 26 part 3) against native git, in the same run: blame of a
 * 2,000-line file with 500 commits of history against `git blame --porcelain`; cherry-pick
 * through the API against the same merge done with native `git merge-tree --write-tree`,
 * `git commit-tree` and `git update-ref`; and the server's memory growth while it streams a
 * snapshot of a 200 MiB repository, with its time against `tar` of the same files.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gitEnvironment } from '../src/git/command.js';
import { Storages } from '../src/storage/storages.js';
import { benchRepository, CACHE_DIR } from './fixtures/repositories.js';
import {
  BENCH_TOKEN,
  benchApi,
  type Measurement,
  measurement,
  median,
  startDepotServer,
  stop,
  treeRss,
} from './harness.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 9);
const BLAME_LINES = 2000;
const BLAME_COMMITS = 500;
/** Lines each history commit rewrites. */
const LINES_PER_COMMIT = 6;
const EPOCH = 1_650_000_000;

const IDENTITY = {
  GIT_AUTHOR_NAME: 'Bench',
  GIT_AUTHOR_EMAIL: 'bench@example.com',
  GIT_COMMITTER_NAME: 'Bench',
  GIT_COMMITTER_EMAIL: 'bench@example.com',
};

function runCommand(cmd: string, args: string[], input?: string, cwd?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: gitEnvironment(IDENTITY), stdio: ['pipe', 'pipe', 'inherit'], cwd });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.on('close', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`${cmd} ${args[0]}: ${code}`))));
    child.stdin.on('error', () => {}); // a command that exits early fails through its status
    child.stdin.end(input ?? '');
  });
}

const git = (gitDir: string, ...args: string[]) => runCommand('git', [`--git-dir=${gitDir}`, ...args]);

/**
 * A repository whose `src/big.txt` has 2,000 lines and 500 commits of history, each by one of 25
 * authors rewriting 6 lines spread over the file, so blame has many groups and many commits to
 * name. Built once with fast-import and cached in bench/.cache.
 */
async function blameRepository(): Promise<string> {
  const target = path.join(CACHE_DIR, 'blame.git');
  if (fs.existsSync(target)) return target;
  const partial = `${target}.partial`;
  fs.rmSync(partial, { recursive: true, force: true });
  fs.mkdirSync(CACHE_DIR, { recursive: true });
  await runCommand('git', ['init', '--quiet', '--bare', '--initial-branch=main', partial]);
  const lines = Array.from({ length: BLAME_LINES }, (_, i) => `line ${i + 1}: the original text of this line`);
  let stream = '';
  for (let n = 0; n < BLAME_COMMITS; n++) {
    if (n > 0) {
      for (let k = 0; k < LINES_PER_COMMIT; k++) {
        const at = (n * 389 + k * 331) % BLAME_LINES;
        lines[at] = `line ${at + 1}: changed by commit ${n} (${k})`;
      }
    }
    const author = n % 25;
    const who = `Dev ${author} <dev${author}@example.com> ${EPOCH + n * 600} +0000`;
    const message = `Change ${n}: rewrite part of big.txt\n\nSome words about change ${n}.\n`;
    const content = `${lines.join('\n')}\n`;
    stream += `commit refs/heads/main\nmark :${n + 1}\nauthor ${who}\ncommitter ${who}\n`;
    stream += `data ${Buffer.byteLength(message)}\n${message}`;
    if (n > 0) stream += `from :${n}\n`;
    stream += `M 100644 inline src/big.txt\ndata ${Buffer.byteLength(content)}\n${content}\n`;
  }
  await runCommand('git', [`--git-dir=${partial}`, 'fast-import', '--quiet'], stream);
  await git(partial, 'repack', '-a', '-d', '-q');
  fs.renameSync(partial, target);
  return target;
}

/**
 * A small repository for cherry-picks: main has 300 files in 30 directories and 20 commits;
 * `topic` branches off main~5 and its tip changes one file that main did not touch, so native
 * `git merge-tree main topic` finds the topic's parent as the merge base (a cherry-pick).
 */
async function pickRepository(target: string): Promise<{ pick: string; tip: string }> {
  await runCommand('git', ['init', '--quiet', '--bare', '--initial-branch=main', target]);
  let stream = '';
  const who = (n: number) => `Dev <dev@example.com> ${EPOCH + n * 600} +0000`;
  for (let n = 0; n < 20; n++) {
    const message = `Main ${n}\n`;
    stream += `commit refs/heads/main\nmark :${n + 1}\nauthor ${who(n)}\ncommitter ${who(n)}\ndata ${message.length}\n${message}`;
    if (n > 0) stream += `from :${n}\n`;
    const files = n === 0 ? Array.from({ length: 300 }, (_, i) => i) : [(n * 7) % 300, (n * 13) % 300];
    for (const i of files) {
      const content = `file ${i}, version ${n}\n`.repeat(40);
      stream += `M 100644 inline dir${i % 30}/file${i}.txt\ndata ${content.length}\n${content}\n`;
    }
  }
  const message = 'Topic change\n';
  stream += `commit refs/heads/topic\nmark :100\nauthor ${who(99)}\ncommitter ${who(99)}\ndata ${message.length}\n${message}from :15\n`;
  const content = 'changed on the topic\n'.repeat(40);
  stream += `M 100644 inline dir1/file1.txt\ndata ${content.length}\n${content}\n`;
  await runCommand('git', [`--git-dir=${target}`, 'fast-import', '--quiet'], stream);
  return { pick: await git(target, 'rev-parse', 'topic'), tip: await git(target, 'rev-parse', 'main') };
}

/** Milliseconds for a function to run. */
async function timed(fn: () => Promise<unknown>): Promise<{ ms: number }> {
  const started = performance.now();
  await fn();
  return { ms: performance.now() - started };
}

/** Medians of timed functions run in turn (a, b, a, b, ...) after a warm-up round. */
async function interleavedMedians(times: number, fns: (() => Promise<{ ms: number }>)[]): Promise<number[]> {
  for (const fn of fns) await fn();
  const values: number[][] = fns.map(() => []);
  for (let i = 0; i < times; i++) for (const [k, fn] of fns.entries()) values[k]?.push((await fn()).ms);
  return values.map(median);
}

/** Reads a git command's stdout to the end. */
function drainGit(gitDir: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', [`--git-dir=${gitDir}`, ...args], {
      env: gitEnvironment(),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout.on('data', () => {});
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`git ${args[0]}: ${code}`))));
  });
}

async function download(url: string): Promise<number> {
  const res = await fetch(url, { headers: { 'PRIVATE-TOKEN': BENCH_TOKEN } });
  if (!res.ok || !res.body) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  let bytes = 0;
  for await (const chunk of res.body) bytes += (chunk as Uint8Array).length;
  return bytes;
}

/** Samples a process tree's anonymous RSS until stopped; returns the peak growth in MiB. */
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

export async function run(): Promise<{ measurements: Measurement[]; notes: string[] }> {
  const blameRepo = await blameRepository();
  const large = await benchRepository('large');
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-ops-'));
  const { child, api } = await startDepotServer(storage);
  const out: Measurement[] = [];
  const notes: string[] = [];
  const project = async (name: string, install: (target: string) => Promise<void>) => {
    const created = await benchApi(api, 'POST', '/projects', { name, path: name, visibility: 'public' });
    const target = path.join(storage, 'repositories', 'default', `${Storages.hashedPath(created.id)}.git`);
    fs.rmSync(target, { recursive: true, force: true });
    await install(target);
    return created.id as number;
  };
  try {
    // Blame.
    const blameId = await project('blame-bench', async (target) => fs.symlinkSync(blameRepo, target));
    const blameUrl = `${api}/projects/${blameId}/repository/files/src%2Fbig.txt/blame?ref=main`;
    let groups = 0;
    const [apiBlame, gitBlame] = (await interleavedMedians(RUNS, [
      () =>
        timed(async () => {
          const res = await fetch(blameUrl, { headers: { 'PRIVATE-TOKEN': BENCH_TOKEN } });
          groups = ((await res.json()) as unknown[]).length;
        }),
      () => timed(() => drainGit(blameRepo, ['blame', '--porcelain', 'main', '--', 'src/big.txt'])),
    ])) as [number, number];
    out.push(
      measurement(
        `blame of a ${BLAME_LINES.toLocaleString('en')}-line file with ${BLAME_COMMITS} commits`,
        'ms',
        apiBlame,
        gitBlame,
        'git blame --porcelain',
        'lower',
        '≤ 1.3×',
      ),
    );
    notes.push(`blame: ${groups} line groups; median of ${RUNS} interleaved runs after a warm-up`);

    // Snapshot of the 200 MiB repository: server memory growth and time against tar. Measured
    // before the cherry-picks, whose pushes queue housekeeping (a git repack in the server's
    // process tree would count as the snapshot's memory).
    const snapId = await project('snapshot-bench', async (target) => fs.symlinkSync(large, target));
    const snapUrl = `${api}/projects/${snapId}/snapshot`;
    let bytes = 0;
    const [apiSnap, tarSnap] = (await interleavedMedians(3, [
      () =>
        timed(async () => {
          bytes = await download(snapUrl);
        }),
      () =>
        timed(() =>
          runCommand(
            'sh',
            ['-c', 'tar -cf - HEAD refs objects $(test -e packed-refs && echo packed-refs) | wc -c'],
            '',
            large,
          ),
        ),
    ])) as [number, number];
    const sample = memorySampler(child.pid as number);
    await download(snapUrl);
    const growth = sample();
    out.push(
      measurement(
        `server memory growth, snapshot of ${(bytes / 2 ** 20).toFixed(0)} MiB`,
        'MiB',
        growth,
        64,
        'limit 64 MiB',
        'lower',
        '< 1×',
      ),
    );
    out.push(measurement('snapshot download time', 'ms', apiSnap, tarSnap, 'tar of the same files', 'lower'));
    // Cherry-pick: each run picks the topic commit onto a main reset to its first tip.
    const pickDir = { value: '' };
    const pickId = await project('pick-bench', async (target) => {
      pickDir.value = target;
    });
    const { pick, tip } = await pickRepository(pickDir.value);
    const nativeDir = path.join(storage, 'native-pick.git');
    await pickRepository(nativeDir);
    const reset = (gitDir: string) => git(gitDir, 'update-ref', 'refs/heads/main', tip);
    const [apiPick, nativePick] = (await interleavedMedians(RUNS, [
      async () => {
        await reset(pickDir.value);
        return timed(() =>
          benchApi(api, 'POST', `/projects/${pickId}/repository/commits/${pick}/cherry_pick`, { branch: 'main' }),
        );
      },
      async () => {
        await reset(nativeDir);
        return timed(async () => {
          const tree = (await git(nativeDir, 'merge-tree', '--write-tree', 'main', pick)).split('\n')[0] as string;
          const commit = await runCommand(
            'git',
            [`--git-dir=${nativeDir}`, 'commit-tree', tree, '-p', tip],
            `Topic change\n\n(cherry-picked from commit ${pick})`,
          );
          await git(nativeDir, 'update-ref', 'refs/heads/main', commit, tip);
        });
      },
    ])) as [number, number];
    out.push(
      measurement(
        'cherry-pick onto a branch (300 files)',
        'ms',
        apiPick,
        nativePick,
        'git merge-tree --write-tree + commit-tree + update-ref',
        'lower',
        '≤ 1.5×',
      ),
    );
    const version = await runCommand('git', ['version']);
    notes.push(
      `cherry-pick: ${version}; median of ${RUNS} interleaved runs, the branch reset before each; the API also takes a write lease, records the push event and (git < 2.40) writes a side commit for the merge base`,
    );
  } finally {
    await stop(child);
    fs.rmSync(storage, { recursive: true, force: true });
  }
  return { measurements: out, notes };
}
