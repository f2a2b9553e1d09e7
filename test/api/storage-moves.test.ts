import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkLfsObject } from '../../src/db/queries/lfs.js';
import type { Project, User } from '../../src/db/schema.js';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeGroup, makeSampleProject, makeToken, makeUser } from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

let app: TestApp;
let admin: User;
let adminToken: string;
let userToken: string;
let worker: Worker;
let scratch: string;
let counter = 0;

const READ_ONLY = 'The repository is temporarily read-only. Please try again later.';

beforeAll(async () => {
  app = await startTestApp({ storages: ['second', 'third'] });
  admin = await makeUser(app, { admin: true });
  adminToken = await makeToken(app, admin);
  userToken = await makeToken(app, await makeUser(app));
  worker = new Worker(app.deps, JOB_KINDS);
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-moves-'));
});

afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

const git = (args: string[], cwd = scratch) => runGitClient(args, cwd);

/** `<oid> <ref>` lines plus HEAD, as native git reports them. */
async function refsOf(gitDir: string): Promise<string> {
  const refs = await git([`--git-dir=${gitDir}`, 'for-each-ref', '--format=%(objectname) %(refname)']);
  const head = await git([`--git-dir=${gitDir}`, 'symbolic-ref', 'HEAD']);
  return `${head.stdout}${refs.stdout}`;
}

/** Every object id reachable in the repository, sorted. */
async function objectsOf(gitDir: string): Promise<string> {
  const out = await git([`--git-dir=${gitDir}`, 'cat-file', '--batch-all-objects', '--batch-check=%(objectname)']);
  return out.stdout.split('\n').sort().join('\n');
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

/** A sample project with one LFS object stored beside it. */
async function projectWithLfs(): Promise<{ project: Project; gitDir: string; oid: string; content: Buffer }> {
  const { project, gitDir } = await makeSampleProject(app, admin, { path: `moving${++counter}` });
  const content = Buffer.from(`large file content ${counter}\n`.repeat(1000));
  const oid = createHash('sha256').update(content).digest('hex');
  const file = app.deps.storages.lfsObjectPath(project.repository_storage, oid);
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, content);
  await linkLfsObject(app.deps.db, project.id, oid, content.length);
  return { project, gitDir, oid, content };
}

async function projectRow(id: number): Promise<Project> {
  return app.deps.db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

describe('project repository storage moves', () => {
  it('moves a repository and its LFS objects, refusing pushes until it is done', async () => {
    const { project, gitDir, oid, content } = await projectWithLfs();
    const refsBefore = await refsOf(gitDir);
    const objectsBefore = await objectsOf(gitDir);
    const lfsInode = (await fs.stat(app.deps.storages.lfsObjectPath('default', oid))).ino;
    const work = path.join(scratch, `work${counter}`);
    const credentials = { login: admin.username, password: adminToken };
    expect((await git(['clone', '--quiet', remoteUrl(app.baseUrl, project, credentials), work])).code).toBe(0);

    const res = await app.request(`/projects/${project.id}/repository_storage_moves`, {
      method: 'POST',
      token: adminToken,
      body: { destination_storage_name: 'second' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(Number),
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      state: 'scheduled',
      source_storage_name: 'default',
      destination_storage_name: 'second',
      error_message: null,
      project: {
        id: project.id,
        description: project.description,
        name: project.name,
        name_with_namespace: `${admin.name} / ${project.name}`,
        path: project.path,
        path_with_namespace: project.full_path,
        created_at: project.created_at.toISOString(),
      },
    });

    // Read-only while it moves: pushes and the commits API refuse; a second move is refused.
    await fs.writeFile(path.join(work, 'during.txt'), 'x\n');
    await git(['add', 'during.txt'], work);
    await git(['commit', '--quiet', '-m', 'during the move'], work);
    const push = await git(['push', 'origin', 'HEAD'], work);
    expect(push.code).not.toBe(0);
    expect(push.stderr).toContain(READ_ONLY);
    const commit = await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token: adminToken,
      body: { branch: 'main', commit_message: 'm', actions: [{ action: 'create', file_path: 'n.txt', content: 'n' }] },
    });
    expect(commit.status).toBe(403);
    expect(commit.body).toEqual({ message: `403 Forbidden - ${READ_ONLY}` });
    // So does moving HEAD: a new default branch would be lost with the source repository.
    const otherBranch = refsBefore.split('\n').find((line) => line.includes('refs/heads/') && !line.endsWith('/main'));
    expect(otherBranch).toBeDefined();
    const head = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token: adminToken,
      body: { default_branch: otherBranch?.split('refs/heads/')[1] },
    });
    expect({ status: head.status, body: head.body }).toEqual({
      status: 403,
      body: { message: `403 Forbidden - ${READ_ONLY}` },
    });
    expect((await projectRow(project.id)).default_branch).toBe('main');
    expect(await fs.readFile(path.join(gitDir, 'HEAD'), 'utf8')).toBe('ref: refs/heads/main\n');
    const again = await app.request(`/projects/${project.id}/repository_storage_moves`, {
      method: 'POST',
      token: adminToken,
      body: { destination_storage_name: 'third' },
    });
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ message: { project: ['is read-only'] } });
    // Reads keep working.
    expect((await app.request(`/projects/${project.id}/repository/branches`, { token: adminToken })).status).toBe(200);

    expect(await worker.drain()).toBe(1);

    const done = await app.request(`/projects/${project.id}/repository_storage_moves/${res.body.id}`, {
      token: adminToken,
    });
    expect(done.body).toMatchObject({ state: 'finished', error_message: null, destination_storage_name: 'second' });
    const moved = await projectRow(project.id);
    expect(moved.repository_storage).toBe('second');
    expect(moved.repository_read_only).toBe(false);
    const shown = await app.request(`/projects/${project.id}`, { token: adminToken });
    expect(shown.body.repository_storage).toBe('second');

    // Complete on the destination, gone from the source.
    const destDir = app.deps.storages.repositoryPath('second', project.id);
    expect(await refsOf(destDir)).toBe(refsBefore);
    expect(await objectsOf(destDir)).toBe(objectsBefore);
    expect((await git([`--git-dir=${destDir}`, 'fsck', '--full'])).code).toBe(0);
    expect(await exists(gitDir)).toBe(false);
    expect(await fs.readFile(app.deps.storages.lfsObjectPath('second', oid))).toEqual(content);
    // Both roots are on one filesystem: the files were hard-linked, not copied.
    expect((await fs.stat(app.deps.storages.lfsObjectPath('second', oid))).ino).toBe(lfsInode);
    expect(await exists(app.deps.storages.lfsObjectPath('default', oid))).toBe(false);
    expect(await exists(path.join(app.deps.storages.root('second'), '.tmp', `move-${res.body.id}`))).toBe(false);
    expect(await exists(path.join(app.deps.storages.root('default'), '.tmp', `removed-move-${res.body.id}.git`))).toBe(
      false,
    );

    // A fresh clone over HTTP has every ref and object; the LFS object is served; pushes work again.
    const clone = path.join(scratch, `clone${counter}`);
    expect(
      (await git(['clone', '--quiet', '--mirror', remoteUrl(app.baseUrl, project, credentials), clone])).code,
    ).toBe(0);
    expect(await objectsOf(clone)).toBe(objectsBefore);
    const batch = await fetch(`${remoteUrl(app.baseUrl, project)}/info/lfs/objects/batch`, {
      method: 'POST',
      headers: {
        Accept: 'application/vnd.git-lfs+json',
        'Content-Type': 'application/vnd.git-lfs+json',
        Authorization: `Basic ${Buffer.from(`${admin.username}:${adminToken}`).toString('base64')}`,
      },
      body: JSON.stringify({ operation: 'download', objects: [{ oid, size: content.length }] }),
    });
    const href = (
      (await batch.json()) as {
        objects: { actions: { download: { href: string; header?: Record<string, string> } } }[];
      }
    ).objects[0]?.actions.download;
    expect(href).toBeDefined();
    const blob = await fetch(href?.href as string, { headers: href?.header });
    expect(Buffer.from(await blob.arrayBuffer())).toEqual(content);
    expect((await git(['push', '--quiet', 'origin', 'HEAD'], work)).code).toBe(0);
  });

  it('copies the bytes when told to (storages on different filesystems), with the same result', async () => {
    const { project, gitDir, oid, content } = await projectWithLfs();
    const refsBefore = await refsOf(gitDir);
    const objectsBefore = await objectsOf(gitDir);
    // One object file (loose or a pack): after a byte copy the destination has its own inode.
    const objectFile = (await fs.readdir(path.join(gitDir, 'objects'), { recursive: true }))
      .map(String)
      .find((f) => /^([0-9a-f]{2}\/[0-9a-f]{38}|pack\/pack-[0-9a-f]+\.pack)$/.test(f)) as string;
    expect(objectFile).toBeDefined();
    const inodes = [
      (await fs.stat(path.join(gitDir, 'objects', objectFile))).ino,
      (await fs.stat(app.deps.storages.lfsObjectPath('default', oid))).ino,
    ];
    const res = await app.request(`/projects/${project.id}/repository_storage_moves`, {
      method: 'POST',
      token: adminToken,
      body: { destination_storage_name: 'second' },
    });
    expect(res.status).toBe(201);
    process.env.DEPOT_STORAGE_MOVE_COPY = 'copy';
    try {
      await worker.drain();
    } finally {
      delete process.env.DEPOT_STORAGE_MOVE_COPY;
    }
    const move = await app.request(`/project_repository_storage_moves/${res.body.id}`, { token: adminToken });
    expect(move.body).toMatchObject({ state: 'finished', error_message: null });
    const destDir = app.deps.storages.repositoryPath('second', project.id);
    expect(await refsOf(destDir)).toBe(refsBefore);
    expect(await objectsOf(destDir)).toBe(objectsBefore);
    expect((await git([`--git-dir=${destDir}`, 'fsck', '--full'])).code).toBe(0);
    const destLfs = app.deps.storages.lfsObjectPath('second', oid);
    expect(await fs.readFile(destLfs)).toEqual(content);
    expect((await fs.stat(path.join(destDir, 'objects', objectFile))).ino).not.toBe(inodes[0]);
    expect((await fs.stat(destLfs)).ino).not.toBe(inodes[1]);
    expect(await exists(gitDir)).toBe(false);
  });

  it('moves a project when an administrator changes its repository_storage', async () => {
    const { project } = await makeSampleProject(app, admin, { path: `updated${++counter}` });
    const bad = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token: adminToken,
      body: { repository_storage: 'nowhere' },
    });
    expect(bad).toMatchObject({
      status: 400,
      body: { message: { destination_storage_name: ['is not included in the list'] } },
    });
    const res = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token: adminToken,
      body: { repository_storage: 'third', description: 'moving on' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ description: 'moving on', repository_storage: 'default' });
    const moves = await app.request(`/projects/${project.id}/repository_storage_moves`, { token: adminToken });
    expect(moves.body).toEqual([expect.objectContaining({ state: 'scheduled', destination_storage_name: 'third' })]);
    await worker.drain();
    expect((await projectRow(project.id)).repository_storage).toBe('third');
  });

  it('queues a move again at worker start when its job was lost, so no move stays in flight', async () => {
    const { project } = await makeSampleProject(app, admin, { path: `orphan${++counter}` });
    const res = await app.request(`/projects/${project.id}/repository_storage_moves`, {
      method: 'POST',
      token: adminToken,
      body: { destination_storage_name: 'second' },
    });
    expect(res.status).toBe(201);
    await app.deps.db.deleteFrom('jobs').where('kind', '=', 'repository_storage_move').execute();
    expect(await worker.drain()).toBe(0);
    expect((await projectRow(project.id)).repository_read_only).toBe(true);
    expect(await worker.drain({ recover: true })).toBe(1);
    const move = await app.request(`/project_repository_storage_moves/${res.body.id}`, { token: adminToken });
    expect(move.body.state).toBe('finished');
    expect(await projectRow(project.id)).toMatchObject({ repository_storage: 'second', repository_read_only: false });
  });

  it('keeps a source that changed after the copy and says cleanup failed', async () => {
    const { project, gitDir } = await makeSampleProject(app, admin, { path: `late${++counter}` });
    // The state after a replication whose source then got a late push: the destination has the
    // copy, the project points at it, and the source has one more ref.
    const destDir = app.deps.storages.repositoryPath('second', project.id);
    await fs.mkdir(path.dirname(destDir), { recursive: true });
    await fs.cp(gitDir, destDir, { recursive: true });
    const head = (await git([`--git-dir=${gitDir}`, 'rev-parse', 'HEAD'])).stdout.trim();
    expect((await git([`--git-dir=${gitDir}`, 'update-ref', 'refs/heads/late-push', head])).code).toBe(0);
    await app.deps.db
      .updateTable('projects')
      .set({ repository_storage: 'second' })
      .where('id', '=', project.id)
      .execute();
    const move = await app.deps.db
      .insertInto('repository_storage_moves')
      .values({
        container_type: 'project',
        container_id: project.id,
        state: 6,
        source_storage_name: 'default',
        destination_storage_name: 'second',
        created_at: app.clock.now(),
        updated_at: app.clock.now(),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    expect(await worker.drain({ recover: true })).toBe(1);
    const shown = await app.request(`/project_repository_storage_moves/${move.id}`, { token: adminToken });
    expect(shown.body).toMatchObject({
      state: 'cleanup failed',
      error_message: 'The source repository on default changed during the move; it was kept for inspection',
    });
    expect((await git([`--git-dir=${gitDir}`, 'rev-parse', 'refs/heads/late-push'])).stdout.trim()).toBe(head);
    expect((await projectRow(project.id)).repository_read_only).toBe(false);
  });

  it('answers validation errors as GitLab does, and only to administrators', async () => {
    const { project } = await makeSampleProject(app, admin, { path: `invalid${++counter}` });
    const url = `/projects/${project.id}/repository_storage_moves`;
    const post = (body: unknown, token?: string) => app.request(url, { method: 'POST', token, body });
    expect(await post({ destination_storage_name: 'second' })).toMatchObject({
      status: 401,
      body: { message: '401 Unauthorized' },
    });
    expect(await post({ destination_storage_name: 'second' }, userToken)).toMatchObject({
      status: 403,
      body: { message: '403 Forbidden' },
    });
    expect((await app.request(url, { token: userToken })).status).toBe(403);
    expect((await app.request('/project_repository_storage_moves', { token: userToken })).status).toBe(403);
    expect((await app.request('/project_repository_storage_moves')).status).toBe(401);
    expect(
      (
        await app.request('/project_repository_storage_moves', {
          method: 'POST',
          token: userToken,
          body: { source_storage_name: 'default' },
        })
      ).status,
    ).toBe(403);
    expect(await post({ destination_storage_name: 'nowhere' }, adminToken)).toMatchObject({
      status: 400,
      body: { message: { destination_storage_name: ['is not included in the list'] } },
    });
    expect(await post({ destination_storage_name: '../../etc' }, adminToken)).toMatchObject({
      status: 400,
      body: { message: { destination_storage_name: ['is not included in the list'] } },
    });
    expect(await post({ destination_storage_name: 'default' }, adminToken)).toMatchObject({
      status: 400,
      body: { message: { destination_storage_name: ['must be different from the source storage'] } },
    });
    expect(await post({ destination_storage_name: '' }, adminToken)).toMatchObject({
      status: 400,
      body: { message: { destination_storage_name: ["can't be blank"] } },
    });
    // Nothing was scheduled, and the project stayed writable.
    expect((await app.request(url, { token: adminToken })).body).toEqual([]);
    expect((await projectRow(project.id)).repository_read_only).toBe(false);

    expect(
      await app.request('/projects/999999/repository_storage_moves', {
        method: 'POST',
        token: adminToken,
        body: {},
      }),
    ).toMatchObject({ status: 404, body: { message: '404 Project Not Found' } });
    expect(await app.request('/project_repository_storage_moves/999999', { token: adminToken })).toMatchObject({
      status: 404,
      body: { message: '404 Not found' },
    });
    expect(
      await app.request(`/projects/${project.id}/repository_storage_moves/999999`, { token: adminToken }),
    ).toMatchObject({ status: 404, body: { message: '404 Not found' } });

    const bulk = (body: unknown) =>
      app.request('/project_repository_storage_moves', { method: 'POST', token: adminToken, body });
    expect(await bulk({})).toMatchObject({ status: 400, body: { error: 'source_storage_name is missing' } });
    expect(await bulk({ source_storage_name: 'nowhere' })).toMatchObject({
      status: 400,
      body: { error: 'source_storage_name does not have a valid value' },
    });
    expect(await bulk({ source_storage_name: 'default', destination_storage_name: 'nowhere' })).toMatchObject({
      status: 400,
      body: { error: 'destination_storage_name does not have a valid value' },
    });
    expect(await bulk({ source_storage_name: 'default', destination_storage_name: 'default' })).toMatchObject({
      status: 400,
      body: { message: { destination_storage_name: ['must be different from the source storage'] } },
    });
  });

  it('picks the destination by the storage weights when none is given', async () => {
    // Created before the weights change, so it is on `default` for sure.
    const { project } = await makeSampleProject(app, admin, { path: `weighted${++counter}` });
    expect(project.repository_storage).toBe('default');
    const put = await app.request('/application/settings', {
      method: 'PUT',
      token: adminToken,
      body: { repository_storages_weighted: { default: 100, second: 0, third: 100 } },
    });
    expect(put.status).toBe(200);
    try {
      const res = await app.request(`/projects/${project.id}/repository_storage_moves`, {
        method: 'POST',
        token: adminToken,
      });
      expect(res.status).toBe(201);
      // `default` is the source and `second` has no weight: only `third` is left.
      expect(res.body.destination_storage_name).toBe('third');
      await worker.drain();
      const move = await app.request(`/project_repository_storage_moves/${res.body.id}`, { token: adminToken });
      expect(move.body).toMatchObject({ state: 'finished' });
      expect((await projectRow(project.id)).repository_storage).toBe('third');
    } finally {
      await app.request('/application/settings', {
        method: 'PUT',
        token: adminToken,
        body: { repository_storages_weighted: { default: 100, second: 0, third: 0 } },
      });
    }
  });

  it('fails a move whose copy does not verify: destination cleaned, source writable and intact', async () => {
    const { project, gitDir } = await makeSampleProject(app, admin, { path: `broken${++counter}` });
    // A ref to an object that does not exist: the copy cannot pass `git fsck --connectivity-only`.
    await fs.writeFile(path.join(gitDir, 'refs', 'heads', 'dangling'), `${'1'.repeat(40)}\n`);
    const refsBefore = await refsOf(gitDir);
    const res = await app.request(`/projects/${project.id}/repository_storage_moves`, {
      method: 'POST',
      token: adminToken,
      body: { destination_storage_name: 'second' },
    });
    expect(res.status).toBe(201);
    await worker.drain();
    const move = await app.request(`/project_repository_storage_moves/${res.body.id}`, { token: adminToken });
    expect(move.body.state).toBe('failed');
    expect(move.body.error_message).toBe('Failed to verify project repository connectivity on second');
    const row = await projectRow(project.id);
    expect(row.repository_storage).toBe('default');
    expect(row.repository_read_only).toBe(false);
    expect(await refsOf(gitDir)).toBe(refsBefore);
    expect(await exists(app.deps.storages.repositoryPath('second', project.id))).toBe(false);
    expect(await exists(path.join(app.deps.storages.root('second'), '.tmp', `move-${res.body.id}`))).toBe(false);
    await fs.rm(path.join(gitDir, 'refs', 'heads', 'dangling'));
  });

  it('refuses to move a directory that is not a repository, and leaves it in place', async () => {
    const { project, gitDir } = await makeSampleProject(app, admin, { path: `nohead${++counter}` });
    await fs.rm(path.join(gitDir, 'HEAD'));
    const res = await app.request(`/projects/${project.id}/repository_storage_moves`, {
      method: 'POST',
      token: adminToken,
      body: { destination_storage_name: 'second' },
    });
    await worker.drain();
    const move = await app.request(`/project_repository_storage_moves/${res.body.id}`, { token: adminToken });
    expect(move.body).toMatchObject({
      state: 'failed',
      error_message: 'The source repository on default is not a valid repository',
    });
    expect(await exists(path.join(gitDir, 'config'))).toBe(true);
    expect(await projectRow(project.id)).toMatchObject({ repository_storage: 'default', repository_read_only: false });
    await fs.writeFile(path.join(gitDir, 'HEAD'), 'ref: refs/heads/main\n');
  });

  it('moves a whole storage in bulk, lists moves newest first, and reports them in /-/metrics', async () => {
    const projects = [];
    for (let i = 0; i < 3; i++) projects.push(await projectWithLfs());
    // Everything still on `default` (from this file's other tests too) moves to `third`.
    const res = await app.request('/project_repository_storage_moves', {
      method: 'POST',
      token: adminToken,
      body: { source_storage_name: 'default', destination_storage_name: 'third' },
    });
    expect(res).toMatchObject({ status: 202, body: { message: '202 Accepted' } });
    await worker.drain();
    const left = await app.request('/projects', { token: adminToken, query: { repository_storage: 'default' } });
    expect(left.body).toEqual([]);
    for (const { project, oid, content } of projects) {
      const row = await projectRow(project.id);
      expect(row.repository_storage).toBe('third');
      expect((await git([`--git-dir=${app.deps.storages.repositoryPath('third', project.id)}`, 'fsck'])).code).toBe(0);
      expect(await fs.readFile(app.deps.storages.lfsObjectPath('third', oid))).toEqual(content);
    }
    const list = await app.request('/project_repository_storage_moves', { token: adminToken, query: { per_page: 2 } });
    expect(list.status).toBe(200);
    expect(list.body).toHaveLength(2);
    expect(list.headers.get('x-per-page')).toBe('2');
    const total = Number(list.headers.get('x-total'));
    expect(total).toBeGreaterThanOrEqual(6);
    expect(list.body[0].id).toBeGreaterThan(list.body[1].id);
    expect(list.body[0]).toMatchObject({ state: 'finished', destination_storage_name: 'third' });
    const mine = await app.request(`/projects/${projects[0]?.project.id}/repository_storage_moves`, {
      token: adminToken,
    });
    expect(mine.body.map((m: { project: { id: number } }) => m.project.id)).toEqual([projects[0]?.project.id]);

    const metrics = await (await fetch(new URL('/-/metrics', app.baseUrl))).text();
    const count = async (state: number) =>
      (await app.deps.db.selectFrom('repository_storage_moves').select('id').where('state', '=', state).execute())
        .length;
    expect(metrics).toContain(
      `depot_repository_storage_moves{container_type="project",state="finished"} ${await count(4)}`,
    );
    expect(metrics).toContain(
      `depot_repository_storage_moves{container_type="project",state="failed"} ${await count(5)}`,
    );
    expect(await count(5)).toBeGreaterThan(0);

    // A running move's progress: bytes copied of the total, per move.
    const running = await app.deps.db
      .insertInto('repository_storage_moves')
      .values({
        container_type: 'project',
        container_id: projects[0]?.project.id as number,
        state: 3,
        source_storage_name: 'third',
        destination_storage_name: 'second',
        bytes_total: 1000,
        bytes_copied: 250,
        created_at: app.clock.now(),
        updated_at: app.clock.now(),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    try {
      const scraped = await (await fetch(new URL('/-/metrics', app.baseUrl))).text();
      const labels = `move_id="${running.id}",container_type="project",container_id="${projects[0]?.project.id}",source="third",destination="second"`;
      expect(scraped).toContain(`depot_repository_storage_move_bytes_copied{${labels}} 250`);
      expect(scraped).toContain(`depot_repository_storage_move_bytes_total{${labels}} 1000`);
      expect(scraped).toContain('depot_repository_storage_moves{container_type="project",state="started"} 1');
    } finally {
      await app.deps.db.deleteFrom('repository_storage_moves').where('id', '=', running.id).execute();
    }
  });

  it('moves group repositories and snippets on the same machinery (none exist yet)', async () => {
    const group = await makeGroup(app, admin);
    const res = await app.request(`/groups/${group.id}/repository_storage_moves`, {
      method: 'POST',
      token: adminToken,
      body: { destination_storage_name: 'second' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      state: 'scheduled',
      source_storage_name: 'default',
      destination_storage_name: 'second',
      group: { id: group.id, name: group.name, web_url: `${app.baseUrl}/groups/${group.full_path}` },
    });
    await worker.drain();
    const done = await app.request(`/groups/${group.id}/repository_storage_moves/${res.body.id}`, {
      token: adminToken,
    });
    expect(done.body.state).toBe('finished');
    expect((await app.request('/group_repository_storage_moves', { token: adminToken })).body).toHaveLength(1);
    expect((await app.request(`/project_repository_storage_moves/${res.body.id}`, { token: adminToken })).status).toBe(
      404,
    );

    expect(
      await app.request('/snippets/1/repository_storage_moves', {
        method: 'POST',
        token: adminToken,
        body: { destination_storage_name: 'second' },
      }),
    ).toMatchObject({ status: 404, body: { message: '404 Snippet Not Found' } });
    expect(
      await app.request('/snippet_repository_storage_moves', {
        method: 'POST',
        token: adminToken,
        body: { source_storage_name: 'default' },
      }),
    ).toMatchObject({ status: 202 });
    await worker.drain();
    expect((await app.request('/snippet_repository_storage_moves', { token: adminToken })).body).toEqual([]);
    expect((await app.request('/snippet_repository_storage_moves', { token: userToken })).status).toBe(403);
  });
});

describe('application settings for storages', () => {
  it('reads and writes the storage weights; new projects go where the weights say', async () => {
    const read = await app.request('/application/settings', { token: adminToken });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({
      id: 1,
      repository_storages_weighted: { default: 100, second: 0, third: 0 },
      repository_storages: ['default'],
    });
    expect(read.body.created_at).toMatch(/Z$/);
    expect((await app.request('/application/settings', { token: userToken })).status).toBe(403);
    expect((await app.request('/application/settings')).status).toBe(401);

    const put = (body: unknown) => app.request('/application/settings', { method: 'PUT', token: adminToken, body });
    expect(
      await put({ repository_storages_weighted: { default: 0, second: 100, nowhere: 5, third: 101 } }),
    ).toMatchObject({
      status: 400,
      body: {
        message: {
          repository_storages_weighted: ["can't include: nowhere", "value for 'third' must be between 0 and 100"],
        },
      },
    });
    const none = await put({});
    expect(none.status).toBe(400);
    expect(none.body.error).toMatch(/^admin_mode, .* are missing, at least one parameter must be provided$/);
    expect(none.body.error).toContain('repository_storages_weighted, ');
    expect((await put({ repository_storages_weighted: { default: 0, second: 100 } })).status).toBe(200);
    try {
      const created = await app.request('/projects', { method: 'POST', token: adminToken, body: { name: 'placed' } });
      expect(created.status).toBe(201);
      expect(created.body.repository_storage).toBe('second');
      const form = new URLSearchParams();
      form.append('repository_storages[]', 'third');
      const viaList = await app.request('/application/settings', { method: 'PUT', token: adminToken, body: form });
      expect(viaList.body).toMatchObject({
        repository_storages_weighted: { default: 0, second: 0, third: 100 },
        repository_storages: ['third'],
      });
    } finally {
      await put({ repository_storages_weighted: { default: 100, second: 0, third: 0 } });
    }
  });
});
