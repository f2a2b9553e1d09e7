import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Namespace, Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { registerRunner, registrationToken, requestJob } from '../support/ci.js';
import { addMember, makeGroup, makeMembers, makeProject, makeUserWithToken, ROLES } from '../support/factories.js';

let app: TestApp;
let owner: User;
let ownerToken: string;
let admin: { user: User; token: string };
let group: Namespace;
let project: Project;

const client = (token?: string) => new Gitlab({ host: app.baseUrl, ...(token ? { token } : {}) });

beforeAll(async () => {
  app = await startTestApp();
  ({ user: owner, token: ownerToken } = await makeUserWithToken(app));
  admin = await makeUserWithToken(app, { admin: true });
  group = await makeGroup(app, owner, { path: 'runner-group' });
  project = await makeProject(app, owner, { path: 'runner-project', namespace: group });
});
afterAll(async () => {
  await app?.close();
});

describe('registration', () => {
  it('registers with a project, group or instance token and keeps the info; refuses a bad token', async () => {
    const gitlab = client();
    const projectRegistration = await registrationToken(app, ownerToken, `/projects/${project.id}`);
    expect(projectRegistration).toMatch(/^GR1348941/);
    const registered = await gitlab.Runners.register(projectRegistration, {
      description: 'my runner',
      tagList: ['linux', 'docker'],
      info: { name: 'gitlab-runner', version: '16.11.0', revision: 'abc', platform: 'linux', architecture: 'amd64' },
    } as never);
    expect(registered).toMatchObject({ id: expect.any(Number), token: expect.stringMatching(/^glrt-/) });

    const detail = await client(ownerToken).Runners.show(registered.id as number);
    expect(detail).toMatchObject({
      id: registered.id,
      description: 'my runner',
      active: true,
      paused: false,
      is_shared: false,
      runner_type: 'project_type',
      online: null,
      status: 'not_connected',
      tag_list: ['linux', 'docker'],
      version: '16.11.0',
      platform: 'linux',
      architecture: 'amd64',
      access_level: 'not_protected',
      maximum_timeout: null,
      contacted_at: null,
      projects: [{ id: project.id, path_with_namespace: project.full_path }],
    });
    expect(detail).not.toHaveProperty('token');

    const bad = await app.request('/runners', { method: 'POST', body: { token: 'GR1348941nope' } });
    expect(bad.status).toBe(403);
    expect(bad.body).toEqual({ message: '403 Forbidden' });
    const missing = await app.request('/runners', { method: 'POST', body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: 'token is missing' });

    const groupRunner = await registerRunner(app, await registrationToken(app, ownerToken, `/groups/${group.id}`));
    expect((await app.request(`/runners/${groupRunner.id}`, { token: ownerToken })).body.runner_type).toBe(
      'group_type',
    );
    const instanceRunner = await registerRunner(app, await registrationToken(app, admin.token, ''));
    expect((await app.request(`/runners/${instanceRunner.id}`, { token: ownerToken })).body).toMatchObject({
      runner_type: 'instance_type',
      is_shared: true,
    });
  });

  it('resets registration tokens: the old one stops working; only maintainers, owners and admins may', async () => {
    const first = await registrationToken(app, ownerToken, `/projects/${project.id}`);
    const second = await registrationToken(app, ownerToken, `/projects/${project.id}`);
    expect(second).not.toBe(first);
    expect((await app.request('/runners', { method: 'POST', body: { token: first } })).status).toBe(403);
    expect((await app.request('/runners', { method: 'POST', body: { token: second } })).status).toBe(201);

    const [developer, maintainer] = await makeMembers(app, { type: 'project', id: project.id }, [
      'developer',
      'maintainer',
    ]);
    const reset = (token: string | undefined, scope: string) =>
      app.request(`${scope}/runners/reset_registration_token`, { method: 'POST', ...(token ? { token } : {}) });
    expect((await reset(developer?.token, `/projects/${project.id}`)).status).toBe(403);
    expect((await reset(maintainer?.token, `/projects/${project.id}`)).status).toBe(201);
    expect((await reset(undefined, `/projects/${project.id}`)).status).toBe(401);
    expect((await reset(ownerToken, '')).status).toBe(403);
    expect((await reset(undefined, '')).status).toBe(401);
    expect((await reset(maintainer?.token, `/groups/${group.id}`)).status).toBe(403);
  });

  it('shows runners_token to project maintainers and group owners, and it registers runners', async () => {
    const pr = await makeProject(app, owner, { path: 'shown-token', namespace: group });
    const [developer, maintainer] = await makeMembers(app, { type: 'project', id: pr.id }, ['developer', 'maintainer']);
    const asMaintainer = await app.request(`/projects/${pr.id}`, { token: maintainer?.token });
    expect(asMaintainer.body.runners_token).toMatch(/^GR1348941/);
    const again = await app.request(`/projects/${pr.id}`, { token: ownerToken });
    expect(again.body.runners_token).toBe(asMaintainer.body.runners_token);
    expect((await app.request(`/projects/${pr.id}`, { token: developer?.token })).body).not.toHaveProperty(
      'runners_token',
    );
    const runner = await registerRunner(app, asMaintainer.body.runners_token);
    expect((await app.request(`/runners/${runner.id}`, { token: ownerToken })).body.projects[0].id).toBe(pr.id);
    const reset = await registrationToken(app, ownerToken, `/projects/${pr.id}`);
    expect((await app.request(`/projects/${pr.id}`, { token: ownerToken })).body.runners_token).toBe(reset);

    const groupView = await client(ownerToken).Groups.show(group.id);
    expect(groupView.runners_token).toMatch(/^GR1348941/);
    const groupRunner = await registerRunner(app, groupView.runners_token as string);
    expect((await app.request(`/runners/${groupRunner.id}`, { token: ownerToken })).body.runner_type).toBe(
      'group_type',
    );
    const [groupMaintainer] = await makeMembers(app, { type: 'group', id: group.id }, ['maintainer']);
    const seenByMaintainer = await app.request(`/groups/${group.id}`, { token: groupMaintainer?.token });
    expect(seenByMaintainer.status).toBe(200);
    expect(seenByMaintainer.body).not.toHaveProperty('runners_token');
  });

  it("shows the instance's registration token with the application settings", async () => {
    const settings = await app.request('/application/settings', { token: admin.token });
    expect(settings.body.runners_registration_token).toMatch(/^GR1348941/);
    const runner = await registerRunner(app, settings.body.runners_registration_token);
    expect((await app.request(`/runners/${runner.id}`, { token: admin.token })).body.runner_type).toBe('instance_type');
  });

  it('verifies and deletes by authentication token', async () => {
    const gitlab = client();
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${project.id}`));
    const ok = await app.request('/runners/verify', { method: 'POST', body: { token: runner.token } });
    expect(ok.status).toBe(200);
    expect((await app.request('/runners/verify', { method: 'POST', body: { token: 'glrt-nope' } })).status).toBe(403);
    await gitlab.Runners.remove({ token: runner.token });
    expect((await app.request('/runners/verify', { method: 'POST', body: { token: runner.token } })).status).toBe(403);
    expect((await app.request(`/runners/${runner.id}`, { token: ownerToken })).status).toBe(404);
    expect((await app.request('/runners', { method: 'DELETE', body: { token: runner.token } })).status).toBe(403);
  });
});

describe('lists, filters and status', () => {
  it('lists owned runners, all runners for admins, project and group runners with inherited ones', async () => {
    const g = await makeGroup(app, owner, { path: 'lists-group' });
    const sub = await makeGroup(app, owner, { path: 'lists-sub', parent: g });
    const pr = await makeProject(app, owner, { path: 'lists-project', namespace: sub });
    const projectRunner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${pr.id}`), {
      tag_list: 'a,b',
    });
    const groupRunner = await registerRunner(app, await registrationToken(app, ownerToken, `/groups/${g.id}`));
    const instance = await registerRunner(app, await registrationToken(app, admin.token, ''), { paused: true });

    const gitlab = client(ownerToken);
    const ids = (list: { id: number }[]) => list.map((r) => r.id);
    const owned = ids((await gitlab.Runners.all({ owned: true })) as { id: number }[]);
    expect(owned).toEqual(expect.arrayContaining([projectRunner.id, groupRunner.id]));
    expect(owned).not.toContain(instance.id);

    const inProject = ids((await gitlab.Runners.all({ projectId: pr.id })) as { id: number }[]);
    expect(inProject).toEqual(expect.arrayContaining([projectRunner.id, groupRunner.id, instance.id]));
    const inSub = ids((await gitlab.Runners.all({ groupId: sub.id })) as { id: number }[]);
    expect(inSub).toEqual(expect.arrayContaining([groupRunner.id, instance.id]));
    expect(inSub).not.toContain(projectRunner.id);

    const typed = await app.request(`/projects/${pr.id}/runners`, {
      token: ownerToken,
      query: { type: 'project_type' },
    });
    expect(ids(typed.body)).toEqual([projectRunner.id]);
    const tagged = await app.request(`/projects/${pr.id}/runners`, { token: ownerToken, query: { tag_list: 'a' } });
    expect(ids(tagged.body)).toEqual([projectRunner.id]);
    const paused = await app.request(`/projects/${pr.id}/runners`, { token: ownerToken, query: { status: 'paused' } });
    expect(ids(paused.body)).toEqual([instance.id]);
    const scoped = await app.request(`/projects/${pr.id}/runners`, { token: ownerToken, query: { scope: 'shared' } });
    expect(ids(scoped.body)).toContain(instance.id);
    expect(scoped.body.every((r: { is_shared: boolean }) => r.is_shared)).toBe(true);
    const badType = await app.request('/runners', { token: ownerToken, query: { type: 'weird' } });
    expect(badType.status).toBe(400);
    expect(badType.body).toEqual({ error: 'type does not have a valid value' });

    expect((await app.request('/runners/all', { token: ownerToken })).status).toBe(403);
    expect((await app.request('/runners/all')).status).toBe(401);
    expect((await app.request('/runners')).status).toBe(401);
    const all = ids((await client(admin.token).Runners.all()) as { id: number }[]);
    expect(all).toEqual(expect.arrayContaining([projectRunner.id, groupRunner.id, instance.id]));
    const shared = await app.request('/runners/all', { token: admin.token, query: { type: 'instance_type' } });
    expect(shared.body.every((r: { runner_type: string }) => r.runner_type === 'instance_type')).toBe(true);

    // Summary form: no detail fields.
    const [summary] = typed.body;
    expect(Object.keys(summary).sort()).toEqual(
      [
        'active',
        'description',
        'id',
        'ip_address',
        'is_shared',
        'name',
        'online',
        'paused',
        'runner_type',
        'status',
      ].sort(),
    );
    expect(summary.status).toBe('not_connected');
  });

  it('moves a runner from not_connected to online on contact, to offline after two hours, to paused', async () => {
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${project.id}`));
    const status = async () => (await app.request(`/runners/${runner.id}`, { token: ownerToken })).body;
    expect(await status()).toMatchObject({ status: 'not_connected', online: null });
    expect((await requestJob(app, runner.token)).status).toBe(204);
    const online = await status();
    expect(online).toMatchObject({ status: 'online', online: true, ip_address: expect.any(String), version: '17.0.0' });
    expect(online.contacted_at).not.toBeNull();
    app.clock.advance(2 * 60 * 60 * 1000 + 1000);
    expect(await status()).toMatchObject({ status: 'offline', online: false });
    await client(ownerToken).Runners.edit(runner.id, { paused: true } as never);
    expect(await status()).toMatchObject({ status: 'paused', active: false, paused: true });
  });
});

describe('permissions and updates', () => {
  it('follows the roles for show, update, delete and jobs of a project runner', async () => {
    const pr = await makeProject(app, owner, { path: 'perm-project' });
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${pr.id}`));
    const members = await makeMembers(app, { type: 'project', id: pr.id }, [
      'guest',
      'reporter',
      'developer',
      'maintainer',
    ]);
    const outsider = await makeUserWithToken(app);
    const expectations: [string, string | undefined, number][] = [
      ['anonymous', undefined, 401],
      ['non-member', outsider.token, 403],
      ...members.map((m): [string, string | undefined, number] => [
        m.name,
        m.token,
        m.name === 'maintainer' ? 200 : 403,
      ]),
      ['admin', admin.token, 200],
    ];
    for (const [name, token, code] of expectations) {
      const show = await app.request(`/runners/${runner.id}`, token ? { token } : {});
      expect(show.status, `${name} show`).toBe(code);
      const jobs = await app.request(`/runners/${runner.id}/jobs`, token ? { token } : {});
      expect(jobs.status, `${name} jobs`).toBe(code);
      const update = await app.request(`/runners/${runner.id}`, {
        method: 'PUT',
        body: { description: name },
        ...(token ? { token } : {}),
      });
      expect(update.status, `${name} update`).toBe(code);
    }
    const missing = await app.request('/runners/999999', { token: admin.token });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ message: '404 Runner Not Found' });

    const updated = await app.request(`/runners/${runner.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: {
        tag_list: ['x', 'y'],
        run_untagged: false,
        locked: true,
        access_level: 'ref_protected',
        maximum_timeout: 600,
      },
    });
    expect(updated.body).toMatchObject({
      tag_list: ['x', 'y'],
      run_untagged: false,
      locked: true,
      access_level: 'ref_protected',
      maximum_timeout: 600,
    });
    const bad = await app.request(`/runners/${runner.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { access_level: 'nope' },
    });
    expect(bad.status).toBe(400);
    expect((await app.request(`/runners/${runner.id}`, { token: ownerToken })).body.access_level).toBe('ref_protected');

    // Instance runners: every signed-in user sees them, only admins change them.
    const instance = await registerRunner(app, await registrationToken(app, admin.token, ''));
    expect((await app.request(`/runners/${instance.id}`, { token: outsider.token })).status).toBe(200);
    expect(
      (await app.request(`/runners/${instance.id}`, { method: 'PUT', token: ownerToken, body: { description: 'x' } }))
        .status,
    ).toBe(403);
    expect((await app.request(`/runners/${instance.id}`, { method: 'DELETE', token: ownerToken })).status).toBe(403);
    expect((await app.request(`/runners/${instance.id}`, { method: 'DELETE', token: admin.token })).status).toBe(204);

    const maintainer = members.find((m) => m.name === 'maintainer');
    expect((await app.request(`/runners/${runner.id}`, { method: 'DELETE', token: maintainer?.token })).status).toBe(
      204,
    );
    expect((await app.request(`/runners/${runner.id}`, { token: admin.token })).status).toBe(404);
  });

  it('enables a runner in another project and refuses to disable it in its only project', async () => {
    const first = await makeProject(app, owner, { path: 'enable-first' });
    const second = await makeProject(app, owner, { path: 'enable-second' });
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${first.id}`));
    const gitlab = client(ownerToken);

    const only = await app.request(`/projects/${first.id}/runners/${runner.id}`, {
      method: 'DELETE',
      token: ownerToken,
    });
    expect(only.status).toBe(403);
    expect(only.body).toEqual({
      message: '403 Forbidden - Only one project associated with the runner. Please remove the runner instead',
    });

    const enabled = await gitlab.Runners.enable(second.id, runner.id);
    expect(enabled).toMatchObject({ id: runner.id, runner_type: 'project_type' });
    const twice = await app.request(`/projects/${second.id}/runners`, {
      method: 'POST',
      token: ownerToken,
      body: { runner_id: runner.id },
    });
    expect(twice.status).toBe(400);
    const detail = await app.request(`/runners/${runner.id}`, { token: ownerToken });
    expect(detail.body.projects.map((p: { id: number }) => p.id)).toEqual([first.id, second.id]);

    // A developer of the second project may not enable or disable runners there.
    const developer = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: second.id }, developer.user, ROLES.developer);
    expect(
      (await app.request(`/projects/${second.id}/runners/${runner.id}`, { method: 'DELETE', token: developer.token }))
        .status,
    ).toBe(403);
    expect((await app.request(`/projects/${second.id}/runners`, { token: developer.token })).status).toBe(403);

    await gitlab.Runners.disable(first.id, runner.id);
    const after = await app.request(`/runners/${runner.id}`, { token: ownerToken });
    expect(after.body.projects.map((p: { id: number }) => p.id)).toEqual([second.id]);
    expect(
      (await app.request(`/projects/${first.id}/runners/${runner.id}`, { method: 'DELETE', token: ownerToken })).status,
    ).toBe(404);

    // Instance and locked runners cannot be enabled by project maintainers.
    const instance = await registerRunner(app, await registrationToken(app, admin.token, ''));
    const shared = await app.request(`/projects/${first.id}/runners`, {
      method: 'POST',
      token: ownerToken,
      body: { runner_id: instance.id },
    });
    expect(shared.status).toBe(403);
    await app.request(`/runners/${runner.id}`, { method: 'PUT', token: ownerToken, body: { locked: true } });
    const locked = await app.request(`/projects/${first.id}/runners`, {
      method: 'POST',
      token: ownerToken,
      body: { runner_id: runner.id },
    });
    expect(locked.status).toBe(403);
    expect(locked.body).toEqual({ message: '403 Forbidden - Runner is locked' });
  });
});
