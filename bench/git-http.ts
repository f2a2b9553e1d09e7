/**
 * Git over HTTP against git over the local file protocol, in the same run: clone and push of a
 * 200 MiB repository; and commits per second through the commits API against the same commit
 * made with git's own plumbing.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gitEnvironment } from '../src/git/command.js';
import { Storages } from '../src/storage/storages.js';
import { benchRepository } from './fixtures/repositories.js';
import { BENCH_TOKEN, benchApi, type Measurement, measurement, median, startDepotServer, stop } from './harness.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const COMMITS = Number(process.env.BENCH_COMMITS ?? 100);

function run(
  args: string[],
  cwd?: string,
  input?: string,
  extraEnv: Record<string, string> = {},
): Promise<{ ms: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn('git', args, {
      cwd,
      env: gitEnvironment({
        GIT_AUTHOR_NAME: 'B',
        GIT_AUTHOR_EMAIL: 'b@example.com',
        GIT_COMMITTER_NAME: 'B',
        GIT_COMMITTER_EMAIL: 'b@example.com',
        ...extraEnv,
      }),
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stdin.on('error', () => {});
    child.stdin.end(input ?? '');
    child.on('close', (code) =>
      code === 0
        ? resolve({ ms: performance.now() - started, stdout: stdout.trim() })
        : reject(new Error(`git ${args.join(' ')}: ${code}`)),
    );
  });
}

async function runBench(): Promise<Measurement[]> {
  const large = await benchRepository('large');
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-http-'));
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-bench-http-work-'));
  const { child, origin, api } = await startDepotServer(storage);
  const out: Measurement[] = [];
  try {
    const project = await benchApi(api, 'POST', '/projects', { name: 'large', path: 'large', visibility: 'private' });
    const target = path.join(storage, 'repositories', 'default', `${Storages.hashedPath(project.id as number)}.git`);
    fs.rmSync(target, { recursive: true, force: true });
    fs.symlinkSync(large, target);
    const remote = (p: string) => `http://root:${BENCH_TOKEN}@${new URL(origin).host}/root/${p}.git`;

    // Clone: HTTP against the file protocol (both go through upload-pack and index-pack).
    const clone = async (url: string) => {
      const dir = fs.mkdtempSync(path.join(scratch, 'clone-'));
      const r = await run(['clone', '--quiet', '--mirror', url, dir]);
      fs.rmSync(dir, { recursive: true, force: true });
      return r;
    };
    const medianOf = async (fn: () => Promise<{ ms: number }>) => {
      await fn();
      const values: number[] = [];
      for (let i = 0; i < RUNS; i++) values.push((await fn()).ms);
      return median(values);
    };
    const httpClone = await medianOf(() => clone(remote('large')));
    const fileClone = await medianOf(() => clone(`file://${large}`));
    out.push(measurement('clone 200 MiB', 'ms', httpClone, fileClone, 'git clone file://', 'lower', '≤ 1.3×'));

    // Push: the whole repository into an empty project, and into an empty bare repository.
    let n = 0;
    const httpPush = await medianOf(async () => {
      const name = `push${++n}`;
      await benchApi(api, 'POST', '/projects', { name, path: name, visibility: 'private' });
      return run(['--git-dir', large, 'push', '--quiet', remote(name), 'refs/heads/*:refs/heads/*']);
    });
    const filePush = await medianOf(async () => {
      const dir = fs.mkdtempSync(path.join(scratch, 'bare-'));
      await run(['init', '--quiet', '--bare', dir]);
      return run(['--git-dir', large, 'push', '--quiet', `file://${dir}`, 'refs/heads/*:refs/heads/*']);
    });
    out.push(measurement('push 200 MiB', 'ms', httpPush, filePush, 'git push file://', 'lower', '≤ 1.3×'));

    // Commits per second: one small file per commit, sequentially.
    const small = await benchApi(api, 'POST', '/projects', {
      name: 'commit-rate',
      path: 'commit-rate',
      initialize_with_readme: true,
    });
    let started = performance.now();
    for (let i = 0; i < COMMITS; i++) {
      await benchApi(api, 'POST', `/projects/${small.id}/repository/commits`, {
        branch: 'main',
        commit_message: `commit ${i}`,
        actions: [{ action: 'create', file_path: `files/f${i}.txt`, content: `${i}\n` }],
      });
    }
    const apiRate = COMMITS / ((performance.now() - started) / 1000);
    const bare = fs.mkdtempSync(path.join(scratch, 'plumbing-'));
    await run(['init', '--quiet', '--bare', '--initial-branch=main', bare]);
    const index = path.join(scratch, 'plumbing-index');
    started = performance.now();
    let parent: string | null = null;
    for (let i = 0; i < COMMITS; i++) {
      // What the commits API does, step by step, with git's CLI.
      const env = { GIT_INDEX_FILE: index };
      await run(['--git-dir', bare, 'read-tree', ...(parent ? [`${parent}^{tree}`] : ['--empty'])], undefined, '', env);
      const blob = (await run(['--git-dir', bare, 'hash-object', '-w', '--stdin'], undefined, `${i}\n`)).stdout;
      await run(
        ['--git-dir', bare, 'update-index', '--add', '--cacheinfo', `100644,${blob},files/f${i}.txt`],
        undefined,
        '',
        env,
      );
      const tree = (await run(['--git-dir', bare, 'write-tree'], undefined, '', env)).stdout;
      const commit: string = (
        await run(['--git-dir', bare, 'commit-tree', tree, ...(parent ? ['-p', parent] : [])], undefined, `commit ${i}`)
      ).stdout;
      await run(['--git-dir', bare, 'update-ref', 'refs/heads/main', commit, ...(parent ? [parent] : [])]);
      parent = commit;
    }
    const plumbingRate = COMMITS / ((performance.now() - started) / 1000);
    out.push(
      measurement(
        `commits API, ${COMMITS} sequential commits`,
        'commits/s',
        apiRate,
        plumbingRate,
        'the same steps with git plumbing',
        'higher',
      ),
    );
  } finally {
    await stop(child);
    fs.rmSync(storage, { recursive: true, force: true });
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  return out;
}

export { runBench as run };
