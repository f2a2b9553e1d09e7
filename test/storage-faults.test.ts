import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../src/db/schema.js';
import { JOB_KINDS } from '../src/jobs/kinds.js';
import { Worker } from '../src/jobs/worker.js';
import { Storages } from '../src/storage/storages.js';
import { startTestApp, type TestApp } from './support/app.js';
import { makeAdmin, makeProjectMember, makeToken } from './support/factories.js';
import { remoteUrl, runGitClient } from './support/git-client.js';

/**
 * Storage faults (issue 23): a storage root on a real filesystem that turns read-only or fills
 * up, storage moves onto a destination that fills up or is read-only, and the archive cache's
 * filesystem doing the same. Writes are refused with a clear 503 in GitLab's `{"message": ...}`
 * shape and change nothing (no commit, ref, event or row); reads go on; once the storage is
 * writable again, writes work without restarting Depot; a move that cannot write fails and leaves
 * the project where it was; archives are served whole whatever their cache does.
 *
 * The faults are real: each storage root is a tmpfs mounted for the test (`mount -o remount,ro`
 * for read-only, filled to ENOSPC for full). Running as root, chmod stops no write, so a mount is
 * the only honest way; it needs root with CAP_SYS_ADMIN. Without it the tests are skipped, except
 * under CI, where they fail.
 */

const READ_ONLY = 'The repository storage is read-only. Please try again later.';
const FULL = 'The repository storage is full. Please try again later.';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-storage-faults-'));
const mounts: string[] = [];

function sh(command: string, args: string[]): { ok: boolean; output: string } {
  const run = spawnSync(command, args, { encoding: 'utf8' });
  return { ok: run.status === 0, output: `${run.stdout ?? ''}${run.stderr ?? ''}`.trim() };
}

/** Whether this process may mount a tmpfs (root with CAP_SYS_ADMIN), tried on a throw-away directory. */
function canMount(): { ok: boolean; reason: string } {
  const probe = path.join(scratch, 'probe');
  fs.mkdirSync(probe);
  const mounted = sh('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe]);
  if (!mounted.ok) return { ok: false, reason: mounted.output };
  sh('umount', [probe]);
  return { ok: true, reason: '' };
}

const mountable = canMount();
const NEEDS_MOUNT = `needs \`mount\` (root with CAP_SYS_ADMIN) for real read-only and full filesystems: ${mountable.reason}`;

/** A tmpfs of `size` at a new directory under the scratch directory. */
function mountTmpfs(name: string, size: string, dir = path.join(scratch, name)): string {
  fs.mkdirSync(dir, { recursive: true });
  const mounted = sh('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'tmpfs', dir]);
  if (!mounted.ok) throw new Error(`mount ${dir}: ${mounted.output}`);
  mounts.push(dir);
  return dir;
}

function remount(dir: string, mode: 'ro' | 'rw'): void {
  const done = sh('mount', ['-o', `remount,${mode}`, dir]);
  if (!done.ok) throw new Error(`remount ${mode} ${dir}: ${done.output}`);
}

/**
 * Fills the filesystem of `dir` with one file until ENOSPC, or until only `leaveBytes` are free;
 * returns the file (remove it to free the space).
 */
function fill(dir: string, leaveBytes = 0): string {
  const file = path.join(dir, leaveBytes ? 'filler-partial' : 'filler');
  const fd = fs.openSync(file, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) {
      const stats = fs.statfsSync(dir);
      if (leaveBytes && stats.bavail * stats.bsize - chunk.length < leaveBytes) break;
      fs.writeSync(fd, chunk);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  }
  if (leaveBytes) {
    fs.closeSync(fd);
    return file;
  }
  // The last partial pages: byte by byte would be slow, 4 KiB then 1 byte reaches the end.
  for (const size of [4096, 512, 1]) {
    try {
      for (;;) fs.writeSync(fd, Buffer.alloc(size, 1));
    } catch {
      // full at this size
    }
  }
  fs.closeSync(fd);
  return file;
}

/** Every file (not directory) under `dir`, relative to it. */
function filesUnder(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as fs.Dirent[])
    .filter((entry) => !entry.isDirectory())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)));
}

let app: TestApp;
let worker: Worker;
let admin: User;
let adminToken: string;
let roots: Record<'readonly' | 'full' | 'small', string>;

beforeAll(async () => {
  if (!mountable.ok) return;
  roots = {
    readonly: mountTmpfs('readonly', '16m'),
    full: mountTmpfs('full', '8m'),
    small: mountTmpfs('small', '1m'),
  };
  // The database stays on the normal disk (the run's embedded server); only these storages are faulty.
  const storages = [
    `default=${path.join(scratch, 'default')}`,
    ...Object.entries(roots).map(([name, root]) => `${name}=${root}`),
  ].join(',');
  app = await startTestApp({ env: { REPOSITORY_STORAGES: storages } });
  worker = new Worker(app.deps, JOB_KINDS);
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
}, 60_000);

function unmount(dir: string): void {
  // Lazily if a git process still holds a file there.
  if (!sh('umount', [dir]).ok) sh('umount', ['-l', dir]);
  mounts.splice(mounts.indexOf(dir), 1);
}

afterAll(async () => {
  // Always unmounted, even when a test failed; before the app removes its STORAGE_DIR, which
  // may hold one.
  for (const dir of [...mounts].reverse()) unmount(dir);
  await app?.close();
  fs.rmSync(scratch, { recursive: true, force: true });
});

const git = (args: string[], cwd = scratch) => runGitClient(args, cwd);

/** A public project on `storage` with a README, a Maintainer (main is protected) and a Reporter of it. */
async function projectOn(storage: string, name: string) {
  const created = await app.request('/projects', {
    method: 'POST',
    token: adminToken,
    body: { name, repository_storage: storage, initialize_with_readme: true, visibility: 'public' },
  });
  expect(created.status, created.text).toBe(201);
  const project = created.body as Project & { path_with_namespace: string };
  const row = await app.deps.db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', project.id)
    .executeTakeFirstOrThrow();
  expect(row.repository_storage).toBe(storage);
  const maintainer = await makeProjectMember(app, project, 'maintainer');
  const reporter = await makeProjectMember(app, project, 'reporter');
  const gitDir = app.deps.storages.repositoryPath(storage, project.id);
  return { project: row, maintainer, reporter, gitDir };
}

/** What the database and the repository hold for a project: must not change when a write is refused. */
async function snapshot(projectId: number, gitDir: string) {
  const events = await app.deps.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('project_id', '=', projectId)
    .executeTakeFirstOrThrow();
  const refs = await git([`--git-dir=${gitDir}`, 'for-each-ref', '--format=%(objectname) %(refname)']);
  const branches = await app.request(`/projects/${projectId}/repository/branches`, { token: adminToken });
  const tags = await app.request(`/projects/${projectId}/repository/tags`, { token: adminToken });
  const projects = await app.deps.db
    .selectFrom('projects')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow();
  return {
    events: Number(events.n),
    refs: refs.stdout,
    branches: (branches.body as { name: string; commit: { id: string } }[]).map((b) => `${b.name} ${b.commit.id}`),
    tags: (tags.body as { name: string }[]).map((t) => t.name),
    projects: Number(projects.n),
  };
}

/** `git fsck` of a bare repository: exit 0 and no error lines. */
async function expectSound(gitDir: string): Promise<void> {
  const fsck = await git([`--git-dir=${gitDir}`, 'fsck', '--full', '--no-dangling', '--no-progress']);
  expect(fsck.code, fsck.stderr).toBe(0);
  expect(fsck.stderr).not.toMatch(/error|missing|broken|corrupt/i);
}

const credentials = (ctx: { maintainer: { user: User; token: string } }) => ({
  login: ctx.maintainer.user.username,
  password: ctx.maintainer.token,
});

/** A local clone of a project with one new commit, ready to push. */
async function cloneWithCommit(project: Project, credentials: { login: string; password: string }, name: string) {
  const dir = path.join(scratch, `clone-${name}`);
  const clone = await git(['clone', '--quiet', remoteUrl(app.baseUrl, project, credentials), dir]);
  expect(clone.code, clone.stderr).toBe(0);
  fs.writeFileSync(path.join(dir, `${name}.txt`), `${randomBytes(4096).toString('hex')}\n`);
  await git(['add', '.'], dir);
  expect((await git(['commit', '--quiet', '-m', `push ${name}`], dir)).code).toBe(0);
  return dir;
}

/**
 * Every write a Maintainer (or the administrator, for a project on that storage) can make to the
 * repository, each refused with `message`, none of them changing anything.
 */
async function expectWritesRefused(
  ctx: Awaited<ReturnType<typeof projectOn>>,
  storage: string,
  message: string,
  clone: string,
  pickSha: string,
  mergeIid: number,
) {
  const { project, maintainer } = ctx;
  const id = project.id;
  const token = maintainer.token;
  const before = await snapshot(id, ctx.gitDir);
  const refused = [
    await app.request(`/projects/${id}/repository/commits`, {
      method: 'POST',
      token,
      body: {
        branch: 'main',
        commit_message: 'refused',
        actions: [{ action: 'create', file_path: 'refused.txt', content: randomBytes(2048).toString('hex') }],
      },
    }),
    await app.request(`/projects/${id}/repository/commits`, {
      method: 'POST',
      token,
      body: {
        branch: 'new-branch',
        start_branch: 'main',
        commit_message: 'refused',
        actions: [{ action: 'create', file_path: 'refused.txt', content: 'x' }],
      },
    }),
    await app.request(`/projects/${id}/repository/files/created.txt`, {
      method: 'POST',
      token,
      body: { branch: 'main', content: randomBytes(2048).toString('hex'), commit_message: 'refused' },
    }),
    await app.request(`/projects/${id}/repository/branches`, {
      method: 'POST',
      token,
      body: { branch: 'refused-branch', ref: 'main' },
    }),
    await app.request(`/projects/${id}/repository/tags`, {
      method: 'POST',
      token,
      body: { tag_name: 'v-refused', ref: 'main', message: 'annotated, so an object is written too' },
    }),
    await app.request(`/projects/${id}/repository/tags`, {
      method: 'POST',
      token,
      body: { tag_name: 'v-light', ref: 'main' },
    }),
    await app.request(`/projects/${id}/repository/commits/${pickSha}/cherry_pick`, {
      method: 'POST',
      token,
      body: { branch: 'main' },
    }),
    await app.request(`/projects/${id}/merge_requests/${mergeIid}/merge`, { method: 'PUT', token }),
    await app.request(`/projects/${id}/repository/files/README.md`, {
      method: 'PUT',
      token,
      body: { branch: 'main', content: 'changed', commit_message: 'refused' },
    }),
  ];
  // Removing a branch on a full disk frees space and goes through (as it would on GitLab); on a
  // read-only one it is refused like the rest.
  if (storage === 'readonly') {
    refused.push(await app.request(`/projects/${id}/repository/branches/side`, { method: 'DELETE', token }));
  }
  for (const answer of refused) {
    expect(answer.status, answer.text).toBe(503);
    expect(answer.body).toEqual({ message });
  }
  // A push over HTTP: refused before git writes a byte, and the git client shows why.
  const push = await git(['push', 'origin', 'HEAD:main'], clone);
  expect(push.code).not.toBe(0);
  expect(push.stderr).toContain(`remote: ${message}`);
  expect(push.stderr).toContain('503');
  // A new project on that storage (administrators choose it): refused, and no project row left.
  const created = await app.request('/projects', {
    method: 'POST',
    token: adminToken,
    body: { name: `refused-on-${storage}`, repository_storage: storage },
  });
  expect(created.status, created.text).toBe(503);
  expect(created.body).toEqual({ message });
  // Nothing half-written: the same refs, branches, tags, events and projects; the merge request open.
  expect(await snapshot(id, ctx.gitDir)).toEqual(before);
  const mr = await app.request(`/projects/${id}/merge_requests/${mergeIid}`, { token: adminToken });
  expect(mr.body.state).toBe('opened');
}

/** Tree, blob, raw, archive, branches and a clone: for a Reporter, anonymously (public), over git. */
async function expectReadsWork(ctx: Awaited<ReturnType<typeof projectOn>>, name: string) {
  const { project, reporter } = ctx;
  const id = project.id;
  for (const token of [reporter.token, undefined]) {
    const tree = await app.request(`/projects/${id}/repository/tree`, { token });
    expect(tree.status, tree.text).toBe(200);
    expect((tree.body as { name: string }[]).map((e) => e.name)).toContain('README.md');
    const file = await app.request(`/projects/${id}/repository/files/README.md`, { token, query: { ref: 'main' } });
    expect(file.status, file.text).toBe(200);
    const raw = await app.request(`/projects/${id}/repository/files/README.md/raw`, { token, query: { ref: 'main' } });
    expect(raw.status).toBe(200);
    expect(raw.text).toContain(project.name);
    const branches = await app.request(`/projects/${id}/repository/branches`, { token });
    expect(branches.status).toBe(200);
    expect((branches.body as { name: string }[]).map((b) => b.name)).toContain('main');
    const commits = await app.request(`/projects/${id}/repository/commits`, { token });
    expect(commits.status).toBe(200);
  }
  const archive = await fetch(`${app.baseUrl}/api/v4/projects/${id}/repository/archive.tar.gz?sha=main`, {
    headers: { 'PRIVATE-TOKEN': reporter.token },
  });
  expect(archive.status).toBe(200);
  const bytes = Buffer.from(await archive.arrayBuffer());
  expect(bytes.subarray(0, 2).toString('hex')).toBe('1f8b');
  const dir = path.join(scratch, `read-clone-${name}`);
  const clone = await git([
    'clone',
    '--quiet',
    remoteUrl(app.baseUrl, project, { login: reporter.user.username, password: reporter.token }),
    dir,
  ]);
  expect(clone.code, clone.stderr).toBe(0);
  expect(fs.existsSync(path.join(dir, 'README.md'))).toBe(true);
}

/**
 * Readiness stays 200 (the instance serves reads, and writes to the other storages) and names the
 * storage that refuses writes; the others are ok.
 */
async function expectDegraded(storage: string, message: string) {
  const ready = await app.request('/-/readiness');
  expect(ready.status).toBe(200);
  expect(ready.body.status).toBe('degraded');
  expect(ready.body.checks[`storage_${storage}`]).toEqual({ status: 'degraded', message });
  expect(ready.body.checks.storage_default).toEqual({ status: 'ok' });
  expect(ready.body.checks.database).toEqual({ status: 'ok' });
}

/** After the fault is gone: an API commit and a push go through, without restarting Depot. */
async function expectWritesWorkAgain(ctx: Awaited<ReturnType<typeof projectOn>>, clone: string, storage: string) {
  const { project, maintainer } = ctx;
  const commit = await app.request(`/projects/${project.id}/repository/commits`, {
    method: 'POST',
    token: maintainer.token,
    body: {
      branch: 'after',
      start_branch: 'main',
      commit_message: 'after the fault',
      actions: [{ action: 'create', file_path: 'after.txt', content: 'after' }],
    },
  });
  expect(commit.status, commit.text).toBe(201);
  const push = await git(['push', 'origin', 'HEAD:main'], clone);
  expect(push.code, push.stderr).toBe(0);
  const main = await app.request(`/projects/${project.id}/repository/branches/main`, { token: maintainer.token });
  expect(main.body.commit.id).toBe((await git(['rev-parse', 'HEAD'], clone)).stdout.trim());
  const created = await app.request('/projects', {
    method: 'POST',
    token: adminToken,
    body: { name: `after-on-${storage}`, repository_storage: storage, initialize_with_readme: true },
  });
  expect(created.status, created.text).toBe(201);
  await expectSound(ctx.gitDir);
  const ready = await app.request('/-/readiness');
  expect(ready.status).toBe(200);
  expect(ready.body.status).toBe('ok');
}

/**
 * Moves a project on default to `destination`, which refuses the copy: the move ends `failed`
 * with `error`, the project stays on default, writable and whole, and the destination holds no
 * file of it (no partial copy, no move directory).
 */
async function expectMoveFails(ctx: Awaited<ReturnType<typeof projectOn>>, destination: string, error: string) {
  const move = await app.request(`/projects/${ctx.project.id}/repository_storage_moves`, {
    method: 'POST',
    token: adminToken,
    body: { destination_storage_name: destination },
  });
  expect(move.status, move.text).toBe(201);
  await worker.drain();
  const found = await app.request(`/project_repository_storage_moves/${move.body.id}`, { token: adminToken });
  expect(found.body.state).toBe('failed');
  expect(found.body.error_message).toBe(error);
  const row = await app.deps.db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', ctx.project.id)
    .executeTakeFirstOrThrow();
  expect(row.repository_storage).toBe('default');
  expect(row.repository_read_only).toBe(false);
  await expectSound(ctx.gitDir);
  const root = roots[destination as keyof typeof roots];
  expect(filesUnder(root).filter((file) => file.includes(Storages.hashedPath(ctx.project.id)))).toEqual([]);
  expect(fs.existsSync(path.join(root, '.tmp', `move-${move.body.id}`))).toBe(false);
  if (destination === 'small') expect(filesUnder(root)).toEqual([]);
}

/** A commit on a side branch, to cherry-pick onto main while the storage is faulty. */
async function sideCommit(ctx: Awaited<ReturnType<typeof projectOn>>): Promise<string> {
  const side = await app.request(`/projects/${ctx.project.id}/repository/commits`, {
    method: 'POST',
    token: ctx.maintainer.token,
    body: {
      branch: 'side',
      start_branch: 'main',
      commit_message: 'to pick',
      actions: [{ action: 'create', file_path: 'picked.txt', content: 'picked' }],
    },
  });
  expect(side.status, side.text).toBe(201);
  return side.body.id as string;
}

/** A merge request of the side branch into main, mergeable. */
async function sideMergeRequest(ctx: Awaited<ReturnType<typeof projectOn>>): Promise<number> {
  const mr = await app.request(`/projects/${ctx.project.id}/merge_requests`, {
    method: 'POST',
    token: ctx.maintainer.token,
    body: { source_branch: 'side', target_branch: 'main', title: 'side' },
  });
  expect(mr.status, mr.text).toBe(201);
  for (let i = 0; i < 100; i++) {
    const state = await app.request(`/projects/${ctx.project.id}/merge_requests/${mr.body.iid}`, {
      token: ctx.maintainer.token,
    });
    if (state.body.merge_status === 'can_be_merged') return mr.body.iid as number;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the merge request never became mergeable');
}

describe.skipIf(!mountable.ok)('storage faults', () => {
  it('a read-only storage refuses every write clearly, serves every read, and takes writes again once writable', {
    timeout: 60_000,
  }, async () => {
    const ctx = await projectOn('readonly', 'on-readonly');
    const pickSha = await sideCommit(ctx);
    const mergeIid = await sideMergeRequest(ctx);
    const clone = await cloneWithCommit(ctx.project, credentials(ctx), 'ro');
    // A move onto the read-only storage, and one off it, both of a project on default.
    const other = await projectOn('default', 'to-readonly');
    remount(roots.readonly, 'ro');
    try {
      expect(() => fs.writeFileSync(path.join(roots.readonly, 'probe'), 'x')).toThrow(/EROFS/);
      await expectWritesRefused(ctx, 'readonly', READ_ONLY, clone, pickSha, mergeIid);
      await expectReadsWork(ctx, 'ro');
      await expectDegraded('readonly', 'storage is read-only: writes are refused');
      await expectSound(ctx.gitDir);
      await expectMoveFails(other, 'readonly', 'The destination storage readonly is read-only');
    } finally {
      remount(roots.readonly, 'rw');
    }
    await expectWritesWorkAgain(ctx, clone, 'readonly');
  });

  it('a full storage refuses every write clearly, leaves the repository sound, and takes writes again once freed', {
    timeout: 60_000,
  }, async () => {
    const ctx = await projectOn('full', 'on-full');
    const pickSha = await sideCommit(ctx);
    const mergeIid = await sideMergeRequest(ctx);
    const clone = await cloneWithCommit(ctx.project, credentials(ctx), 'full');
    // The disk fills up in the middle of a push (more than is left, though enough was left for
    // the push to begin): git fails, nothing is recorded, and the repository stays sound.
    const partial = fill(roots.full, 512 * 1024);
    const big = path.join(scratch, 'clone-full-big');
    expect((await git(['clone', '--quiet', remoteUrl(app.baseUrl, ctx.project, credentials(ctx)), big])).code).toBe(0);
    for (let i = 0; i < 2; i++) fs.writeFileSync(path.join(big, `big-${i}.bin`), randomBytes(1024 * 1024));
    await git(['add', '.'], big);
    await git(['commit', '--quiet', '-m', 'too big for the disk'], big);
    const before = await snapshot(ctx.project.id, ctx.gitDir);
    const pushed = await git(['push', 'origin', 'HEAD:main'], big);
    expect(pushed.code).not.toBe(0);
    expect(pushed.stderr).toMatch(/No space left on device/);
    expect(await snapshot(ctx.project.id, ctx.gitDir)).toEqual(before);
    await expectSound(ctx.gitDir);
    fs.rmSync(partial);

    const filler = fill(roots.full);
    try {
      expect(() => fs.writeFileSync(path.join(roots.full, 'probe'), 'x')).toThrow(/ENOSPC/);
      await expectWritesRefused(ctx, 'full', FULL, clone, pickSha, mergeIid);
      await expectSound(ctx.gitDir);
      await expectReadsWork(ctx, 'full');
      await expectDegraded('full', 'storage is full: writes are refused');
    } finally {
      fs.rmSync(filler, { force: true });
    }
    await expectWritesWorkAgain(ctx, clone, 'full');
  });

  it('a storage move onto a destination that fills up fails and leaves the project on its source, whole', {
    timeout: 60_000,
  }, async () => {
    const ctx = await projectOn('default', 'moving');
    // A repository of about 3 MiB of incompressible blobs: more than the 1 MiB destination holds.
    const clone = path.join(scratch, 'clone-move');
    expect((await git(['clone', '--quiet', remoteUrl(app.baseUrl, ctx.project, credentials(ctx)), clone])).code).toBe(
      0,
    );
    for (let i = 0; i < 3; i++) fs.writeFileSync(path.join(clone, `blob-${i}.bin`), randomBytes(1024 * 1024));
    await git(['add', '.'], clone);
    await git(['commit', '--quiet', '-m', 'large blobs'], clone);
    const pushed = await git(['push', 'origin', 'HEAD:main'], clone);
    expect(pushed.code, pushed.stderr).toBe(0);
    const before = await snapshot(ctx.project.id, ctx.gitDir);

    await expectMoveFails(ctx, 'small', 'The destination storage small is full');
    expect(await snapshot(ctx.project.id, ctx.gitDir)).toEqual(before);
    // Its space is back.
    const free = fs.statfsSync(roots.small);
    expect(free.bfree).toBe(free.blocks);

    await expectReadsWork(ctx, 'move');
    await expectWritesWorkAgain(ctx, clone, 'default');
  });
});

describe.skipIf(!mountable.ok)('archive cache faults', () => {
  it('archives are streamed without the cache when its directory is read-only or full', {
    timeout: 60_000,
  }, async () => {
    const ctx = await projectOn('default', 'archived');
    // The cache lives in STORAGE_DIR (cache/archive), apart from the repository storages: a
    // filesystem of its own here, to make it fail alone.
    const cacheDir = mountTmpfs('cache', '4m', path.join(app.storageDir, 'cache'));
    try {
      // GitLab limits archive downloads per user and project (5 a minute): the two halves of this
      // test download as two users.
      const download = async (format: string, token = ctx.reporter.token) => {
        const res = await fetch(`${app.baseUrl}/api/v4/projects/${ctx.project.id}/repository/archive.${format}`, {
          headers: { 'PRIVATE-TOKEN': token },
        });
        return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
      };
      remount(cacheDir, 'ro');
      const readOnly = await download('tar.gz');
      remount(cacheDir, 'rw');
      expect(readOnly.status).toBe(200);
      expect(filesUnder(cacheDir)).toEqual([]);
      const filler = fill(cacheDir);
      const full = await download('zip');
      fs.rmSync(filler);
      expect(full.status).toBe(200);
      expect(full.bytes.subarray(0, 2).toString()).toBe('PK');
      expect(filesUnder(cacheDir)).toEqual([]);
      // Once writable, the same archives come from the cache, byte for byte what was streamed.
      const cached = await download('tar.gz');
      expect(cached.status).toBe(200);
      expect(cached.bytes.equals(readOnly.bytes)).toBe(true);
      expect((await download('zip')).bytes.equals(full.bytes)).toBe(true);
      expect(filesUnder(cacheDir).length).toBeGreaterThanOrEqual(2);

      // The disk fills while an archive is being cached (more than was left): the download is
      // whole all the same, and no partial file stays in the cache.
      const clone = path.join(scratch, 'clone-archived');
      expect((await git(['clone', '--quiet', remoteUrl(app.baseUrl, ctx.project, credentials(ctx)), clone])).code).toBe(
        0,
      );
      fs.writeFileSync(path.join(clone, 'large.bin'), randomBytes(1024 * 1024));
      await git(['add', '.'], clone);
      await git(['commit', '--quiet', '-m', 'large'], clone);
      expect((await git(['push', 'origin', 'HEAD:main'], clone)).code).toBe(0);
      const before = filesUnder(cacheDir).sort();
      const partial = fill(cacheDir, 256 * 1024);
      const cut = await download('tar.gz', ctx.maintainer.token);
      fs.rmSync(partial);
      expect(cut.status).toBe(200);
      // Nothing partial stays in the cache; with room again, the cached archive is the same bytes.
      expect(filesUnder(cacheDir).sort()).toEqual(before);
      const whole = await download('tar.gz', ctx.maintainer.token);
      expect(whole.status).toBe(200);
      expect(whole.bytes.length).toBeGreaterThan(1024 * 1024);
      expect(cut.bytes.equals(whole.bytes)).toBe(true);
      expect(filesUnder(cacheDir).length).toBe(before.length + 1);
    } finally {
      unmount(cacheDir);
    }
  });
});

describe.skipIf(mountable.ok || !process.env.CI)('storage faults under CI', () => {
  it('can mount the filesystems it needs', () => {
    throw new Error(`test/storage-faults.test.ts ${NEEDS_MOUNT}`);
  });
});

if (!mountable.ok && !process.env.CI) {
  describe.skip(`storage faults (${NEEDS_MOUNT})`, () => {
    it('skipped', () => {});
  });
}
