import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Namespace, User } from '../../src/db/schema.js';
import { BILLABLE_REFRESH_SCHEDULE, billableMembersRefreshJob, scheduleMemberJobs } from '../../src/jobs/members.js';
import { nextDailyRun } from '../../src/jobs/recurring.js';
import { Worker } from '../../src/jobs/worker.js';
import { addDays, utcDate } from '../../src/lib/clock.js';
import { refreshBillableMembers } from '../../src/services/billable-members.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import {
  addMember,
  makeGroup,
  makeMembers,
  makePersonas,
  makeProject,
  makeUser,
  makeUserWithToken,
} from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const MINUTE_MS = 60_000;
const ids = (res: TestResponse) => (res.body as { id: number }[]).map((m) => m.id);
const today = () => utcDate(app.clock.now());

function expectStatus(res: TestResponse, status: number, what: string) {
  expect(res.status, `${what}: ${res.text}`).toBe(status);
}

const BILLABLE_KEYS = [
  'id',
  'username',
  'name',
  'state',
  'locked',
  'avatar_url',
  'web_url',
  'email',
  'last_activity_on',
  'membership_type',
  'removable',
  'created_at',
  'is_last_owner',
  'last_login_at',
];

/** A top-level group owned by a user with a token, with a subgroup and a project in it. */
async function hierarchy() {
  const { user: owner, token } = await makeUserWithToken(app);
  const root = await makeGroup(app, owner);
  const sub = await makeGroup(app, owner, { parent: root });
  const project = await makeProject(app, owner, { namespace: sub });
  return { owner, token, root, sub, project };
}

async function refreshNow(group: Namespace) {
  await refreshBillableMembers(app.deps, group.id);
}

describe('GET /groups/:id/billable_members', () => {
  it('answers Owners and administrators; others get a bare 400, outsiders 404', async () => {
    const owner = await makeUser(app);
    const root = await makeGroup(app, owner);
    const personas = await makePersonas(app, { type: 'group', id: root.id });
    for (const { name, token } of personas) {
      const res = await app.request(`/groups/${root.id}/billable_members`, { token });
      const expected =
        name === 'anonymous' ? 401 : name === 'non-member' ? 404 : ['owner', 'admin'].includes(name) ? 200 : 400;
      expectStatus(res, expected, name);
      if (expected === 400) expect(res.body).toEqual({ message: '400 Bad request' });
    }
    const sub = await makeGroup(app, owner, { parent: root });
    const admin = personas.find((p) => p.name === 'admin');
    const onSub = await app.request(`/groups/${sub.id}/billable_members`, { token: admin?.token });
    expect([onSub.status, onSub.body]).toEqual([400, { message: '400 Bad request' }]);
    const badSort = await app.request(`/groups/${root.id}/billable_members`, {
      token: admin?.token,
      query: { sort: 'fake_sorting' },
    });
    expect([badSort.status, badSort.body]).toEqual([400, { error: 'sort does not have a valid value' }]);
    const missing = await app.request('/groups/no-such-group/billable_members', { token: admin?.token });
    expect([missing.status, missing.body]).toEqual([404, { message: '404 Group Not Found' }]);
  });

  it('lists active human users with a membership anywhere in the hierarchy, once each', async () => {
    const { owner, token, root, sub, project } = await hierarchy();
    const [dev, projectDev, expired, blocked, bot, requester] = await Promise.all([
      makeUser(app, { public_email: `dev${Date.now()}@example.org` }),
      makeUser(app),
      makeUser(app),
      makeUser(app),
      makeUser(app),
      makeUser(app),
    ]);
    await addMember(app, { type: 'group', id: sub.id }, dev, 30);
    await addMember(app, { type: 'project', id: project.id }, dev, 40);
    await addMember(app, { type: 'project', id: project.id }, projectDev, 30);
    await addMember(app, { type: 'group', id: root.id }, expired, 30, today());
    await addMember(app, { type: 'group', id: root.id }, blocked, 30);
    await app.deps.db.updateTable('users').set({ state: 'blocked' }).where('id', '=', blocked.id).execute();
    await addMember(app, { type: 'group', id: root.id }, bot, 30);
    await app.deps.db.updateTable('users').set({ bot: true }).where('id', '=', bot.id).execute();
    await app.deps.db
      .insertInto('members')
      .values({
        source_type: 'group',
        source_id: root.id,
        user_id: requester.id,
        access_level: 30,
        requested_at: app.clock.now(),
        created_at: app.clock.now(),
        updated_at: app.clock.now(),
      })
      .execute();
    const other = await makeGroup(app, await makeUser(app));
    await addMember(app, { type: 'group', id: other.id }, projectDev, 30);

    const res = await app.request(`/groups/${root.id}/billable_members`, { token });
    expectStatus(res, 200, 'list');
    // Ordered by user id by default.
    expect(ids(res)).toEqual([owner.id, dev.id, projectDev.id].sort((a, b) => a - b));
    expect(Object.keys(res.body[0])).toEqual(BILLABLE_KEYS);
    const byId = (id: number) => (res.body as { id: number }[]).find((m) => m.id === id);
    expect(byId(owner.id)).toMatchObject({
      membership_type: 'group_member',
      is_last_owner: true,
      removable: true,
      email: null,
    });
    expect(byId(dev.id)).toMatchObject({
      membership_type: 'group_member',
      is_last_owner: false,
      email: dev.public_email,
    });
    expect(byId(projectDev.id)).toMatchObject({ membership_type: 'project_member' });
    expect(res.headers.get('x-total')).toBe('3');
    expect(res.headers.get('x-billable-members-refreshed-at')).toBe(app.clock.now().toISOString());
  });

  it('searches by name, username or public e-mail and orders by every sort GitLab accepts', async () => {
    const { owner, token, root, project } = await hierarchy();
    const tag = `q${Date.now().toString(36)}`;
    const base = app.clock.now().getTime();
    const mk = async (name: string, level: number, signIn: number | null, activity: string | null) => {
      app.clock.advance(MINUTE_MS);
      const user = await makeUser(app, { name: `${name} ${tag}` });
      await app.deps.db
        .updateTable('users')
        .set({
          current_sign_in_at: signIn === null ? null : new Date(base - signIn * MINUTE_MS),
          last_activity_on: activity,
        })
        .where('id', '=', user.id)
        .execute();
      await addMember(app, { type: 'project', id: project.id }, user, level);
      return user;
    };
    const carol = await mk('Carol', 20, 30, addDays(today(), -3));
    const alice = await mk('Alice', 40, 10, addDays(today(), -1));
    const bob = await mk('Bob', 10, null, null);
    const dave = await mk('Dave', 30, 20, addDays(today(), -1));
    await app.deps.db
      .updateTable('users')
      .set({ name: 'Owner', current_sign_in_at: null, last_activity_on: null })
      .where('id', '=', owner.id)
      .execute();
    await refreshNow(root);

    const list = async (query: Record<string, string>) => {
      const res = await app.request(`/groups/${root.id}/billable_members`, { token, query: { search: tag, ...query } });
      expectStatus(res, 200, JSON.stringify(query));
      return ids(res);
    };
    expect(await list({})).toEqual([carol.id, alice.id, bob.id, dave.id]);
    expect(await list({ search: 'ali' })).toEqual([alice.id]);
    expect(await list({ sort: 'name_asc' })).toEqual([alice.id, bob.id, carol.id, dave.id]);
    expect(await list({ sort: 'name_desc' })).toEqual([dave.id, carol.id, bob.id, alice.id]);
    expect(await list({ sort: 'access_level_asc' })).toEqual([bob.id, carol.id, dave.id, alice.id]);
    expect(await list({ sort: 'access_level_desc' })).toEqual([alice.id, dave.id, carol.id, bob.id]);
    expect(await list({ sort: 'last_joined' })).toEqual([dave.id, bob.id, alice.id, carol.id]);
    expect(await list({ sort: 'oldest_joined' })).toEqual([carol.id, alice.id, bob.id, dave.id]);
    expect(await list({ sort: 'recent_sign_in' })).toEqual([alice.id, dave.id, carol.id, bob.id]);
    expect(await list({ sort: 'oldest_sign_in' })).toEqual([carol.id, dave.id, alice.id, bob.id]);
    expect(await list({ sort: 'last_activity_on_desc' })).toEqual([alice.id, dave.id, carol.id, bob.id]);
    expect(await list({ sort: 'last_activity_on_asc' })).toEqual([bob.id, carol.id, dave.id, alice.id]);
    const page = await app.request(`/groups/${root.id}/billable_members`, {
      token,
      query: { search: tag, sort: 'last_activity_on_desc', per_page: 1, page: 2 },
    });
    expect(ids(page)).toEqual([dave.id]);
    expect(page.headers.get('x-total-pages')).toBe('4');
    const publicEmail = `${tag}@example.org`;
    await app.deps.db.updateTable('users').set({ public_email: publicEmail }).where('id', '=', bob.id).execute();
    const byEmail = await app.request(`/groups/${root.id}/billable_members`, { token, query: { search: publicEmail } });
    expect(ids(byEmail)).toEqual([bob.id]);
  });

  it('is refreshed by the daily job at 12:00 UTC, and shows when', async () => {
    const { token, root } = await hierarchy();
    const first = await app.request(`/groups/${root.id}/billable_members`, { token });
    const firstAt = first.headers.get('x-billable-members-refreshed-at');
    expect(firstAt).toBe(app.clock.now().toISOString());
    const newcomer = await makeUser(app);
    await addMember(app, { type: 'group', id: root.id }, newcomer, 30);
    app.clock.advance(MINUTE_MS);
    const stale = await app.request(`/groups/${root.id}/billable_members`, { token });
    expect(ids(stale)).not.toContain(newcomer.id);
    expect(stale.headers.get('x-billable-members-refreshed-at')).toBe(firstAt);

    await scheduleMemberJobs(app.deps);
    await scheduleMemberJobs(app.deps);
    const queued = await app.deps.db
      .selectFrom('jobs')
      .select(['id', 'run_at'])
      .where('kind', '=', BILLABLE_REFRESH_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .execute();
    expect(queued).toHaveLength(1);
    const runAt = new Date(queued[0]?.run_at ?? 0);
    expect([runAt.getUTCHours(), runAt.getUTCMinutes(), runAt.getUTCSeconds()]).toEqual([12, 0, 0]);
    expect(runAt.getTime() - Date.now()).toBeLessThanOrEqual(24 * 60 * MINUTE_MS);

    // Let the day pass: the job is due; a worker runs it and queues the next day's run.
    await app.deps.db
      .updateTable('jobs')
      .set({ run_at: new Date(Date.now() - 1000) })
      .where('id', '=', queued[0]?.id ?? 0)
      .execute();
    const worker = new Worker(app.deps, [billableMembersRefreshJob]);
    expect(await worker.drain()).toBe(1);
    const fresh = await app.request(`/groups/${root.id}/billable_members`, { token });
    expect(ids(fresh)).toContain(newcomer.id);
    expect(fresh.headers.get('x-billable-members-refreshed-at')).toBe(app.clock.now().toISOString());
    const next = await app.deps.db
      .selectFrom('jobs')
      .select('run_at')
      .where('kind', '=', BILLABLE_REFRESH_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .executeTakeFirstOrThrow();
    expect(new Date(next.run_at).toISOString()).toBe(nextDailyRun(new Date(), 12, 0).toISOString());
  });

  it('computes the next daily run in UTC', () => {
    expect(nextDailyRun(new Date('2026-03-01T11:59:59.000Z'), 12, 0).toISOString()).toBe('2026-03-01T12:00:00.000Z');
    expect(nextDailyRun(new Date('2026-03-01T12:00:00.000Z'), 12, 0).toISOString()).toBe('2026-03-02T12:00:00.000Z');
    expect(nextDailyRun(new Date('2026-12-31T23:00:00.000Z'), 0, 10).toISOString()).toBe('2027-01-01T00:10:00.000Z');
  });
});

describe('GET /groups/:id/billable_members/:user_id/memberships', () => {
  it("lists a billable user's direct memberships within the hierarchy, for Owners", async () => {
    const { token, root, sub, project } = await hierarchy();
    const dev = await makeUser(app);
    await addMember(app, { type: 'group', id: root.id }, dev, 30);
    app.clock.advance(MINUTE_MS);
    await addMember(app, { type: 'group', id: sub.id }, dev, 40, addDays(today(), 9));
    await addMember(app, { type: 'project', id: project.id }, dev, 20);
    const elsewhere = await makeGroup(app, await makeUser(app));
    await addMember(app, { type: 'group', id: elsewhere.id }, dev, 30);
    const url = `/groups/${root.id}/billable_members/${dev.id}/memberships`;
    const res = await app.request(url, { token });
    expectStatus(res, 200, 'memberships');
    const rootRow = await app.deps.db
      .selectFrom('members')
      .selectAll()
      .where('user_id', '=', dev.id)
      .where('source_id', '=', root.id)
      .where('source_type', '=', 'group')
      .executeTakeFirstOrThrow();
    expect(res.body[0]).toEqual({
      id: rootRow.id,
      source_id: root.id,
      source_full_name: root.name,
      source_members_url: `${app.baseUrl}/groups/${root.full_path}/-/group_members`,
      created_at: rootRow.created_at.toISOString(),
      expires_at: null,
      access_level: { string_value: 'Developer', integer_value: 30, custom_role: null },
    });
    expect(res.body.map((m: { source_full_name: string }) => m.source_full_name)).toEqual([
      root.name,
      `${root.name} / ${sub.name}`,
      `${root.name} / ${sub.name} / ${project.name}`,
    ]);
    expect(res.body[1]).toMatchObject({
      expires_at: addDays(today(), 9),
      access_level: { string_value: 'Maintainer' },
    });
    expect(res.body[2].source_members_url).toBe(`${app.baseUrl}/${project.full_path}/-/project_members`);
    const page = await app.request(url, { token, query: { per_page: 1, page: 2 } });
    expect(page.body.map((m: { source_id: number }) => m.source_id)).toEqual([sub.id]);
  });

  it("answers GitLab's errors", async () => {
    const { token, root, sub } = await hierarchy();
    const dev = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: root.id }, dev.user, 30);
    const stranger = await makeUser(app);
    const unknown = await app.request(`/groups/${root.id}/billable_members/2147483647/memberships`, { token });
    expect([unknown.status, unknown.body]).toEqual([404, { message: '404 Not found' }]);
    const notBillable = await app.request(`/groups/${root.id}/billable_members/${stranger.id}/memberships`, { token });
    expect([notBillable.status, notBillable.body]).toEqual([404, { message: '404 User Not Found' }]);
    const asDev = await app.request(`/groups/${root.id}/billable_members/${dev.user.id}/memberships`, {
      token: dev.token,
    });
    expect([asDev.status, asDev.body]).toEqual([400, { message: '400 Bad request' }]);
    for (const below of await makeMembers(app, { type: 'group', id: root.id }, ['guest', 'reporter', 'maintainer'])) {
      const res = await app.request(`/groups/${root.id}/billable_members/${dev.user.id}/memberships`, {
        token: below.token,
      });
      expect([below.name, res.status, res.body]).toEqual([below.name, 400, { message: '400 Bad request' }]);
    }
    const anonymous = await app.request(`/groups/${root.id}/billable_members/${dev.user.id}/memberships`);
    expect(anonymous.status).toBe(401);
    const onSub = await app.request(`/groups/${sub.id}/billable_members/${dev.user.id}/memberships`, { token });
    expect([onSub.status, onSub.body]).toEqual([400, { message: '400 Bad request' }]);
    const malformed = await app.request(`/groups/${root.id}/billable_members/me/memberships`, { token });
    expect(malformed.body).toEqual({ error: 'user_id is invalid' });
  });
});

describe('DELETE /groups/:id/billable_members/:user_id', () => {
  async function membershipsOf(user: User) {
    return app.deps.db
      .selectFrom('members')
      .select(['source_type', 'source_id'])
      .where('user_id', '=', user.id)
      .execute();
  }

  it('removes the user from the group, its subgroups and projects at once, and from the list', async () => {
    const { token, root, sub, project } = await hierarchy();
    const [dev, projectOnly] = [await makeUser(app), await makeUser(app)];
    await addMember(app, { type: 'group', id: root.id }, dev, 30);
    await addMember(app, { type: 'group', id: sub.id }, dev, 40);
    await addMember(app, { type: 'project', id: project.id }, dev, 30);
    await addMember(app, { type: 'project', id: project.id }, projectOnly, 30);
    const elsewhere = await makeGroup(app, await makeUser(app));
    await addMember(app, { type: 'group', id: elsewhere.id }, dev, 10);
    await refreshNow(root);
    expect(ids(await app.request(`/groups/${root.id}/billable_members`, { token }))).toContain(dev.id);

    const res = await app.request(`/groups/${root.id}/billable_members/${dev.id}`, { token, method: 'DELETE' });
    expect([res.status, res.text]).toEqual([204, '']);
    expect(await membershipsOf(dev)).toEqual([{ source_type: 'group', source_id: elsewhere.id }]);
    expect(ids(await app.request(`/groups/${root.id}/billable_members`, { token }))).not.toContain(dev.id);
    const events = await app.deps.db.selectFrom('events').select('action').where('author_id', '=', dev.id).execute();
    expect(events.map((e) => e.action)).toEqual(['left', 'left', 'left']);

    expectStatus(
      await app.request(`/groups/${root.id}/billable_members/${projectOnly.id}`, { token, method: 'DELETE' }),
      204,
      'a user who is only a project member',
    );
    expect(await membershipsOf(projectOnly)).toEqual([]);
  });

  it("answers GitLab's errors and never removes the last Owner", async () => {
    const { owner, token, root, sub } = await hierarchy();
    const maintainer = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: root.id }, maintainer.user, 40);
    const del = (groupId: number, userId: number, t = token) =>
      app.request(`/groups/${groupId}/billable_members/${userId}`, { token: t, method: 'DELETE' });
    expect((await del(root.id, owner.id, maintainer.token)).body).toEqual({
      message: '400 Bad request - User not authorized',
    });
    for (const below of await makeMembers(app, { type: 'group', id: root.id }, ['guest', 'reporter', 'developer'])) {
      const res = await del(root.id, maintainer.user.id, below.token);
      expect([below.name, res.status, res.body]).toEqual([
        below.name,
        400,
        { message: '400 Bad request - User not authorized' },
      ]);
    }
    const anonymous = await app.request(`/groups/${root.id}/billable_members/${maintainer.user.id}`, {
      method: 'DELETE',
    });
    expect(anonymous.status).toBe(401);
    expect(await membershipsOf(maintainer.user)).toHaveLength(1);
    expect((await del(sub.id, maintainer.user.id)).body).toEqual({
      message: '400 Bad request - Must be a root namespace',
    });
    const stranger = await makeUser(app);
    expect((await del(root.id, stranger.id)).body).toEqual({
      message: '400 Bad request - No member found for the given user_id',
    });
    expect((await del(root.id, 2147483648)).body).toEqual({
      message: '400 Bad request - No member found for the given user_id',
    });
    const last = await del(root.id, owner.id);
    expect([last.status, last.body]).toEqual([403, { message: '403 Forbidden' }]);
    expect(await membershipsOf(owner)).toHaveLength(2);
    expectStatus(await del(root.id, maintainer.user.id), 204, 'owner removes the maintainer');
  });
});
