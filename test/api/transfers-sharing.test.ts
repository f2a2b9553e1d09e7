import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Gitlab } from '@gitbeaker/rest';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Namespace, Project, User } from '../../src/db/schema.js';
import { Storages } from '../../src/storage/storages.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  addMember,
  makeGroup,
  makeProject,
  makeSampleProject,
  makeToken,
  makeUser,
  makeUserWithToken,
  ROLES,
  type Role,
} from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

let app: TestApp;
let scratch: string;
let counter = 0;

beforeAll(async () => {
  app = await startTestApp();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-sharing-'));
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

const client = (token: string) => new Gitlab({ host: app.baseUrl, token });

/** A new user with `role` in the group (a direct membership) and a token of theirs. */
async function groupMember(group: Namespace, role: Role) {
  const member = await makeUserWithToken(app);
  await addMember(app, { type: 'group', id: group.id }, member.user, ROLES[role]);
  return member;
}

/** What the API says the caller may do with a project: 404 hidden, 403 seen without code, 200 code. */
async function codeStatus(project: Project, token: string | undefined) {
  return (await app.request(`/projects/${project.id}/repository/tree`, { token })).status;
}

/** A commit through the API (needs Developer): its status. */
async function commitStatus(project: Project, token: string) {
  const res = await app.request(`/projects/${project.id}/repository/commits`, {
    method: 'POST',
    token,
    body: {
      branch: `topic-${++counter}`,
      start_branch: 'main',
      commit_message: 'add',
      actions: [{ action: 'create', file_path: `f${counter}.txt`, content: 'x' }],
    },
  });
  return res.status;
}

async function cloneStatus(project: Project, user: User, token: string) {
  const dir = path.join(scratch, `clone-${++counter}`);
  const url = remoteUrl(app.baseUrl, project, { login: user.username, password: token });
  return { ...(await runGitClient(['clone', '--quiet', '--bare', url, dir], scratch)), dir, url };
}

/** Pushes the clone's `main` to a new branch over HTTP: git's exit code and stderr. */
async function pushNewBranch(clone: { dir: string; url: string }) {
  return runGitClient(['push', '--quiet', clone.url, `main:refs/heads/pushed-${++counter}`], clone.dir);
}

describe('POST /projects/:id/share and DELETE /projects/:id/share/:group_id', () => {
  it('gives members of the group the lower of their level and group_access everywhere, until unshared', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const { project } = await makeSampleProject(app, owner, { visibility: 'private' });
    const team = await makeGroup(app, owner);
    const guest = await groupMember(team, 'guest');
    const developer = await groupMember(team, 'developer');
    const maintainer = await groupMember(team, 'maintainer');
    const outsider = await makeUserWithToken(app);

    // Before sharing: nobody of the team sees the project.
    expect(await codeStatus(project, developer.token)).toBe(404);

    const api = client(ownerToken);
    const link = await api.Projects.share(project.id, team.id, 20, { expiresAt: '2099-12-31' });
    expect(link).toMatchObject({
      project_id: project.id,
      group_id: team.id,
      group_access: 20,
      expires_at: '2099-12-31',
    });

    // Reporter at most: code readable, pushes refused (the maintainer too), guests see no code.
    expect(await codeStatus(project, developer.token)).toBe(200);
    expect(await codeStatus(project, maintainer.token)).toBe(200);
    expect(await codeStatus(project, guest.token)).toBe(403);
    expect(await codeStatus(project, outsider.token)).toBe(404);
    expect(await commitStatus(project, maintainer.token)).toBe(403);
    const archive = await app.request(`/projects/${project.id}/repository/archive.tar`, { token: developer.token });
    expect(archive.status).toBe(200);

    // git over HTTP: clone works, push does not.
    const clone = await cloneStatus(project, developer.user, developer.token);
    expect(clone.code, clone.stderr).toBe(0);
    expect((await pushNewBranch(clone)).code).not.toBe(0);
    const listed = await app.request('/projects', { token: developer.token, query: { membership: true } });
    expect(listed.body.map((p: { id: number }) => p.id)).toEqual([project.id]);

    // The project's responses name the group; lists filter by the shared level.
    const shown = await client(developer.token).Projects.show(project.id);
    expect(shown.shared_with_groups).toEqual([
      {
        group_id: team.id,
        group_name: team.name,
        group_full_path: team.full_path,
        group_access_level: 20,
        expires_at: '2099-12-31',
      },
    ]);
    const reporterLists = await app.request('/projects', { token: developer.token, query: { min_access_level: 20 } });
    expect(reporterLists.body.map((p: { id: number }) => p.id)).toContain(project.id);
    const developerLists = await app.request('/projects', { token: developer.token, query: { min_access_level: 30 } });
    expect(developerLists.body.map((p: { id: number }) => p.id)).not.toContain(project.id);

    // members/all lists the team at the capped levels; the direct list does not.
    const all = await app.request(`/projects/${project.id}/members/all`, {
      token: ownerToken,
      query: { per_page: 100 },
    });
    expect(
      Object.fromEntries(all.body.map((m: { id: number; access_level: number }) => [m.id, m.access_level])),
    ).toEqual({
      [owner.id]: 50,
      [guest.user.id]: 10,
      [developer.user.id]: 20,
      [maintainer.user.id]: 20,
    });
    const direct = await app.request(`/projects/${project.id}/members`, { token: ownerToken });
    expect(direct.body.map((m: { id: number }) => m.id)).toEqual([owner.id]);

    // The group lists the project among its shared projects (not with with_shared=false).
    const groupProjects = await app.request(`/groups/${team.id}/projects`, { token: developer.token });
    expect(groupProjects.body.map((p: { id: number }) => p.id)).toEqual([project.id]);
    const own = await app.request(`/groups/${team.id}/projects`, {
      token: developer.token,
      query: { with_shared: false },
    });
    expect(own.body).toEqual([]);
    const teamDetail = await app.request(`/groups/${team.id}`, { token: developer.token });
    expect(teamDetail.body.projects).toEqual([]);
    expect(teamDetail.body.shared_projects.map((p: { id: number }) => p.id)).toEqual([project.id]);

    // Unsharing takes it all back at once (cached levels included).
    await api.Projects.unshare(project.id, team.id);
    expect(await codeStatus(project, developer.token)).toBe(404);
    const again = await cloneStatus(project, developer.user, developer.token);
    expect(again.code).not.toBe(0);
    expect((await api.Projects.show(project.id)).shared_with_groups).toEqual([]);
  });

  it('lets a developer of the group push when the link gives Developer, and ends at expires_at', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const { project } = await makeSampleProject(app, owner, { visibility: 'private' });
    const team = await makeGroup(app, owner);
    const sub = await makeGroup(app, owner, { parent: team });
    const developer = await groupMember(team, 'developer');
    const tomorrow = new Date(app.clock.now().getTime() + 86_400_000).toISOString().slice(0, 10);
    // Shared with a subgroup: members of its ancestors count too.
    const res = await app.request(`/projects/${project.id}/share`, {
      method: 'POST',
      token: ownerToken,
      body: { group_id: sub.id, group_access: 40, expires_at: tomorrow },
    });
    expect(res.status, res.text).toBe(201);
    expect(await commitStatus(project, developer.token)).toBe(201);
    const level = await app.request('/projects', { token: developer.token, query: { min_access_level: 30 } });
    expect(level.body.map((p: { id: number }) => p.id)).toContain(project.id);
    expect(await commitStatus(project, developer.token)).toBe(201);

    app.clock.advance(2 * 86_400_000);
    try {
      expect(await codeStatus(project, developer.token)).toBe(404);
    } finally {
      app.clock.advance(-2 * 86_400_000);
    }
  });

  it('shows the private groups around a shared project to the invited members, and only them', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const outer = await makeGroup(app, owner);
    const inner = await makeGroup(app, owner, { parent: outer });
    const project = await makeProject(app, owner, { namespace: inner });
    const team = await makeGroup(app, owner);
    const member = await groupMember(team, 'guest');
    const sees = async (id: number) => (await app.request(`/groups/${id}`, { token: member.token })).status;
    expect([await sees(outer.id), await sees(inner.id)]).toEqual([404, 404]);
    await client(ownerToken).Projects.share(project.id, team.id, 10);
    expect([await sees(outer.id), await sees(inner.id)]).toEqual([200, 200]);
    const listed = await app.request('/groups', { token: member.token, query: { all_available: true } });
    expect(listed.body.map((g: { id: number }) => g.id).sort()).toEqual([outer.id, inner.id, team.id].sort());
    const mine = await app.request('/groups', { token: member.token });
    expect(mine.body.map((g: { id: number }) => g.id).sort()).toEqual([outer.id, inner.id, team.id].sort());
    await client(ownerToken).Projects.unshare(project.id, team.id);
    expect([await sees(outer.id), await sees(inner.id)]).toEqual([404, 404]);
  });

  it('checks every role and refuses bad input in GitLab shapes, changing nothing', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const home = await makeGroup(app, owner, { visibility: 'public' });
    const project = await makeProject(app, owner, { namespace: home, visibility: 'public' });
    const team = await makeGroup(app, owner);
    const strangers = await makeGroup(app, await makeUser(app), { visibility: 'public' });
    const admin = await makeUserWithToken(app, { admin: true });
    const share = (token: string | undefined, body: Record<string, unknown>) =>
      app.request(`/projects/${project.id}/share`, { method: 'POST', token, body });

    expect((await share(undefined, { group_id: team.id, group_access: 30 })).status).toBe(401);
    const outsider = await makeUserWithToken(app);
    expect((await share(outsider.token, { group_id: team.id, group_access: 30 })).body).toEqual({
      message: '403 Forbidden',
    });
    for (const role of ['guest', 'reporter', 'developer'] as const) {
      const member = await groupMember(home, role);
      await addMember(app, { type: 'group', id: team.id }, member.user, 30);
      const res = await share(member.token, { group_id: team.id, group_access: 30 });
      expect([role, res.status, res.body]).toEqual([role, 403, { message: '403 Forbidden' }]);
    }
    const maintainer = await groupMember(home, 'maintainer');
    await addMember(app, { type: 'group', id: team.id }, maintainer.user, 30);
    // Only Owners give Owner access.
    expect((await share(maintainer.token, { group_id: team.id, group_access: 50 })).status).toBe(403);

    expect((await share(ownerToken, { group_access: 30 })).body).toEqual({ error: 'group_id is missing' });
    expect((await share(ownerToken, { group_id: team.id })).body).toEqual({ error: 'group_access is missing' });
    expect((await share(ownerToken, { group_id: team.id, group_access: 25 })).body).toEqual({
      error: 'group_access does not have a valid value',
    });
    expect((await share(ownerToken, { group_id: team.id, group_access: 30, expires_at: 'soon' })).body).toEqual({
      error: 'expires_at is invalid',
    });
    // A group the caller is no member of, or none at all: GitLab's bare 404.
    expect((await share(ownerToken, { group_id: strangers.id, group_access: 30 })).body).toEqual({
      message: 'Not Found',
    });
    expect((await share(ownerToken, { group_id: 2 ** 31, group_access: 30 })).status).toBe(404);
    // Its own group or an ancestor: 409.
    expect((await share(ownerToken, { group_id: home.id, group_access: 30 })).body).toEqual({
      message: 'Project cannot be shared with the group it is in or one of its ancestors.',
    });
    const unchanged = await app.request(`/projects/${project.id}`, { token: ownerToken });
    expect(unchanged.body.shared_with_groups).toEqual([]);

    expect((await share(maintainer.token, { group_id: team.id, group_access: 30 })).status).toBe(201);
    expect((await share(ownerToken, { group_id: team.id, group_access: 20 })).body).toEqual({
      message: 'Project already shared with this group',
    });
    // An administrator may share with any group.
    expect((await share(admin.token, { group_id: strangers.id, group_access: 10 })).status).toBe(201);

    const unshare = (token: string | undefined, groupId: number | string) =>
      app.request(`/projects/${project.id}/share/${groupId}`, { method: 'DELETE', token });
    expect((await unshare(undefined, team.id)).status).toBe(401);
    expect((await unshare(outsider.token, team.id)).status).toBe(403);
    expect((await unshare(ownerToken, 999_999)).body).toEqual({ message: '404 Group Link Not Found' });
    expect((await unshare(ownerToken, 'abc')).body).toEqual({ error: 'group_id is invalid' });
    expect((await unshare(maintainer.token, team.id)).status).toBe(204);
    expect((await unshare(maintainer.token, team.id)).status).toBe(404);
    // An Owner-level link goes only by an Owner's hand.
    expect((await share(ownerToken, { group_id: team.id, group_access: 50 })).status).toBe(201);
    expect((await unshare(maintainer.token, team.id)).body).toEqual({ message: 'Forbidden' });
    expect((await unshare(ownerToken, team.id)).status).toBe(204);
    const left = await app.request(`/projects/${project.id}`, { token: ownerToken });
    expect(left.body.shared_with_groups.map((g: { group_id: number }) => g.group_id)).toEqual([strangers.id]);

    // A group that locks sharing refuses it for its projects.
    const locked = await app.request(`/groups/${home.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { share_with_group_lock: true },
    });
    expect(locked.status).toBe(200);
    expect((await share(ownerToken, { group_id: team.id, group_access: 30 })).body).toEqual({
      message: 'The project sharing with group is disabled',
    });
  });
});

describe('POST /groups/:id/share and DELETE /groups/:id/share/:group_id', () => {
  it('gives members of the invited group capped access to the group, its subgroups and projects', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const shared = await makeGroup(app, owner);
    const sub = await makeGroup(app, owner, { parent: shared });
    const { project } = await makeSampleProject(app, owner, { namespace: sub, visibility: 'private' });
    const teamOwner = await makeUser(app);
    const team = await makeGroup(app, teamOwner, { visibility: 'internal' });
    const maintainer = await groupMember(team, 'maintainer');
    const reporter = await groupMember(team, 'reporter');

    expect((await app.request(`/groups/${shared.id}`, { token: maintainer.token })).status).toBe(404);
    const api = client(ownerToken);
    const detail = await api.Groups.share(shared.id, team.id, 30, { expiresAt: '2099-01-01' });
    expect(detail.id).toBe(shared.id);
    expect(detail.shared_with_groups).toEqual([
      {
        group_id: team.id,
        group_name: team.name,
        group_full_path: team.full_path,
        group_access_level: 30,
        expires_at: '2099-01-01',
      },
    ]);

    // Developer at most, down the whole subtree.
    expect((await app.request(`/groups/${sub.id}`, { token: maintainer.token })).status).toBe(200);
    expect(await commitStatus(project, maintainer.token)).toBe(201);
    expect(await codeStatus(project, reporter.token)).toBe(200);
    expect(await commitStatus(project, reporter.token)).toBe(403);
    const clone = await cloneStatus(project, reporter.user, reporter.token);
    expect(clone.code, clone.stderr).toBe(0);
    expect((await pushNewBranch(clone)).code).not.toBe(0);
    const pusher = await cloneStatus(project, maintainer.user, maintainer.token);
    const pushed = await pushNewBranch(pusher);
    expect(pushed.code, pushed.stderr).toBe(0);
    const groups = await app.request('/groups', { token: maintainer.token, query: { min_access_level: 30 } });
    expect(groups.body.map((g: { id: number }) => g.id).sort()).toEqual([shared.id, sub.id, team.id].sort());
    const owned = await app.request('/groups', { token: maintainer.token, query: { min_access_level: 40 } });
    expect(owned.body.map((g: { id: number }) => g.id)).toEqual([team.id]);
    const members = await app.request(`/groups/${sub.id}/members/all`, { token: ownerToken });
    expect(
      Object.fromEntries(members.body.map((m: { id: number; access_level: number }) => [m.id, m.access_level])),
    ).toEqual({
      [owner.id]: 50,
      [teamOwner.id]: 30,
      [maintainer.user.id]: 30,
      [reporter.user.id]: 20,
    });

    await api.Groups.unshare(shared.id, team.id, {});
    expect((await app.request(`/groups/${sub.id}`, { token: maintainer.token })).status).toBe(404);
    expect(await codeStatus(project, reporter.token)).toBe(404);
  });

  it('checks every role and refuses bad input in GitLab shapes', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const shared = await makeGroup(app, owner, { visibility: 'public' });
    const team = await makeGroup(app, owner);
    const hidden = await makeGroup(app, await makeUser(app));
    const share = (token: string | undefined, body: Record<string, unknown>, id: number = shared.id) =>
      app.request(`/groups/${id}/share`, { method: 'POST', token, body });

    expect((await share(undefined, { group_id: team.id, group_access: 30 })).status).toBe(401);
    const outsider = await makeUserWithToken(app);
    // Sees the public group, not the invited private one.
    expect((await share(outsider.token, { group_id: team.id, group_access: 30 })).body).toEqual({
      message: '404 Group Not Found',
    });
    for (const role of ['guest', 'reporter', 'developer', 'maintainer'] as const) {
      const member = await groupMember(shared, role);
      await addMember(app, { type: 'group', id: team.id }, member.user, 10);
      const res = await share(member.token, { group_id: team.id, group_access: 30 });
      expect([role, res.status, res.body]).toEqual([role, 404, { message: 'Not Found' }]);
    }
    expect((await share(ownerToken, { group_id: hidden.id, group_access: 30 })).body).toEqual({
      message: '404 Group Not Found',
    });
    expect((await share(ownerToken, { group_id: team.id, group_access: 5 })).body).toEqual({
      error: 'group_access does not have a valid value',
    });
    expect((await share(ownerToken, { group_access: 30 })).body).toEqual({ error: 'group_id is missing' });
    expect((await app.request(`/groups/${shared.id}`, { token: ownerToken })).body.shared_with_groups).toEqual([]);

    expect((await share(ownerToken, { group_id: team.id, group_access: 30 })).status).toBe(201);
    expect((await share(ownerToken, { group_id: team.id, group_access: 30 })).body).toEqual({
      message: 'Shared group The group has already been shared with this group',
    });
    const admin = await makeUserWithToken(app, { admin: true });
    expect((await share(admin.token, { group_id: hidden.id, group_access: 10 })).status).toBe(201);

    const unshare = (token: string | undefined, groupId: number) =>
      app.request(`/groups/${shared.id}/share/${groupId}`, { method: 'DELETE', token });
    expect((await unshare(undefined, team.id)).status).toBe(401);
    expect((await unshare(outsider.token, team.id)).status).toBe(403);
    expect((await unshare(ownerToken, 999_999)).body).toEqual({ message: '404 Group Link Not Found' });
    expect((await unshare(ownerToken, team.id)).status).toBe(204);
    // shared_with_groups lists only the groups the caller may see.
    const after = await app.request(`/groups/${shared.id}`, { token: ownerToken });
    expect(after.body.shared_with_groups).toEqual([]);
    const asAdmin = await app.request(`/groups/${shared.id}`, { token: admin.token });
    expect(asAdmin.body.shared_with_groups.map((g: { group_id: number }) => g.group_id)).toEqual([hidden.id]);
  });
});

describe('PUT /projects/:id/transfer', () => {
  it('moves a project into a group; its repository and paths follow, its visibility fits the group', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const { project } = await makeSampleProject(app, owner, { visibility: 'public' });
    const group = await makeGroup(app, owner, { visibility: 'internal' });
    const groupDeveloper = await groupMember(group, 'developer');
    expect(await commitStatus(project, groupDeveloper.token)).toBe(403);

    const moved = await client(ownerToken).Projects.transfer(project.id, group.full_path);
    expect(moved).toMatchObject({
      id: project.id,
      path_with_namespace: `${group.full_path}/${project.path}`,
      visibility: 'internal',
      namespace: { id: group.id, kind: 'group', full_path: group.full_path },
    });
    const byNewPath = await app.request(`/projects/${encodeURIComponent(`${group.full_path}/${project.path}`)}`, {
      token: ownerToken,
    });
    expect(byNewPath.status).toBe(200);
    // The old path sends GET on to the project, as GitLab's redirect route (redirect-routes.test.ts).
    const byOldPath = await app.request(`/projects/${encodeURIComponent(project.full_path)}`, { token: ownerToken });
    expect(byOldPath.status).toBe(301);
    expect(byOldPath.headers.get('location')).toBe(`${app.baseUrl}/api/v4/projects/${project.id}`);
    // The repository did not move (hashed storage) and the group's members now reach it.
    expect(await codeStatus(project, ownerToken)).toBe(200);
    expect(await commitStatus(project, groupDeveloper.token)).toBe(201);
    const moved2 = { ...project, full_path: `${group.full_path}/${project.path}` };
    const clone = await cloneStatus(moved2, groupDeveloper.user, groupDeveloper.token);
    expect(clone.code, clone.stderr).toBe(0);

    // And back to the owner's namespace, by its path.
    const back = await app.request(`/projects/${project.id}/transfer`, {
      method: 'PUT',
      token: ownerToken,
      body: { namespace: owner.username },
    });
    expect(back.status, back.text).toBe(200);
    expect(back.body.namespace.kind).toBe('user');
    expect(back.body.path_with_namespace).toBe(`${owner.username}/${project.path}`);
  });

  it('refuses what GitLab refuses, for every role, changing nothing', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const source = await makeGroup(app, owner);
    const project = await makeProject(app, owner, { namespace: source, path: 'moving' });
    const target = await makeGroup(app, owner);
    const transfer = (token: string | undefined, namespace: unknown, id: number | string = project.id) =>
      app.request(`/projects/${id}/transfer`, { method: 'PUT', token, body: { namespace } });
    const failed = (message: string) => ({
      message: `Failed to transfer project {:new_namespace=>[${JSON.stringify(message)}]}`,
    });

    expect((await transfer(undefined, target.id)).status).toBe(401);
    const outsider = await makeUserWithToken(app);
    expect((await transfer(outsider.token, target.id)).body).toEqual({ message: '404 Project Not Found' });
    for (const role of ['guest', 'reporter', 'developer', 'maintainer'] as const) {
      const member = await groupMember(source, role);
      await addMember(app, { type: 'group', id: target.id }, member.user, 50);
      const res = await transfer(member.token, target.id);
      expect([role, res.status, res.body]).toEqual([role, 403, { message: '403 Forbidden' }]);
    }
    expect((await transfer(ownerToken, undefined)).body).toEqual({ error: 'namespace is missing' });
    expect((await transfer(ownerToken, 'no/such/group')).body).toEqual({ message: '404 Namespace Not Found' });
    const hidden = await makeGroup(app, await makeUser(app));
    expect((await transfer(ownerToken, hidden.id)).body).toEqual({ message: '404 Namespace Not Found' });
    expect((await transfer(ownerToken, outsider.user.username)).body).toEqual({ message: '404 Namespace Not Found' });
    expect((await transfer(ownerToken, source.id)).body).toEqual(failed('Project is already in this namespace.'));
    // A group where the owner is only a Reporter (projects need Developer by default).
    const elsewhere = await makeGroup(app, await makeUser(app));
    await addMember(app, { type: 'group', id: elsewhere.id }, owner, 20);
    expect((await transfer(ownerToken, elsewhere.id)).body).toEqual(
      failed("You don't have permission to transfer projects into that namespace."),
    );
    await makeProject(app, owner, { namespace: target, path: 'moving' });
    expect((await transfer(ownerToken, target.full_path)).body).toEqual(
      failed('Project with same name or path in target namespace already exists'),
    );
    const still = await app.request(`/projects/${project.id}`, { token: ownerToken });
    expect(still.body.namespace.id).toBe(source.id);

    // An administrator may move it anywhere.
    const admin = await makeUserWithToken(app, { admin: true });
    const res = await transfer(admin.token, elsewhere.full_path);
    expect(res.status, res.text).toBe(200);
    expect(res.body.path_with_namespace).toBe(`${elsewhere.full_path}/moving`);
  });
});

describe('POST /groups/:id/transfer', () => {
  it('moves a group with its subgroups and projects; access follows the new ancestors', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const from = await makeGroup(app, owner);
    const to = await makeGroup(app, owner, { visibility: 'internal' });
    const moving = await makeGroup(app, owner, { parent: from, visibility: 'private' });
    const inner = await makeGroup(app, owner, { parent: moving });
    const { project } = await makeSampleProject(app, owner, { namespace: inner, path: 'deep', visibility: 'private' });
    const oldSide = await groupMember(from, 'developer');
    const newSide = await groupMember(to, 'developer');
    expect(await codeStatus(project, oldSide.token)).toBe(200);
    expect(await codeStatus(project, newSide.token)).toBe(404);

    const res = await app.request(`/groups/${moving.id}/transfer`, {
      method: 'POST',
      token: ownerToken,
      body: { group_id: to.id },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ id: moving.id, parent_id: to.id, full_path: `${to.full_path}/${moving.path}` });
    // GitLab's GroupDetail without `with_projects`: no project lists.
    expect(res.body).not.toHaveProperty('projects');
    expect(res.body.shared_with_groups).toEqual([]);
    const innerNow = await app.request(`/groups/${inner.id}`, { token: ownerToken });
    expect(innerNow.body.full_path).toBe(`${to.full_path}/${moving.path}/${inner.path}`);
    expect(innerNow.body.full_name).toBe(`${to.name} / ${moving.name} / ${inner.name}`);
    const projectNow = await app.request(`/projects/${project.id}`, { token: ownerToken });
    expect(projectNow.body.path_with_namespace).toBe(`${to.full_path}/${moving.path}/${inner.path}/deep`);
    expect(await codeStatus(project, oldSide.token)).toBe(404);
    expect(await codeStatus(project, newSide.token)).toBe(200);

    // To the top level with gitbeaker (no group_id).
    await client(ownerToken).Groups.transfer(moving.id);
    const top = await app.request(`/groups/${moving.id}`, { token: ownerToken });
    expect(top.body).toMatchObject({ parent_id: null, full_path: moving.path });
    expect(await codeStatus(project, newSide.token)).toBe(404);
    expect(await codeStatus(project, ownerToken)).toBe(200);
  });

  it('lowers what is more visible than the new parent, and refuses what GitLab refuses', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const root = await makeGroup(app, owner, { visibility: 'public' });
    const child = await makeGroup(app, owner, { parent: root, visibility: 'public' });
    const grandchild = await makeGroup(app, owner, { parent: child, visibility: 'public' });
    const project = await makeProject(app, owner, { namespace: child, visibility: 'public' });
    const privateParent = await makeGroup(app, owner, { visibility: 'private' });
    const transfer = (token: string | undefined, id: number, groupId?: unknown) =>
      app.request(`/groups/${id}/transfer`, {
        method: 'POST',
        token,
        body: groupId === undefined ? {} : { group_id: groupId },
      });
    const failed = (reason: string) => ({ message: `Transfer failed: ${reason}` });

    expect((await transfer(undefined, child.id, privateParent.id)).status).toBe(401);
    for (const role of ['guest', 'reporter', 'developer', 'maintainer'] as const) {
      const member = await groupMember(root, role);
      const res = await transfer(member.token, child.id, privateParent.id);
      expect([role, res.status, res.body]).toEqual([role, 403, { message: '403 Forbidden' }]);
    }
    expect((await transfer(ownerToken, root.id)).body).toEqual(failed('Group is already a root group.'));
    expect((await transfer(ownerToken, child.id, root.id)).body).toEqual(
      failed('Group is already associated to the parent group.'),
    );
    expect((await transfer(ownerToken, root.id, grandchild.id)).body).toEqual(
      failed('Cannot transfer group to one of its subgroup.'),
    );
    expect((await transfer(ownerToken, child.id, 999_999)).body).toEqual({ message: '404 Group Not Found' });
    expect((await transfer(ownerToken, child.id, 'x')).body).toEqual({ error: 'group_id is invalid' });
    const foreign = await makeGroup(app, await makeUser(app), { visibility: 'public' });
    expect((await transfer(ownerToken, child.id, foreign.id)).body).toEqual(
      failed("You don't have enough permissions."),
    );
    const sameName = await makeGroup(app, owner, { visibility: 'private' });
    const namesake = await app.request('/groups', {
      method: 'POST',
      token: ownerToken,
      body: { name: child.name, path: `${child.path}-other`, parent_id: sameName.id },
    });
    expect(namesake.status, namesake.text).toBe(201);
    expect((await transfer(ownerToken, child.id, sameName.id)).body).toEqual(
      failed('Validation failed: Name has already been taken'),
    );
    await makeGroup(app, owner, { parent: privateParent, path: child.path });
    expect((await transfer(ownerToken, child.id, privateParent.id)).body).toEqual(
      failed('The parent group already has a subgroup or a project with the same path.'),
    );
    expect((await app.request(`/groups/${child.id}`, { token: ownerToken })).body.parent_id).toBe(root.id);

    const other = await makeGroup(app, owner, { visibility: 'private' });
    const res = await transfer(ownerToken, child.id, other.id);
    expect(res.status, res.text).toBe(201);
    expect(res.body.visibility).toBe('private');
    expect((await app.request(`/groups/${grandchild.id}`, { token: ownerToken })).body.visibility).toBe('private');
    expect((await app.request(`/projects/${project.id}`, { token: ownerToken })).body.visibility).toBe('private');
    expect((await app.request(`/projects/${project.id}`)).status).toBe(404);
  });
});

describe('GET /projects/:id/groups and GET /projects/:id/storage', () => {
  it('lists ancestors and, when asked, the shared groups with their filters', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const root = await makeGroup(app, owner, { visibility: 'public' });
    const sub = await makeGroup(app, owner, { parent: root, visibility: 'public' });
    const project = await makeProject(app, owner, { namespace: sub, visibility: 'public' });
    const readers = await makeGroup(app, owner, { visibility: 'public' });
    const writers = await makeGroup(app, owner, { visibility: 'private' });
    const api = client(ownerToken);
    await api.Projects.share(project.id, readers.id, 20);
    await api.Projects.share(project.id, writers.id, 30);
    const ids = (list: { id: number }[]) => list.map((g) => g.id);

    const plain = await api.Projects.allGroups(project.id);
    expect(ids(plain)).toEqual([sub.id, root.id]);
    expect(plain[0]).toEqual({
      id: sub.id,
      web_url: `${app.baseUrl}/groups/${sub.full_path}`,
      name: sub.name,
      avatar_url: null,
      full_name: `${root.name} / ${sub.name}`,
      full_path: sub.full_path,
    });
    expect(ids(await api.Projects.allGroups(project.id, { withShared: true }))).toEqual([
      writers.id,
      readers.id,
      sub.id,
      root.id,
    ]);
    expect(ids(await api.Projects.allGroups(project.id, { withShared: true, sharedMinAccessLevel: 30 }))).toEqual([
      writers.id,
      sub.id,
      root.id,
    ]);
    expect(ids(await api.Projects.allGroups(project.id, { withShared: true, skipGroups: [root.id] }))).toEqual([
      writers.id,
      readers.id,
      sub.id,
    ]);
    expect(ids(await api.Projects.allGroups(project.id, { withShared: true, search: readers.name }))).toEqual([
      readers.id,
    ]);
    // An outsider sees the public project; the private shared group only without shared_visible_only.
    const outsider = await makeUserWithToken(app);
    const visible = await app.request(`/projects/${project.id}/groups`, {
      token: outsider.token,
      query: { with_shared: true, shared_visible_only: true },
    });
    expect(ids(visible.body)).toEqual([readers.id, sub.id, root.id]);
    expect(visible.headers.get('x-total')).toBe('3');
    const anonymous = await app.request(`/projects/${project.id}/groups`);
    expect(ids(anonymous.body)).toEqual([sub.id, root.id]);
    const bad = await app.request(`/projects/${project.id}/groups`, { query: { shared_min_access_level: 7 } });
    expect(bad.body).toEqual({ error: 'shared_min_access_level does not have a valid value' });
    const hidden = await makeProject(app, owner);
    expect((await app.request(`/projects/${hidden.id}/groups`, { token: outsider.token })).status).toBe(404);
  });

  it('shows where a project is stored, to administrators only', async () => {
    const owner = await makeUser(app);
    const project = await makeProject(app, owner, { visibility: 'public' });
    const admin = await makeUserWithToken(app, { admin: true });
    const { body } = await app.request(`/projects/${project.id}/storage`, { token: admin.token });
    expect(body).toEqual({
      project_id: project.id,
      disk_path: Storages.hashedPath(project.id),
      created_at: project.created_at.toISOString(),
      repository_storage: 'default',
    });
    expect((await app.request(`/projects/${project.id}/storage`)).status).toBe(401);
    expect((await app.request(`/projects/${project.id}/storage`, { token: await makeToken(app, owner) })).body).toEqual(
      {
        message: '403 Forbidden',
      },
    );
    expect((await app.request('/projects/999999/storage', { token: admin.token })).body).toEqual({
      message: '404 Project Not Found',
    });
  });
});

describe('links and the lookups kept in process', () => {
  it('reach another server process within a second, also when written outside Depot', async () => {
    const peer = await startTestApp({ peer: app });
    const outside = new pg.Client({ connectionString: app.database.url });
    await outside.connect();
    try {
      const owner = await makeUser(app);
      const { project } = await makeSampleProject(app, owner, { visibility: 'private' });
      const team = await makeGroup(app, owner);
      const reader = await groupMember(team, 'reporter');
      const onPeer = () => peer.request(`/projects/${project.id}/repository/tree`, { token: reader.token });
      await within(onPeer, 404);
      const shared = await app.request(`/projects/${project.id}/share`, {
        method: 'POST',
        token: await makeToken(app, owner),
        body: { group_id: team.id, group_access: 20 },
      });
      expect(shared.status).toBe(201);
      await within(onPeer, 200);
      await outside.query('DELETE FROM project_group_links WHERE project_id = $1', [project.id]);
      await within(onPeer, 404);
      expect(await codeStatus(project, reader.token)).toBe(404);

      // A group link, likewise.
      const group = await makeGroup(app, owner);
      const { project: inGroup } = await makeSampleProject(app, owner, { namespace: group, visibility: 'private' });
      const probe = () => peer.request(`/projects/${inGroup.id}/repository/tree`, { token: reader.token });
      await within(probe, 404);
      await outside.query(
        `INSERT INTO group_group_links (shared_group_id, shared_with_group_id, group_access, created_at, updated_at)
         VALUES ($1, $2, 20, now(), now())`,
        [group.id, team.id],
      );
      await within(probe, 200);
      expect(await codeStatus(inGroup, reader.token)).toBe(200);
    } finally {
      await outside.end();
      await peer.close();
    }
  });
});

/** Polls `probe` until it answers `status`, for at most a second. */
async function within(probe: () => Promise<{ status: number }>, status: number, limitMs = 1_000): Promise<void> {
  const started = performance.now();
  for (;;) {
    const res = await probe();
    if (res.status === status) return;
    if (performance.now() - started > limitMs) throw new Error(`still ${res.status} (wanted ${status})`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
