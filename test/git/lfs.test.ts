import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pseudoRandomBytes } from '../../fixtures/sample-repo.js';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeProjectMember, makeSampleProject, makeUser, type Role } from '../support/factories.js';
import { type GitCredentials, remoteUrl, runGitClient } from '../support/git-client.js';
import { GIT_LFS, lacks } from '../support/programs.js';

let app: TestApp;
let scratch: string;
let owner: User;
let counter = 0;

const exec = promisify(execFile);
const git = (args: string[], cwd = scratch) => runGitClient(args, cwd);
const remote = (project: Project, credentials?: GitCredentials) => remoteUrl(app.baseUrl, project, credentials);

async function member(project: Project, role: Role) {
  const { user, token } = await makeProjectMember(app, project, role);
  return { login: user.username, password: token };
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

beforeAll(async () => {
  app = await startTestApp();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-lfs-'));
  owner = await makeUser(app);
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

describe.skipIf(lacks(GIT_LFS))('Git LFS with the real git-lfs client', () => {
  it('pushes LFS objects, serves them to a fresh clone, and puts them in archives', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: `lfs${++counter}`, visibility: 'private' });
    const maintainer = await member(project, 'maintainer');
    const work = path.join(scratch, `work-${++counter}`);
    expect((await git(['clone', '--quiet', remote(project, maintainer), work])).code).toBe(0);
    expect((await git(['lfs', 'install', '--local'], work)).code).toBe(0);
    await git(['lfs', 'track', '*.bin'], work);
    const content = pseudoRandomBytes(2 * 1024 * 1024 + 17, 99);
    await fs.writeFile(path.join(work, 'asset.bin'), content);
    await git(['add', '.gitattributes', 'asset.bin'], work);
    await git(['commit', '--quiet', '-m', 'Add an LFS asset'], work);
    const push = await git(['push', 'origin', 'main'], work);
    expect(push.code, push.stderr).toBe(0);

    // The repository holds the pointer; the storage holds the object, linked to the project.
    const pointer = (await git([`--git-dir=${gitDir}`, 'cat-file', 'blob', 'main:asset.bin'])).stdout;
    const oid = sha256(content);
    expect(pointer).toBe(`version https://git-lfs.github.com/spec/v1\noid sha256:${oid}\nsize ${content.length}\n`);
    const file = app.deps.storages.lfsObjectPath(project.repository_storage, oid);
    expect(sha256(await fs.readFile(file))).toBe(oid);

    // A reporter's fresh clone gets the content back.
    const reporter = await member(project, 'reporter');
    const copy = path.join(scratch, `copy-${++counter}`);
    expect((await git(['clone', '--quiet', remote(project, reporter), copy])).code).toBe(0);
    await git(['lfs', 'install', '--local'], copy);
    const pull = await git(['lfs', 'pull'], copy);
    expect(pull.code, pull.stderr).toBe(0);
    expect(sha256(await fs.readFile(path.join(copy, 'asset.bin')))).toBe(oid);

    // Archives carry the object, not the pointer.
    const res = await fetch(new URL(`/api/v4/projects/${project.id}/repository/archive.tar`, app.baseUrl), {
      headers: { 'PRIVATE-TOKEN': reporter.password },
    });
    expect(res.status).toBe(200);
    const tarFile = path.join(scratch, `archive-${++counter}.tar`);
    await fs.writeFile(tarFile, Buffer.from(await res.arrayBuffer()));
    const list = (await exec('tar', ['-tf', tarFile], { encoding: 'utf8' })).stdout.split('\n');
    const member_ = list.find((name) => name.endsWith('/asset.bin')) as string;
    const extracted = (await exec('tar', ['-xOf', tarFile, member_], { encoding: 'buffer', maxBuffer: 1 << 26 }))
      .stdout;
    expect(sha256(extracted)).toBe(oid);
  });

  it('refuses objects that do not match their oid, and guests and strangers', async () => {
    const { project } = await makeSampleProject(app, owner, { path: `lfs${++counter}`, visibility: 'private' });
    const dev = await member(project, 'developer');
    const auth = `Basic ${Buffer.from(`${dev.login}:${dev.password}`).toString('base64')}`;
    const body = Buffer.from('not what the oid says');
    const wrongOid = sha256(Buffer.from('something else'));
    const put = await fetch(
      new URL(`/${project.full_path}.git/gitlab-lfs/objects/${wrongOid}/${body.length}`, app.baseUrl),
      {
        method: 'PUT',
        headers: { Authorization: auth, 'Content-Type': 'application/octet-stream' },
        body,
      },
    );
    expect(put.status).toBe(400);
    await expect(fs.access(app.deps.storages.lfsObjectPath(project.repository_storage, wrongOid))).rejects.toThrow();
    const links = await app.deps.db
      .selectFrom('lfs_objects_projects')
      .selectAll()
      .where('project_id', '=', project.id)
      .execute();
    expect(links).toEqual([]);

    const batch = (credentials: { login: string; password: string } | null, operation: string) =>
      fetch(new URL(`/${project.full_path}.git/info/lfs/objects/batch`, app.baseUrl), {
        method: 'POST',
        headers: {
          'Content-Type': 'application/vnd.git-lfs+json',
          Accept: 'application/vnd.git-lfs+json',
          ...(credentials
            ? {
                Authorization: `Basic ${Buffer.from(`${credentials.login}:${credentials.password}`).toString('base64')}`,
              }
            : {}),
        },
        body: JSON.stringify({ operation, transfers: ['basic'], objects: [{ oid: wrongOid, size: 5 }] }),
      });
    expect((await batch(null, 'download')).status).toBe(401);
    const guest = await member(project, 'guest');
    expect((await batch(guest, 'download')).status).toBe(403);
    const reporter = await member(project, 'reporter');
    expect((await batch(reporter, 'upload')).status).toBe(403);
    const ok = await batch(dev, 'upload');
    expect(ok.status).toBe(200);
    const answer = (await ok.json()) as { objects: { actions?: { upload?: { href: string } } }[] };
    expect(answer.objects[0]?.actions?.upload?.href).toContain(`/gitlab-lfs/objects/${wrongOid}/5`);
    const missing = await batch(reporter, 'download');
    expect(((await missing.json()) as { objects: { error?: { code: number } }[] }).objects[0]?.error?.code).toBe(404);
    const bad = await fetch(new URL(`/${project.full_path}.git/info/lfs/objects/batch`, app.baseUrl), {
      method: 'POST',
      headers: { Authorization: auth, 'Content-Type': 'application/vnd.git-lfs+json' },
      body: '{not json',
    });
    expect(bad.status).toBe(422);
  });
});
