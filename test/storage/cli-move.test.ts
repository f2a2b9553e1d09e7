import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Storages } from '../../src/storage/storages.js';
import { runGitClient } from '../support/git-client.js';
import { freePort, tempStorageDir } from '../support/server-process.js';

/** `npm run cli -- storage move ...` as an administrator runs it, on the embedded database. */
const root = path.resolve(import.meta.dirname, '..', '..');
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');
const dirs: string[] = [];
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

describe('admin CLI: storage move', () => {
  it('moves the demo project with a progress bar, then a whole storage back', { timeout: 180_000 }, async () => {
    const storageDir = tempStorageDir('depot-cli-move-');
    dirs.push(storageDir);
    const roots = { default: path.join(storageDir, 'r', 'default'), second: path.join(storageDir, 'r', 'second') };
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      STORAGE_DIR: storageDir,
      REPOSITORY_STORAGES: `default=${roots.default},second=${roots.second}`,
      ADMIN_PASSWORD: 'a-long-admin-password',
      ADMIN_TOKEN: 'glpat-cli-move-test-000000001',
      SEED_DEMO: 'true',
      LOG_LEVEL: 'warn',
    };
    // A first start creates root and the demo project; the CLI needs the embedded database free.
    const port = await freePort();
    const server = spawn(tsx, ['src/main.ts'], { cwd: root, env: { ...env, PORT: String(port) }, stdio: 'ignore' });
    children.push(server);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/-/readiness`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline) throw new Error('server did not start');
      await new Promise((r) => setTimeout(r, 200));
    }
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));

    const storages = new Storages(roots);
    const repo = (name: string) => storages.repositoryPath(name, 1);
    const refs = async (gitDir: string) =>
      (await runGitClient([`--git-dir=${gitDir}`, 'for-each-ref', '--format=%(objectname) %(refname)'], storageDir))
        .stdout;
    const before = await refs(repo('default'));
    expect(before).toContain('refs/heads/main');

    const cli = (...args: string[]) =>
      spawnSync(tsx, ['src/cli.ts', 'storage', ...args], { cwd: root, env, encoding: 'utf8', timeout: 120_000 });
    const moved = cli('move', '--project', 'demo/sample', '--to', 'second');
    expect(moved.status, moved.stderr).toBe(0);
    expect(moved.stdout).toContain('scheduled 1 move');
    expect(moved.stdout).toMatch(/move \d+ demo\/sample: default → second finished, [\d.]+ MiB/);
    expect(moved.stdout).toMatch(/\[#{30}\] 100\.0% {2}[\d.]+ MiB \/ [\d.]+ MiB {2}1\/1 moves done/);
    expect(await refs(repo('second'))).toBe(before);
    expect(fs.existsSync(repo('default'))).toBe(false);

    const list = cli('list');
    expect(list.stdout).toContain(`second\t${roots.second}\tweight 0\t1 projects`);
    const refused = cli('move', '--project', 'demo/sample', '--to', 'nowhere');
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('{"message":{"destination_storage_name":["is not included in the list"]}}');

    const back = cli('move', '--from', 'second', '--to', 'default');
    expect(back.status, back.stderr).toBe(0);
    expect(back.stdout).toMatch(/second → default finished/);
    expect(await refs(repo('default'))).toBe(before);
    const moves = cli('moves');
    expect(moves.stdout.trim().split('\n')).toHaveLength(2);
    expect(moves.stdout).toMatch(/^2\tproject 1\tsecond → default\tfinished\t/);
  });
});
