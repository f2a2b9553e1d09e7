import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Storages } from '../../src/storage/storages.js';
import { createTestDatabase } from '../support/app.js';
import { runGitClient } from '../support/git-client.js';
import { freePort } from '../support/server-process.js';

/**
 * Kill-and-restart: the server runs as a child process (`npm start`'s entry point) whose move
 * job SIGKILLs it at one step (DEPOT_CRASH_AT, a test-only hook); after a restart every move
 * must end `finished` with the repository complete on the destination, nothing lost.
 * Each server gets a fresh database cloned from the run's template.
 */
const root = path.resolve(import.meta.dirname, '..', '..');
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');
const TOKEN = 'glpat-storage-move-crash-test-0001';
const STEPS = ['started', 'copying', 'copied', 'verified', 'renamed', 'replicated', 'cleaned'] as const;
const children = new Set<ChildProcess>();
const cleanups: (() => Promise<void>)[] = [];
let scratch: string;

beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-crash-'));
});

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  for (const cleanup of cleanups) await cleanup().catch(() => {});
  await fs.rm(scratch, { recursive: true, force: true });
});

/** A database for one server: a clone of the run's template (embedded server or PostgreSQL). */
async function databaseUrl(): Promise<string> {
  const { url, drop } = await createTestDatabase();
  cleanups.push(drop);
  return url;
}

interface Server {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
}

function startServer(env: Record<string, string>): Server {
  const child = spawn(tsx, ['src/main.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let output = '';
  child.stdout?.on('data', (d) => {
    output += d;
  });
  child.stderr?.on('data', (d) => {
    output += d;
  });
  // 'close', not 'exit': only then has everything the child wrote been read (its last log lines).
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  return { child, exited, output: () => output };
}

async function waitReady(base: string, server: Server): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (server.child.exitCode !== null) throw new Error(`server exited:\n${server.output()}`);
    try {
      if ((await fetch(`${base}/-/readiness`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`server did not become ready:\n${server.output()}`);
}

const git = (args: string[]) => runGitClient(args, scratch);

async function refsAndObjects(gitDir: string): Promise<{ refs: string; objects: string }> {
  const refs = await git([`--git-dir=${gitDir}`, 'for-each-ref', '--format=%(objectname) %(refname)']);
  const objects = await git([
    `--git-dir=${gitDir}`,
    'cat-file',
    '--batch-all-objects',
    '--batch-check=%(objectname) %(objecttype)',
  ]);
  return { refs: refs.stdout, objects: objects.stdout.split('\n').sort().join('\n') };
}

const exists = (file: string) =>
  fs.access(file).then(
    () => true,
    () => false,
  );

describe('storage moves survive SIGKILL at every step', () => {
  it.each(STEPS)(
    'killed at "%s", restarted: the move finishes and nothing is lost',
    { timeout: 180_000 },
    async (step) => {
      const storageDir = path.join(scratch, step);
      const roots = {
        default: path.join(storageDir, 'repos', 'default'),
        second: path.join(storageDir, 'repos', 'second'),
      };
      const storages = new Storages(roots);
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const env: Record<string, string> = {
        STORAGE_DIR: storageDir,
        PORT: String(port),
        REPOSITORY_STORAGES: `default=${roots.default},second=${roots.second}`,
        ADMIN_PASSWORD: 'a-long-admin-password',
        ADMIN_TOKEN: TOKEN,
        SEED_DEMO: 'false',
      };
      env.DATABASE_URL = await databaseUrl();
      const headers = { 'PRIVATE-TOKEN': TOKEN, 'Content-Type': 'application/json' };
      const api = async (method: string, route: string, body?: unknown) => {
        const res = await fetch(`${base}/api/v4${route}`, {
          method,
          headers,
          body: body ? JSON.stringify(body) : undefined,
        });
        return { status: res.status, body: (await res.json()) as Record<string, any> };
      };

      // Every other step copies bytes instead of hard-linking (as between filesystems).
      if (STEPS.indexOf(step) % 2 === 1) env.DEPOT_STORAGE_MOVE_COPY = 'copy';
      const first = startServer({ ...env, DEPOT_CRASH_AT: step });
      await waitReady(base, first);
      const created = await api('POST', '/projects', { name: `crash-${step}` });
      expect(created.status).toBe(201);
      const project = created.body as { id: number; path_with_namespace: string };
      const sourceDir = storages.repositoryPath('default', project.id);
      await fs.rm(sourceDir, { recursive: true, force: true });
      await fs.cp(inject('sampleRepository'), sourceDir, { recursive: true });
      const before = await refsAndObjects(sourceDir);

      // An LFS object, uploaded through the LFS API.
      const content = randomBytes(256 * 1024);
      const oid = createHash('sha256').update(content).digest('hex');
      const lfsBase = `${base}/${project.path_with_namespace}.git/info/lfs`;
      const basic = `Basic ${Buffer.from(`root:${TOKEN}`).toString('base64')}`;
      const lfsHeaders = {
        Accept: 'application/vnd.git-lfs+json',
        'Content-Type': 'application/vnd.git-lfs+json',
        Authorization: basic,
      };
      const batch = async (operation: string) =>
        (await (
          await fetch(`${lfsBase}/objects/batch`, {
            method: 'POST',
            headers: lfsHeaders,
            body: JSON.stringify({ operation, objects: [{ oid, size: content.length }] }),
          })
        ).json()) as { objects: { actions?: Record<string, { href: string; header?: Record<string, string> }> }[] };
      const upload = (await batch('upload')).objects[0]?.actions?.upload;
      expect(upload).toBeDefined();
      expect((await fetch(upload?.href as string, { method: 'PUT', headers: upload?.header, body: content })).ok).toBe(
        true,
      );

      const move = await api('POST', `/projects/${project.id}/repository_storage_moves`, {
        destination_storage_name: 'second',
      });
      expect(move.status).toBe(201);
      const killed = await Promise.race([
        first.exited,
        new Promise<null>((resolve) => setTimeout(() => resolve(null), 60_000)),
      ]);
      // Progress reached the log before the crash once the copy was done.
      if (STEPS.indexOf(step) >= STEPS.indexOf('copied')) {
        expect(first.output()).toMatch(
          /"bytes_copied":(\d+),"bytes_total":\1,"percent":100,"msg":"repository storage move copied"/,
        );
      }
      // tsx reports its child's SIGKILL as exit code 128 + 9.
      expect(killed?.signal === 'SIGKILL' || killed?.code === 137, first.output()).toBe(true);

      const second = startServer(env);
      await waitReady(base, second);
      let state = '';
      const deadline = Date.now() + 60_000;
      let current: Record<string, any> = {};
      while (Date.now() < deadline) {
        current = (await api('GET', `/project_repository_storage_moves/${move.body.id}`)).body;
        state = current.state;
        if (!['scheduled', 'started', 'replicated'].includes(state)) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(current, second.output()).toMatchObject({ state: 'finished', error_message: null });
      // Before the switch the restarted worker discarded the partial copy and copied again.
      const beforeSwitch = STEPS.indexOf(step) < STEPS.indexOf('replicated');
      expect(second.output().includes('resuming an interrupted repository storage move')).toBe(beforeSwitch);

      // The project points at a complete repository on the destination and is writable.
      const shown = await api('GET', `/projects/${project.id}`);
      expect(shown.body.repository_storage).toBe('second');
      const destDir = storages.repositoryPath('second', project.id);
      expect(await refsAndObjects(destDir)).toEqual(before);
      expect((await git([`--git-dir=${destDir}`, 'fsck', '--full'])).code).toBe(0);
      expect(await exists(sourceDir)).toBe(false);
      expect(await exists(storages.lfsObjectPath('default', oid))).toBe(false);
      expect(await fs.readFile(storages.lfsObjectPath('second', oid))).toEqual(content);
      expect(await fs.readdir(path.join(roots.second, '.tmp')).catch(() => [])).toEqual([]);
      expect(await fs.readdir(path.join(roots.default, '.tmp')).catch(() => [])).toEqual([]);

      // A clone over HTTP has every ref and object; the LFS object downloads; a commit lands.
      const clone = path.join(scratch, `${step}-clone.git`);
      const remote = new URL(`/${project.path_with_namespace}.git`, base);
      remote.username = 'root';
      remote.password = TOKEN;
      expect((await git(['clone', '--quiet', '--mirror', remote.toString(), clone])).code).toBe(0);
      expect(await refsAndObjects(clone)).toEqual(before);
      const download = (await batch('download')).objects[0]?.actions?.download;
      const blob = await fetch(download?.href as string, { headers: download?.header });
      expect(Buffer.from(await blob.arrayBuffer())).toEqual(content);
      const commit = await api('POST', `/projects/${project.id}/repository/commits`, {
        branch: 'main',
        commit_message: 'after the move',
        actions: [{ action: 'create', file_path: 'after-move.txt', content: 'ok' }],
      });
      expect(commit.status).toBe(201);

      second.child.kill('SIGTERM');
      await second.exited;
    },
  );
});
