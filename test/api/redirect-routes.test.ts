import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeGroup, makeToken, makeUserWithToken } from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

/**
 * A project renamed or moved keeps answering at its old path, as GitLab's redirect routes make
 * it: GET is sent on with 301 to the same URL naming the project by id, other methods get 405,
 * and git keeps working with an old remote.
 */

let app: TestApp;
let scratch: string;
let counter = 0;
beforeAll(async () => {
  app = await startTestApp();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-redirects-'));
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

const enc = encodeURIComponent;
const MOVED = { message: 'Non GET methods are not allowed for moved projects' };

/** A project with a README on main, made through the API by `token`'s user. */
async function projectWithReadme(token: string, extra: Record<string, unknown> = {}): Promise<Project> {
  const path = `moving-${++counter}`;
  const res = await app.request('/projects', {
    method: 'POST',
    token,
    body: { name: path, path, initialize_with_readme: true, ...extra },
  });
  expect(res.status).toBe(201);
  return { ...res.body, full_path: res.body.path_with_namespace } as Project;
}

async function rename(token: string, project: Project, newPath: string): Promise<string> {
  const res = await app.request(`/projects/${project.id}`, { method: 'PUT', token, body: { path: newPath } });
  expect(res.status).toBe(200);
  return res.body.path_with_namespace;
}

describe('a moved project at its old path', () => {
  it('answers GET with 301 to the same URL by id, query kept, and the new path as usual', async () => {
    const { token } = await makeUserWithToken(app);
    const project = await projectWithReadme(token);
    const newPath = await rename(token, project, `${project.path}-renamed`);

    const moved = await app.request(`/projects/${enc(project.full_path)}/repository/tree?ref=main&per_page=5`, {
      token,
    });
    expect(moved.status).toBe(301);
    const location = `${app.baseUrl}/api/v4/projects/${project.id}/repository/tree?ref=main&per_page=5`;
    expect(moved.headers.get('location')).toBe(location);
    expect(moved.text).toBe(`This resource has been moved permanently to ${location}`);
    const followed = await fetch(location, { headers: { 'PRIVATE-TOKEN': token } });
    expect(followed.status).toBe(200);
    expect(((await followed.json()) as { path: string }[]).map((e) => e.path)).toEqual(['README.md']);

    // The project itself, and a path with more segments after `:id`.
    const show = await app.request(`/projects/${enc(project.full_path)}`, { token });
    expect(show.headers.get('location')).toBe(`${app.baseUrl}/api/v4/projects/${project.id}`);
    const raw = await app.request(`/projects/${enc(project.full_path)}/repository/files/README.md/raw?ref=main`, {
      token,
    });
    expect(raw.headers.get('location')).toBe(
      `${app.baseUrl}/api/v4/projects/${project.id}/repository/files/README.md/raw?ref=main`,
    );
    // The new path and the id answer as before; a change of case only is no move.
    expect((await app.request(`/projects/${enc(newPath)}`, { token })).body.id).toBe(project.id);
    expect((await app.request(`/projects/${enc(newPath.toUpperCase())}`, { token })).status).toBe(200);
  });

  it('refuses every other method with 405 and changes nothing', async () => {
    const { token } = await makeUserWithToken(app);
    const project = await projectWithReadme(token);
    await rename(token, project, `${project.path}-next`);
    const before = await app.request(`/projects/${project.id}`, { token });
    const old = enc(project.full_path);
    const writes = [
      app.request(`/projects/${old}`, { method: 'PUT', token, body: { description: 'changed' } }),
      app.request(`/projects/${old}/repository/branches`, {
        method: 'POST',
        token,
        body: { branch: 'b', ref: 'main' },
      }),
      app.request(`/projects/${old}`, { method: 'DELETE', token }),
    ];
    for (const res of await Promise.all(writes)) {
      expect(res.status).toBe(405);
      expect(res.body).toEqual(MOVED);
    }
    const after = await app.request(`/projects/${project.id}`, { token });
    expect(after.status).toBe(200);
    expect(after.body.description).toBe(before.body.description);
    expect(after.body.description).not.toBe('changed');
    expect((await app.request(`/projects/${project.id}/repository/branches/b`, { token })).status).toBe(404);
  });

  it('reveals nothing to a caller who may not read the project', async () => {
    const { token } = await makeUserWithToken(app);
    const { token: stranger } = await makeUserWithToken(app);
    const project = await projectWithReadme(token, { visibility: 'private' });
    await rename(token, project, `${project.path}-hidden`);
    const res = await app.request(`/projects/${enc(project.full_path)}`, { token: stranger });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: '404 Project Not Found' });
    expect(res.headers.get('location')).toBeNull();
    const write = await app.request(`/projects/${enc(project.full_path)}`, {
      method: 'PUT',
      token: stranger,
      body: { description: 'x' },
    });
    expect(write.status).toBe(404);
    expect((await app.request(`/projects/${enc(project.full_path)}`)).status).toBe(404);
  });

  it('follows every move: renames, transfers, a group renamed above it, its owner renamed', async () => {
    const admin = await makeAdmin(app);
    const adminToken = await makeToken(app, admin);
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user);
    const target = await makeGroup(app, user);
    const project = await projectWithReadme(token);
    const paths = [project.full_path];
    const latest = async () => (await app.request(`/projects/${project.id}`, { token })).body.path_with_namespace;

    const transfer = async (namespace: number) => {
      const res = await app.request(`/projects/${project.id}/transfer`, { method: 'PUT', token, body: { namespace } });
      expect(res.status).toBe(200);
      return res.body.path_with_namespace as string;
    };
    paths.push(await rename(token, project, `${project.path}-a`));
    paths.push(await transfer(group.id));
    expect(
      (await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { path: `${group.path}-x` } })).status,
    ).toBe(200);
    paths.push(await latest());
    paths.push(await transfer(target.id));
    expect(new Set(paths).size).toBe(paths.length);

    // Every earlier path sends GET on to the project; the current one answers.
    const current = paths.pop() as string;
    for (const old of paths) {
      const res = await app.request(`/projects/${enc(old)}`, { token });
      expect(res.status, old).toBe(301);
      expect(res.headers.get('location')).toBe(`${app.baseUrl}/api/v4/projects/${project.id}`);
    }
    expect((await app.request(`/projects/${enc(current)}`, { token })).status).toBe(200);

    // A user's projects move with the user's rename.
    const own = await projectWithReadme(token);
    const renamed = await app.request(`/users/${user.id}`, {
      method: 'PUT',
      token: adminToken,
      body: { username: `${user.username}-renamed` },
    });
    expect(renamed.status).toBe(200);
    const res = await app.request(`/projects/${enc(own.full_path)}`, { token });
    expect(res.status).toBe(301);
    expect(res.headers.get('location')).toBe(`${app.baseUrl}/api/v4/projects/${own.id}`);
    expect((await app.request(`/projects/${enc(`${user.username}-renamed/${own.path}`)}`, { token })).body.id).toBe(
      own.id,
    );
  });

  it('answers an administrator’s storage moves the same way', async () => {
    const admin = await makeAdmin(app);
    const adminToken = await makeToken(app, admin);
    const { token } = await makeUserWithToken(app);
    const project = await projectWithReadme(token);
    await rename(token, project, `${project.path}-stored`);
    const moves = `/projects/${enc(project.full_path)}/repository_storage_moves`;
    const list = await app.request(moves, { token: adminToken });
    expect(list.status).toBe(301);
    expect(list.headers.get('location')).toBe(`${app.baseUrl}/api/v4/projects/${project.id}/repository_storage_moves`);
    const schedule = await app.request(moves, { method: 'POST', token: adminToken, body: {} });
    expect(schedule.status).toBe(405);
    expect(schedule.body).toEqual(MOVED);
    const listed = await app.request(`/projects/${project.id}/repository_storage_moves`, { token: adminToken });
    expect(listed.body).toEqual([]);
  });

  it('gives the old path up to a project or group that takes it', async () => {
    const { user, token } = await makeUserWithToken(app);
    const first = await projectWithReadme(token);
    await rename(token, first, `${first.path}-moved`);
    expect((await app.request(`/projects/${enc(first.full_path)}`, { token })).status).toBe(301);
    // A new project at the old path is that path's project now.
    const second = await app.request('/projects', {
      method: 'POST',
      token,
      body: { name: `${first.path} again`, path: first.path },
    });
    expect(second.status).toBe(201);
    const now = await app.request(`/projects/${enc(first.full_path)}`, { token });
    expect(now.status).toBe(200);
    expect(now.body.id).toBe(second.body.id);
    // It goes away and leaves no redirect to the first project behind it.
    expect((await app.request(`/projects/${second.body.id}`, { method: 'DELETE', token })).status).toBe(202);
    expect((await app.request(`/projects/${enc(first.full_path)}`, { token })).status).toBe(404);

    // A group that takes a group's old path takes the paths below it too, and only those: not
    // those of groups whose paths begin the same ('0' is the byte after '/').
    const group = await makeGroup(app, user);
    const inGroup = await projectWithReadme(token, { namespace_id: group.id });
    const neighbours = await Promise.all(
      ['0', '.b', '-c'].map((suffix) => makeGroup(app, user, { path: `${group.path}${suffix}` })),
    );
    const inNeighbours = [];
    for (const neighbour of neighbours) {
      inNeighbours.push(await projectWithReadme(token, { namespace_id: neighbour.id }));
    }
    for (const moving of [group, ...neighbours]) {
      const res = await app.request(`/groups/${moving.id}`, {
        method: 'PUT',
        token,
        body: { path: `${moving.path}-2` },
      });
      expect(res.status).toBe(200);
    }
    for (const old of [inGroup, ...inNeighbours]) {
      expect((await app.request(`/projects/${enc(old.full_path)}`, { token })).status).toBe(301);
    }
    const reused = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: group.path, path: group.path },
    });
    expect(reused.status).toBe(201);
    expect((await app.request(`/projects/${enc(inGroup.full_path)}`, { token })).status).toBe(404);
    for (const old of inNeighbours) {
      expect((await app.request(`/projects/${enc(old.full_path)}`, { token })).status, old.full_path).toBe(301);
    }
  });
});

describe('clients at a moved project’s old path', () => {
  it('@gitbeaker/rest reads through the redirect', async () => {
    const { token } = await makeUserWithToken(app);
    const project = await projectWithReadme(token);
    const newPath = await rename(token, project, `${project.path}-gb`);
    const client = new Gitlab({ host: app.baseUrl, token });
    const shown = await client.Projects.show(project.full_path);
    expect(shown.path_with_namespace).toBe(newPath);
    const file = await client.RepositoryFiles.showRaw(project.full_path, 'README.md', 'main');
    expect(String(file)).toBe(`# ${project.name}\n`);
  });

  it('a browser’s raw file link goes on to the project’s path now', async () => {
    const { token } = await makeUserWithToken(app);
    const project = await projectWithReadme(token, { visibility: 'public' });
    const newPath = await rename(token, project, `${project.path}-web`);
    const old = await fetch(`${app.baseUrl}/${project.full_path}/-/raw/main/README.md?inline=false`, {
      redirect: 'manual',
    });
    expect(old.status).toBe(301);
    expect(old.headers.get('location')).toBe(`${app.baseUrl}/${newPath}/-/raw/main/README.md?inline=false`);
    const followed = await fetch(`${app.baseUrl}/${project.full_path}/-/raw/main/README.md`);
    expect(followed.status).toBe(200);
    expect(await followed.text()).toBe(`# ${project.name}\n`);
  });

  it('git fetches and pushes with the old remote', async () => {
    const { user, token } = await makeUserWithToken(app);
    const project = await projectWithReadme(token);
    await rename(token, project, `${project.path}-git`);
    const credentials = { login: user.username, password: token };
    const work = path.join(scratch, `clone-${++counter}`);
    const clone = await runGitClient(['clone', '--quiet', remoteUrl(app.baseUrl, project, credentials), work], scratch);
    expect(clone.code, clone.stderr).toBe(0);
    expect(await fs.readFile(path.join(work, 'README.md'), 'utf8')).toBe(`# ${project.name}\n`);
    await fs.writeFile(path.join(work, 'pushed.txt'), 'through the old remote\n');
    await runGitClient(['add', 'pushed.txt'], work);
    await runGitClient(['commit', '--quiet', '-m', 'Push to the old path'], work);
    const push = await runGitClient(['push', '--quiet', 'origin', 'main'], work);
    expect(push.code, push.stderr).toBe(0);
    const pushed = await app.request(`/projects/${project.id}/repository/files/pushed.txt/raw?ref=main`, { token });
    expect(pushed.text).toBe('through the old remote\n');
  });
});
