import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, tempStorageDir } from './support/server-process.js';

/**
 * The real entry points as a user runs them: `npm start` (src/main.ts) and the admin CLI,
 * each in its own process on a fresh STORAGE_DIR with the embedded database.
 */
const root = path.resolve(import.meta.dirname, '..');
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');
const children: ChildProcess[] = [];
/** A clean environment: vitest's own variables (BASE_URL among them) must not leak in. */
const baseEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp' };
const dirs: string[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

function startServer(env: Record<string, string>) {
  const child = spawn(tsx, ['src/main.ts'], {
    cwd: root,
    env: { ...baseEnv, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (d) => {
    output += d;
  });
  child.stderr?.on('data', (d) => {
    output += d;
  });
  return { child, output: () => output };
}

async function waitReady(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/-/readiness`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`server at ${url} did not become ready`);
}

describe('npm start on a fresh storage directory', () => {
  it('creates root with printed credentials, seeds the demo project, and refuses a second process', {
    timeout: 180_000,
  }, async () => {
    const storage = tempStorageDir('depot-start-');
    dirs.push(storage);
    const port = await freePort();
    const server = startServer({ STORAGE_DIR: storage, PORT: String(port) });
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base);

    const credentials = path.join(storage, 'initial_root_credentials');
    expect(fs.statSync(credentials).mode & 0o777).toBe(0o600);
    const token = /personal_access_token: (\S+)/.exec(fs.readFileSync(credentials, 'utf8'))?.[1];
    expect(token).toMatch(/^glpat-/);
    expect(server.output()).toContain(token as string);

    const projects = (await (
      await fetch(`${base}/api/v4/projects`, { headers: { 'PRIVATE-TOKEN': token as string } })
    ).json()) as {
      path_with_namespace: string;
      empty_repo: boolean;
    }[];
    expect(projects.map((p) => p.path_with_namespace)).toContain('demo/sample');
    expect(projects.find((p) => p.path_with_namespace === 'demo/sample')?.empty_repo).toBe(false);
    // The demo repository holds the fixture history.
    const anonymous = (await (await fetch(`${base}/api/v4/projects/demo%2Fsample`)).json()) as { visibility: string };
    expect(anonymous.visibility).toBe('public');
    expect(fs.existsSync(path.join(storage, 'repositories', 'default', '@hashed'))).toBe(true);

    const second = spawnSync(tsx, ['src/main.ts'], {
      cwd: root,
      env: { ...baseEnv, STORAGE_DIR: storage, PORT: String(await freePort()) },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(second.status).toBe(1);
    expect(second.stderr).toContain('already in use by process');

    server.child.kill('SIGTERM');
    await new Promise((resolve) => server.child.once('exit', resolve));
    expect(fs.existsSync(path.join(storage, 'db.lock'))).toBe(false);

    // A later start keeps the data and prints no credentials.
    const again = startServer({ STORAGE_DIR: storage, PORT: String(port) });
    await waitReady(base);
    expect(again.output()).not.toContain('personal access token');
    const res = await fetch(`${base}/api/v4/user`, { headers: { 'PRIVATE-TOKEN': token as string } });
    expect(((await res.json()) as { username: string }).username).toBe('root');
    again.child.kill('SIGTERM');
    await new Promise((resolve) => again.child.once('exit', resolve));
  });

  it('takes ADMIN_PASSWORD and ADMIN_TOKEN from the environment and writes no credentials file', {
    timeout: 120_000,
  }, async () => {
    const storage = tempStorageDir('depot-start-');
    dirs.push(storage);
    const port = await freePort();
    const server = startServer({
      STORAGE_DIR: storage,
      PORT: String(port),
      ADMIN_PASSWORD: 'a-long-admin-password',
      ADMIN_TOKEN: 'glpat-chosen-by-the-operator-123',
      SEED_DEMO: 'false',
    });
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base);
    expect(fs.existsSync(path.join(storage, 'initial_root_credentials'))).toBe(false);
    const res = await fetch(`${base}/api/v4/projects`, {
      headers: { 'PRIVATE-TOKEN': 'glpat-chosen-by-the-operator-123' },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([]);
    server.child.kill('SIGTERM');
    await new Promise((resolve) => server.child.once('exit', resolve));
  });

  it('says clearly what is wrong with the configuration', () => {
    const result = spawnSync(tsx, ['src/main.ts'], {
      cwd: root,
      env: { ...baseEnv, PORT: 'not-a-port' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('PORT must be a port number');
  });

  it('refuses to start without git, saying what to install', () => {
    const result = spawnSync(
      process.execPath,
      [path.join(root, 'node_modules', 'tsx', 'dist', 'cli.mjs'), 'src/main.ts'],
      {
        cwd: root,
        env: { ...baseEnv, PATH: '/nonexistent' },
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('needs the git command-line tool (version 2.39 or newer)');
  });
});

describe('the admin CLI', () => {
  it('migrates, creates a user and prints a working token', { timeout: 120_000 }, () => {
    const storage = tempStorageDir('depot-cli-');
    dirs.push(storage);
    const run = (...args: string[]) =>
      spawnSync(tsx, ['src/cli.ts', ...args], {
        cwd: root,
        env: { ...baseEnv, STORAGE_DIR: storage },
        encoding: 'utf8',
        timeout: 60_000,
      });
    expect(run('migrate').stdout).toContain('up to date');
    const created = run(
      'user',
      'create',
      '--username',
      'ops',
      '--email',
      'ops@example.com',
      '--name',
      'Ops',
      '--admin',
    );
    expect(created.status).toBe(0);
    expect(created.stdout).toMatch(/created user ops \(id \d+\)/);
    const duplicate = run('user', 'create', '--username', 'ops', '--email', 'ops2@example.com', '--name', 'Ops');
    expect(duplicate.status).toBe(1);
    expect(duplicate.stderr).toContain('Username has already been taken');
    const token = run('token', 'create', '--username', 'ops', '--name', 'ci', '--scopes', 'api,read_user');
    expect(token.status).toBe(0);
    expect(token.stdout.trim()).toMatch(/^glpat-[A-Za-z0-9_-]+$/);
    const bad = run('token', 'create', '--username', 'ops', '--name', 'ci', '--scopes', 'root');
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('unknown scopes: root');
  });
});
