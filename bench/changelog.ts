/**
 * Changelog generation over a range of 10,000 commits (GET /projects/:id/repository/changelog:
 * previous-tag lookup, range check, commit walk with trailers and reverts, author lookup,
 * template) against `git log` of the same range, in the same run.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { gitEnvironment } from '../src/git/command.js';
import { Storages } from '../src/storage/storages.js';
import { CACHE_DIR } from './fixtures/repositories.js';
import { benchApi, type Measurement, measurement, median, startDepotServer, stop } from './harness.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const RANGE_COMMITS = 10_000;
const AUTHORS = 40;
const CATEGORIES = ['added', 'fixed', 'changed', 'removed', 'security', 'other'];

function runCommand(cmd: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: gitEnvironment(), stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.on('close', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`${cmd} ${args[0]}: ${code}`))));
    child.stdin.end(input ?? '');
  });
}

/**
 * A repository whose main branch has a tag v1.0.0 and then 10,000 commits by 40 authors: two in
 * three carry a `Changelog:` trailer, every 50th reverts the commit before it (naming its real
 * SHA, which fast-import's `get-mark` tells us), and one in five touches a file. Built once with
 * fast-import and cached in bench/.cache.
 */
async function changelogRepository(): Promise<string> {
  const target = path.join(CACHE_DIR, 'changelog.git');
  if (fs.existsSync(target)) return target;
  const partial = `${target}.partial`;
  fs.rmSync(partial, { recursive: true, force: true });
  fs.mkdirSync(CACHE_DIR, { recursive: true });
  await runCommand('git', ['init', '--quiet', '--bare', '--initial-branch=main', partial]);
  const child = spawn('git', [`--git-dir=${partial}`, 'fast-import', '--quiet', '--done'], {
    env: gitEnvironment(),
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const answers = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const write = async (text: string) => {
    if (!child.stdin.write(text)) await new Promise((resolve) => child.stdin.once('drain', resolve));
  };
  const epoch = 1_650_000_000;
  const data = (text: string) => `data ${Buffer.byteLength(text)}\n${text}`;
  for (let n = 0; n <= RANGE_COMMITS; n++) {
    const author = n % AUTHORS;
    const who = `Dev ${author} <dev${author}@example.com> ${epoch + n * 60} +0000`;
    let message: string;
    if (n === 0) message = 'Initial commit\n';
    else if (n % 50 === 0) {
      await write(`get-mark :${n}\n`);
      const reverted = (await answers.next()).value as string;
      message = `Revert "Change ${n - 1}"\n\nThis reverts commit ${reverted.trim()}.\n`;
    } else if (n % 3 === 0) message = `Change ${n}: tidy things up\n\nNo user-visible effect.\n`;
    else {
      const reviewer = (author + 1) % AUTHORS;
      message =
        `Change ${n}: ${n % 2 ? 'improve' : 'fix'} part ${n % 97} of the system\n\n` +
        `Longer description of change ${n}.\n\n` +
        `Changelog: ${CATEGORIES[n % CATEGORIES.length]}\n` +
        `Reviewed-by: Dev ${reviewer} <dev${reviewer}@example.com>\n`;
    }
    let text = `commit refs/heads/main\nmark :${n + 1}\nauthor ${who}\ncommitter ${who}\n${data(message)}`;
    if (n > 0) text += `from :${n}\n`;
    if (n % 5 === 0) text += `M 100644 inline src/file${n % 200}.txt\n${data(`version ${n}\n`)}\n`;
    await write(`${text}\n`);
    if (n === 0)
      await write(`tag v1.0.0\nfrom :1\ntagger Bench <bench@example.com> ${epoch} +0000\n${data('v1.0.0\n')}\n`);
  }
  await write('done\n');
  child.stdin.end();
  const code = await exited;
  if (code !== 0) throw new Error(`git fast-import exited with ${code}`);
  await runCommand('git', [`--git-dir=${partial}`, 'repack', '-a', '-d', '-q']);
  fs.renameSync(partial, target);
  return target;
}

async function gitOut(gitDir: string, ...args: string[]): Promise<string> {
  return runCommand('git', [`--git-dir=${gitDir}`, ...args]);
}

function timeGit(gitDir: string, args: string[]): Promise<{ ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn('git', [`--git-dir=${gitDir}`, ...args], {
      env: gitEnvironment(),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout.on('data', () => {});
    child.on('close', (code) =>
      code === 0 ? resolve({ ms: performance.now() - started }) : reject(new Error(`git ${args[0]}: ${code}`)),
    );
  });
}

/**
 * Medians of several timed functions, run in turn (a, b, c, a, b, c, ...) after one warm-up
 * round, so that a busy machine slows the subject and its baseline alike.
 */
async function interleavedMedians(times: number, fns: (() => Promise<{ ms: number }>)[]): Promise<number[]> {
  for (const fn of fns) await fn(); // warm-up: page cache, cat-file processes, JIT
  const values: number[][] = fns.map(() => []);
  for (let i = 0; i < times; i++) {
    for (const [k, fn] of fns.entries()) values[k]?.push((await fn()).ms);
  }
  return values.map(median);
}

export async function run(): Promise<{ measurements: Measurement[]; notes: string[] }> {
  const repo = await changelogRepository();
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-changelog-'));
  const { child, api: base } = await startDepotServer(storage);
  const out: Measurement[] = [];
  const notes: string[] = [];
  try {
    // Half the commit authors are Depot users, so entries carry @references.
    for (let a = 0; a < AUTHORS / 2; a++) {
      await benchApi(base, 'POST', '/users', {
        email: `dev${a}@example.com`,
        name: `Dev ${a}`,
        username: `dev${a}`,
        force_random_password: true,
        skip_confirmation: true,
      });
    }
    // One project per request: the changelog rate limit counts per user and project. Each
    // repository is a shared clone of the cached one, so a POST never writes into the cache.
    let made = 0;
    const project = async () => {
      made += 1;
      const created = await benchApi(base, 'POST', '/projects', {
        name: `cl${made}`,
        path: `cl${made}`,
        visibility: 'public',
      });
      const target = path.join(storage, 'repositories', 'default', `${Storages.hashedPath(created.id)}.git`);
      fs.rmSync(target, { recursive: true, force: true });
      await runCommand('git', ['clone', '--quiet', '--bare', '--shared', repo, target]);
      return created.id as number;
    };
    const count = Number(await gitOut(repo, 'rev-list', '--count', 'v1.0.0..main'));
    let entries = 0;
    const timeChangelog = async (method: 'GET' | 'POST') => {
      const id = await project();
      const started = performance.now();
      const body = await benchApi(
        base,
        method,
        `/projects/${id}/repository/changelog${method === 'GET' ? '?version=1.1.0' : ''}`,
        method === 'POST' ? { version: '1.1.0' } : undefined,
      );
      const ms = performance.now() - started;
      if (method === 'GET') entries = (body.notes.match(/^- \[/gm) ?? []).length;
      return { ms };
    };
    const [get, post, log] = (await interleavedMedians(RUNS, [
      () => timeChangelog('GET'),
      () => timeChangelog('POST'),
      () => timeGit(repo, ['log', 'v1.0.0..main']),
    ])) as [number, number, number];
    const range = `${count.toLocaleString('en')} commits`;
    out.push(measurement(`GET changelog, ${range}`, 'ms', get, log, 'git log of the range', 'lower', '≤ 2×'));
    out.push(
      measurement(`POST changelog (commit), ${range}`, 'ms', post, log, 'git log of the range', 'lower', '≤ 2×'),
    );
    notes.push(
      `range v1.0.0..main of ${count} commits (previous tag found by the server), ${entries} entries after reverts; median of ${RUNS} interleaved runs after a warm-up, one project per request`,
    );
  } finally {
    await stop(child);
    fs.rmSync(storage, { recursive: true, force: true });
  }
  return { measurements: out, notes };
}
