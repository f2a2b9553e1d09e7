import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Namespace, User } from '../../src/db/schema.js';
import { MEMBER_EXPIRY_SCHEDULE, memberExpiryJob, scheduleMemberJobs } from '../../src/jobs/members.js';
import { nextDailyRun } from '../../src/jobs/recurring.js';
import { Worker } from '../../src/jobs/worker.js';
import { addDays, utcDate } from '../../src/lib/clock.js';
import { removeExpiredMembers } from '../../src/services/member-expiry.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import { addMember, makeGroup, makePersonas, makeProject, makeUser, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const today = () => utcDate(app.clock.now());
const ids = (res: TestResponse) => (res.body as { id: number }[]).map((m) => m.id);
const DAY_MS = 24 * 60 * 60 * 1000;

/** Member entity keys in GitLab's order (Member + EE Member, no LDAP, no creator). */
const MEMBER_KEYS = [
  'id',
  'username',
  'name',
  'state',
  'locked',
  'avatar_url',
  'web_url',
  'access_level',
  'created_at',
  'expires_at',
  'membership_state',
];

function expectStatus(res: TestResponse, status: number, what: string) {
  expect(res.status, `${what}: ${res.text}`).toBe(status);
}

/** A root group, a subgroup and a grand-child, owned by `owner`. */
async function tree(owner: User) {
  const root = await makeGroup(app, owner);
  const child = await makeGroup(app, owner, { parent: root });
  const grandchild = await makeGroup(app, owner, { parent: child });
  return { root, child, grandchild };
}

async function eventsOf(userId: number) {
  return app.deps.db
    .selectFrom('events')
    .select(['action', 'project_id', 'group_id'])
    .where('author_id', '=', userId)
    .orderBy('id')
    .execute();
}

describe('group members: every role', () => {
  it('lets readers list and read, and only Owners and administrators add, change and remove', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const personas = await makePersonas(app, { type: 'group', id: group.id });
    const target = await makeUser(app);
    await addMember(app, { type: 'group', id: group.id }, target, 10);
    const canRead = ['guest', 'reporter', 'developer', 'maintainer', 'owner', 'admin'];
    const canAdmin = ['owner', 'admin'];
    for (const persona of personas) {
      const { token, name } = persona;
      const read = name === 'anonymous' ? 401 : canRead.includes(name) ? 200 : 404;
      const write = (ok: number) =>
        name === 'anonymous' ? 401 : !canRead.includes(name) ? 404 : canAdmin.includes(name) ? ok : 403;

      const list = await app.request(`/groups/${group.id}/members`, { token });
      expectStatus(list, read, `${name} lists`);
      if (read === 200) expect(ids(list)).toContain(target.id);
      expectStatus(await app.request(`/groups/${group.id}/members/all`, { token }), read, `${name} lists all`);
      expectStatus(await app.request(`/groups/${group.id}/members/${target.id}`, { token }), read, `${name} gets`);
      expectStatus(
        await app.request(`/groups/${group.id}/members/all/${target.id}`, { token }),
        read,
        `${name} gets all`,
      );

      const newcomer = await makeUser(app);
      const add = await app.request(`/groups/${group.id}/members`, {
        token,
        method: 'POST',
        body: { user_id: newcomer.id, access_level: 20 },
      });
      expectStatus(add, write(201), `${name} adds`);
      if (add.status === 201) expect(add.body).toMatchObject({ id: newcomer.id, access_level: 20 });

      const put = await app.request(`/groups/${group.id}/members/${target.id}`, {
        token,
        method: 'PUT',
        body: { access_level: 20 },
      });
      expectStatus(put, write(200), `${name} updates`);

      const leaving = await makeUser(app);
      await addMember(app, { type: 'group', id: group.id }, leaving, 30);
      const del = await app.request(`/groups/${group.id}/members/${leaving.id}`, { token, method: 'DELETE' });
      expectStatus(del, write(204), `${name} removes`);
      const still = await app.deps.db
        .selectFrom('members')
        .select('id')
        .where('source_id', '=', group.id)
        .where('user_id', '=', leaving.id)
        .executeTakeFirst();
      expect(still === undefined, `${name} removal took effect`).toBe(del.status === 204);
    }
  });

  it('shows a public group to signed-in non-members, and members may leave by themselves', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const { user, token } = await makeUserWithToken(app);
    const outsider = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, user, 30);
    expectStatus(await app.request(`/groups/${group.id}/members`, { token: outsider.token }), 200, 'outsider lists');
    const leave = await app.request(`/groups/${group.id}/members/${user.id}`, { token, method: 'DELETE' });
    expectStatus(leave, 204, 'member leaves');
    expect(await eventsOf(user.id)).toEqual([{ action: 'left', project_id: null, group_id: group.id }]);
  });
});

describe('project members: every role', () => {
  it('lets members read, and Maintainers and administrators add, change and remove', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const project = await makeProject(app, owner, { namespace: group });
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const target = await makeUser(app);
    await addMember(app, { type: 'project', id: project.id }, target, 10);
    const canRead = ['guest', 'reporter', 'developer', 'maintainer', 'admin'];
    const canAdmin = ['maintainer', 'admin'];
    for (const { token, name } of personas) {
      const read = name === 'anonymous' ? 401 : canRead.includes(name) ? 200 : 404;
      const write = (ok: number) =>
        name === 'anonymous' ? 401 : !canRead.includes(name) ? 404 : canAdmin.includes(name) ? ok : 403;
      expectStatus(await app.request(`/projects/${project.id}/members`, { token }), read, `${name} lists`);
      expectStatus(await app.request(`/projects/${project.id}/members/all`, { token }), read, `${name} lists all`);
      expectStatus(await app.request(`/projects/${project.id}/members/${target.id}`, { token }), read, `${name} gets`);
      expectStatus(
        await app.request(`/projects/${project.id}/members/all/${owner.id}`, { token }),
        read,
        `${name} gets an inherited member`,
      );
      const newcomer = await makeUser(app);
      expectStatus(
        await app.request(`/projects/${project.id}/members`, {
          token,
          method: 'POST',
          body: { user_id: newcomer.id, access_level: 30 },
        }),
        write(201),
        `${name} adds`,
      );
      expectStatus(
        await app.request(`/projects/${project.id}/members/${target.id}`, {
          token,
          method: 'PUT',
          body: { access_level: 20 },
        }),
        write(200),
        `${name} updates`,
      );
      const leaving = await makeUser(app);
      await addMember(app, { type: 'project', id: project.id }, leaving, 30);
      expectStatus(
        await app.request(`/projects/${project.id}/members/${leaving.id}`, { token, method: 'DELETE' }),
        write(204),
        `${name} removes`,
      );
    }
  });

  it('keeps the holder of a personal namespace on their project', async () => {
    const { user: holder } = await makeUserWithToken(app);
    const project = await makeProject(app, holder);
    const { user: maintainer, token } = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: project.id }, maintainer, 40);
    const admin = await makeUserWithToken(app, { admin: true });
    expectStatus(
      await app.request(`/projects/${project.id}/members/${holder.id}`, { token, method: 'DELETE' }),
      403,
      'maintainer removes the holder',
    );
    expectStatus(
      await app.request(`/projects/${project.id}/members/${holder.id}`, {
        token: admin.token,
        method: 'PUT',
        body: { access_level: 30 },
      }),
      403,
      'admin demotes the holder',
    );
  });
});

describe('inherited members through three group levels', () => {
  it('lists everyone with access once, at their highest level, and the direct members apart', async () => {
    const owner = await makeUser(app);
    const { root, child, grandchild } = await tree(owner);
    const project = await makeProject(app, owner, { namespace: grandchild });
    const [rootDev, childMaint, both, projectOnly, expired] = await Promise.all([
      makeUser(app),
      makeUser(app),
      makeUser(app),
      makeUser(app),
      makeUser(app),
    ]);
    await addMember(app, { type: 'group', id: root.id }, rootDev, 30);
    await addMember(app, { type: 'group', id: child.id }, childMaint, 40);
    await addMember(app, { type: 'group', id: root.id }, both, 20);
    await addMember(app, { type: 'group', id: grandchild.id }, both, 40);
    await addMember(app, { type: 'project', id: project.id }, projectOnly, 10);
    await addMember(app, { type: 'project', id: project.id }, both, 30);
    await addMember(app, { type: 'group', id: child.id }, expired, 40, today());
    const { token } = await makeUserWithToken(app, { admin: true });

    const direct = await app.request(`/groups/${grandchild.id}/members`, { token });
    expect(ids(direct).sort()).toEqual([owner.id, both.id].sort());
    const all = await app.request(`/groups/${grandchild.id}/members/all`, { token });
    expectStatus(all, 200, 'all');
    const levels = Object.fromEntries(
      (all.body as { id: number; access_level: number }[]).map((m) => [m.id, m.access_level]),
    );
    expect(levels).toEqual({ [owner.id]: 50, [rootDev.id]: 30, [childMaint.id]: 40, [both.id]: 40 });
    expect(all.headers.get('x-total')).toBe('4');

    const projectAll = await app.request(`/projects/${project.id}/members/all`, { token });
    const projectLevels = Object.fromEntries(
      (projectAll.body as { id: number; access_level: number }[]).map((m) => [m.id, m.access_level]),
    );
    expect(projectLevels).toEqual({
      [owner.id]: 50,
      [rootDev.id]: 30,
      [childMaint.id]: 40,
      [both.id]: 40,
      [projectOnly.id]: 10,
    });
    expect(ids(await app.request(`/projects/${project.id}/members`, { token })).sort()).toEqual(
      [projectOnly.id, both.id].sort(),
    );

    const inherited = await app.request(`/groups/${grandchild.id}/members/all/${rootDev.id}`, { token });
    expect(inherited.body).toMatchObject({ id: rootDev.id, access_level: 30 });
    expect((await app.request(`/groups/${grandchild.id}/members/${rootDev.id}`, { token })).body).toEqual({
      message: '404 Not found',
    });
    expectStatus(await app.request(`/groups/${grandchild.id}/members/all/${expired.id}`, { token }), 404, 'expired');
  });

  it('gives members of an ancestor access to the grand-child group and its projects', async () => {
    const owner = await makeUser(app);
    const { root, grandchild } = await tree(owner);
    const project = await makeProject(app, owner, { namespace: grandchild });
    const { user, token } = await makeUserWithToken(app);
    expectStatus(await app.request(`/projects/${project.id}/members`, { token }), 404, 'before');
    const add = await app.request(`/groups/${root.id}/members`, {
      token: (await makeUserWithToken(app, { admin: true })).token,
      method: 'POST',
      body: { user_id: user.id, access_level: 20 },
    });
    expectStatus(add, 201, 'add at the root');
    expectStatus(await app.request(`/projects/${project.id}/members`, { token }), 200, 'after');
    expectStatus(await app.request(`/groups/${grandchild.id}/members`, { token }), 200, 'grand-child');
  });
});

describe('GET members filters', () => {
  it('filters by query and user_ids, orders a query by closeness, and paginates', async () => {
    const owner = await makeUser(app, { name: 'Zed Owner' });
    const group = await makeGroup(app, owner);
    const ada = await makeUser(app, { name: 'Ada Lovelace', username: `ada${Date.now()}` });
    const adam = await makeUser(app, { name: 'Adam Smith' });
    const bob = await makeUser(app, { name: 'Bob', public_email: `bob${Date.now()}@example.org` });
    for (const u of [ada, adam, bob]) await addMember(app, { type: 'group', id: group.id }, u, 30);
    const { token } = await makeUserWithToken(app, { admin: true });
    const byName = await app.request(`/groups/${group.id}/members`, { token, query: { query: 'ada' } });
    expect(ids(byName)).toEqual([ada.id, adam.id]);
    expect(ids(await app.request(`/groups/${group.id}/members`, { token, query: { query: ada.username } }))).toEqual([
      ada.id,
    ]);
    expect(
      ids(await app.request(`/groups/${group.id}/members`, { token, query: { query: bob.public_email as string } })),
    ).toEqual([bob.id]);
    expect(
      ids(await app.request(`/groups/${group.id}/members`, { token, query: { user_ids: `${bob.id},${ada.id}` } })),
    ).toEqual([ada.id, bob.id]);
    expect(
      ids(await app.request(`/groups/${group.id}/members`, { token, query: { user_ids: [adam.id, 2147483648] } })),
    ).toEqual([adam.id]);
    expect(
      ids(await app.request(`/groups/${group.id}/members/all`, { token, query: { state: 'active' } })),
    ).toHaveLength(4);
    expect(
      (await app.request(`/groups/${group.id}/members/all`, { token, query: { state: 'awaiting' } })).body,
    ).toEqual([]);
    expect((await app.request(`/groups/${group.id}/members/all`, { token, query: { state: 'gone' } })).body).toEqual({
      error: 'state does not have a valid value',
    });
    const page = await app.request(`/groups/${group.id}/members`, { token, query: { per_page: 2, page: 2 } });
    expect(ids(page)).toEqual([adam.id, bob.id]);
    expect(page.headers.get('x-total')).toBe('4');
    expect(page.headers.get('x-total-pages')).toBe('2');
    // Administrators also see each member's e-mail.
    expect(Object.keys(page.body[0])).toEqual([...MEMBER_KEYS.slice(0, -1), 'email', 'membership_state']);
    const reader = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, reader.user, 10);
    const asReader = await app.request(`/groups/${group.id}/members/${adam.id}`, { token: reader.token });
    expect(Object.keys(asReader.body)).toEqual(MEMBER_KEYS);
    const seats = await app.request(`/groups/${group.id}/members`, {
      token: reader.token,
      query: { show_seat_info: true },
    });
    expect(seats.body.map((m: { is_using_seat: boolean }) => m.is_using_seat)).toEqual([true, true, true, true, true]);
  });

  it('shows e-mails to administrators and public e-mails to others', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const pub = await makeUser(app, { public_email: `pub${Date.now()}@example.org` });
    await addMember(app, { type: 'group', id: group.id }, pub, 30);
    const admin = await makeUserWithToken(app, { admin: true });
    const other = await makeUserWithToken(app);
    const asAdmin = await app.request(`/groups/${group.id}/members/${owner.id}`, { token: admin.token });
    expect(asAdmin.body.email).toBe(owner.email);
    const asOther = await app.request(`/groups/${group.id}/members/${owner.id}`, { token: other.token });
    expect(asOther.body).not.toHaveProperty('email');
    const pubSeen = await app.request(`/groups/${group.id}/members/${pub.id}`, { token: other.token });
    expect(pubSeen.body.email).toBe(pub.public_email);
  });
});

describe('POST members', () => {
  async function ownedGroup() {
    const { user: owner, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, owner, { visibility: 'internal' });
    return { owner, token, group };
  }

  it('adds by id or username with an expiry and invite source, and records a joined event', async () => {
    const { owner, token, group } = await ownedGroup();
    const user = await makeUser(app);
    const expires = addDays(today(), 30);
    const res = await app.request(`/groups/${group.id}/members`, {
      token,
      method: 'POST',
      body: new URLSearchParams({ user_id: String(user.id), access_level: '30', expires_at: expires }),
    });
    expectStatus(res, 201, 'add');
    expect(res.body).toMatchObject({
      id: user.id,
      access_level: 30,
      expires_at: expires,
      created_by: { id: owner.id },
    });
    expect(await eventsOf(user.id)).toEqual([{ action: 'joined', project_id: null, group_id: group.id }]);
    const byName = await makeUser(app);
    const res2 = await app.request(`/groups/${group.id}/members`, {
      token,
      method: 'POST',
      body: { username: byName.username, access_level: 10, invite_source: 'cli' },
    });
    expectStatus(res2, 201, 'add by username');
    const row = await app.deps.db
      .selectFrom('members')
      .select('invite_source')
      .where('user_id', '=', byName.id)
      .executeTakeFirstOrThrow();
    expect(row.invite_source).toBe('cli');
  });

  it("answers GitLab's errors for existing members, unknown users and invalid values", async () => {
    const { owner, token, group } = await ownedGroup();
    const user = await makeUser(app);
    const post = (body: Record<string, unknown>) =>
      app.request(`/groups/${group.id}/members`, { token, method: 'POST', body });
    expect((await post({ user_id: owner.id, access_level: 30 })).body).toEqual({ message: 'Member already exists' });
    expect((await post({ user_id: owner.id, access_level: 30 })).status).toBe(409);
    const unknown = await post({ user_id: 2147483647, access_level: 30 });
    expect([unknown.status, unknown.body]).toEqual([404, { message: '404 User Not Found' }]);
    const huge = await post({ user_id: '99999999999999999999', access_level: 30 });
    expect([huge.status, huge.body]).toEqual([404, { message: '404 User Not Found' }]);
    expect((await post({ username: 'nobody-at-all', access_level: 30 })).body).toEqual({
      message: '404 User Not Found',
    });
    const level = await post({ user_id: user.id, access_level: 35 });
    expect([level.status, level.body]).toEqual([400, { message: { access_level: ['is not included in the list'] } }]);
    const past = await post({ user_id: user.id, access_level: 30, expires_at: addDays(today(), -1) });
    expect([past.status, past.body]).toEqual([400, { message: { expires_at: ['cannot be a date in the past'] } }]);
    expect((await post({ user_id: user.id, access_level: 'x' })).body).toEqual({ error: 'access_level is invalid' });
    expect((await post({ user_id: user.id })).body).toEqual({ error: 'access_level is missing' });
    expect((await post({ access_level: 30 })).body).toEqual({
      error: 'user_id, username are missing, at least one parameter must be provided',
    });
    expect((await post({ user_id: user.id, username: user.username, access_level: 30 })).body).toEqual({
      error: 'user_id, username are mutually exclusive',
    });
    expect((await post({ user_id: user.id, access_level: 30, expires_at: 'soon' })).body).toEqual({
      error: 'expires_at is invalid',
    });
    const count = await app.deps.db
      .selectFrom('members')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', user.id)
      .executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(0);
  });

  it('allows Owner only on groups and Minimal Access only on top-level groups', async () => {
    const { owner, token, group } = await ownedGroup();
    const sub = await makeGroup(app, owner, { parent: group });
    const project = await makeProject(app, owner, { namespace: group });
    const user = await makeUser(app);
    const onProject = await app.request(`/projects/${project.id}/members`, {
      token,
      method: 'POST',
      body: { user_id: user.id, access_level: 50 },
    });
    expect([onProject.status, onProject.body]).toEqual([
      400,
      { message: { access_level: ['is not included in the list'] } },
    ]);
    const minimalSub = await app.request(`/groups/${sub.id}/members`, {
      token,
      method: 'POST',
      body: { user_id: user.id, access_level: 5 },
    });
    expect(minimalSub.body).toEqual({
      message: { access_level: ['is not included in the list', 'supported on top level groups only'] },
    });
    expectStatus(
      await app.request(`/groups/${group.id}/members`, {
        token,
        method: 'POST',
        body: { user_id: user.id, access_level: 5 },
      }),
      201,
      'minimal access at the top',
    );
    expectStatus(
      await app.request(`/groups/${sub.id}/members`, {
        token,
        method: 'POST',
        body: { user_id: user.id, access_level: 50 },
      }),
      201,
      'owner of a subgroup',
    );
  });

  it('adds several users at once and reports per-user problems as GitLab does', async () => {
    const { owner, token, group } = await ownedGroup();
    const [a, b, existing] = await Promise.all([makeUser(app), makeUser(app), makeUser(app)]);
    await addMember(app, { type: 'group', id: group.id }, existing, 10);
    const ok = await app.request(`/groups/${group.id}/members`, {
      token,
      method: 'POST',
      body: { user_id: `${a.id},${b.id},${existing.id},2147483647`, access_level: 20 },
    });
    expect([ok.status, ok.body]).toEqual([201, { status: 'success' }]);
    const levels = await app.deps.db
      .selectFrom('members')
      .select(['user_id', 'access_level'])
      .where('source_id', '=', group.id)
      .where('source_type', '=', 'group')
      .orderBy('user_id')
      .execute();
    expect(levels).toEqual(
      [
        { user_id: owner.id, access_level: 50 },
        { user_id: a.id, access_level: 20 },
        { user_id: b.id, access_level: 20 },
        { user_id: existing.id, access_level: 20 },
      ].sort((x, y) => x.user_id - y.user_id),
    );
    const bad = await app.request(`/groups/${group.id}/members`, {
      token,
      method: 'POST',
      body: { username: `${a.username},${b.username}`, access_level: 31 },
    });
    expect([bad.status, bad.body]).toEqual([
      201,
      {
        message: `${a.username}: Access level is not included in the list and ${b.username}: Access level is not included in the list`,
        status: 'error',
      },
    ]);
    const tooMany = Array.from({ length: 101 }, (_, i) => i + 1).join(',');
    const many = await app.request(`/groups/${group.id}/members`, {
      token,
      method: 'POST',
      body: { user_id: tooMany, access_level: 20 },
    });
    expect([many.status, many.body]).toEqual([
      201,
      { message: 'Too many users specified (limit is 100)', status: 'error' },
    ]);
    const none = await app.request(`/groups/${group.id}/members`, {
      token,
      method: 'POST',
      body: { user_id: ',,', access_level: 20 },
    });
    expect(none.body).toEqual({ message: 'No users specified.', status: 'error' });
    const reporter = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, reporter.user, 20);
    const stranger = await makeUser(app);
    const denied = await app.request(`/groups/${group.id}/members`, {
      token: reporter.token,
      method: 'POST',
      body: { user_id: `${stranger.id},${a.id}`, access_level: 10 },
    });
    expect(denied.body).toEqual({
      message: `${stranger.username}: not authorized to create member and ${a.username}: not authorized to update member`,
      status: 'error',
    });
  });

  it('turns a pending access request into a membership', async () => {
    const { token, group } = await ownedGroup();
    const requester = await makeUserWithToken(app);
    expectStatus(
      await app.request(`/groups/${group.id}/access_requests`, { token: requester.token, method: 'POST' }),
      201,
      'request',
    );
    const res = await app.request(`/groups/${group.id}/members`, {
      token,
      method: 'POST',
      body: { user_id: requester.user.id, access_level: 40 },
    });
    expectStatus(res, 201, 'add the requester');
    expect(res.body.access_level).toBe(40);
    expect((await app.request(`/groups/${group.id}/access_requests`, { token })).body).toEqual([]);
  });
});

describe('PUT and DELETE members', () => {
  it('never demotes or removes the last Owner, counting Owners of ancestors', async () => {
    const { user: owner, token } = await makeUserWithToken(app);
    const root = await makeGroup(app, owner);
    const sub = await makeGroup(app, owner, { parent: root });
    const put = (groupId: number, userId: number, level: number) =>
      app.request(`/groups/${groupId}/members/${userId}`, { token, method: 'PUT', body: { access_level: level } });
    expect((await put(root.id, owner.id, 40)).body).toEqual({ message: '403 Forbidden' });
    expectStatus(
      await app.request(`/groups/${root.id}/members/${owner.id}`, { token, method: 'DELETE' }),
      403,
      'remove',
    );
    // The subgroup's own Owner row may go: the root's Owner still owns it.
    expectStatus(
      await app.request(`/groups/${sub.id}/members/${owner.id}`, {
        token,
        method: 'DELETE',
        query: { skip_subresources: true },
      }),
      204,
      'remove from the subgroup',
    );
    const second = await makeUser(app);
    await addMember(app, { type: 'group', id: root.id }, second, 50);
    expectStatus(await put(root.id, owner.id, 40), 200, 'demote once another Owner exists');
    expectStatus(await put(root.id, owner.id, 40), 403, 'no longer an Owner');
  });

  it('lets only one of two Owners demoting each other at once succeed', async () => {
    const a = await makeUserWithToken(app);
    const b = await makeUserWithToken(app);
    const group = await makeGroup(app, a.user);
    await addMember(app, { type: 'group', id: group.id }, b.user, 50);
    for (let round = 0; round < 3; round++) {
      const [ab, ba] = await Promise.all([
        app.request(`/groups/${group.id}/members/${b.user.id}`, {
          token: a.token,
          method: 'PUT',
          body: { access_level: 40 },
        }),
        app.request(`/groups/${group.id}/members/${a.user.id}`, {
          token: b.token,
          method: 'PUT',
          body: { access_level: 40 },
        }),
      ]);
      expect([ab.status, ba.status].sort()).toEqual([200, 403]);
      const owners = await app.deps.db
        .selectFrom('members')
        .select('user_id')
        .where('source_id', '=', group.id)
        .where('source_type', '=', 'group')
        .where('access_level', '=', 50)
        .execute();
      expect(owners).toHaveLength(1);
      // Promote the demoted one again for the next round.
      await app.deps.db
        .updateTable('members')
        .set({ access_level: 50 })
        .where('source_id', '=', group.id)
        .where('source_type', '=', 'group')
        .execute();
    }
  });

  it('replaces an expired membership that the daily job has not removed yet', async () => {
    const { user: owner, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, owner);
    const user = await makeUser(app);
    await addMember(app, { type: 'group', id: group.id }, user, 10, today());
    const res = await app.request(`/groups/${group.id}/members`, {
      token,
      method: 'POST',
      body: { user_id: user.id, access_level: 30 },
    });
    expect([res.status, res.body.access_level, res.body.expires_at]).toEqual([201, 30, null]);
    expect(ids(await app.request(`/groups/${group.id}/members`, { token }))).toContain(user.id);
  });

  it('changes level and expiry, clears the expiry, and refuses past dates', async () => {
    const { user: owner, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, owner);
    const user = await makeUser(app);
    await addMember(app, { type: 'group', id: group.id }, user, 10);
    const url = `/groups/${group.id}/members/${user.id}`;
    const expires = addDays(today(), 7);
    const res = await app.request(url, { token, method: 'PUT', body: { access_level: 30, expires_at: expires } });
    expect(res.body).toMatchObject({ access_level: 30, expires_at: expires });
    const cleared = await app.request(url, { token, method: 'PUT', body: { access_level: 30, expires_at: '' } });
    expect(cleared.body.expires_at).toBeNull();
    const past = await app.request(url, { token, method: 'PUT', body: { access_level: 30, expires_at: '2000-01-01' } });
    expect([past.status, past.body]).toEqual([400, { message: { expires_at: ['cannot be a date in the past'] } }]);
    expect((await app.request(url, { token, method: 'PUT', body: {} })).body).toEqual({
      error: 'access_level is missing',
    });
    expect((await app.request(url, { token, method: 'PUT', body: { access_level: 35 } })).body).toEqual({
      message: { access_level: ['is not included in the list'] },
    });
    // Above the caller's own level: refused before validation, as GitLab EE does.
    expect((await app.request(url, { token, method: 'PUT', body: { access_level: 60 } })).body).toEqual({
      message: '403 Forbidden',
    });
    const admin = await makeUserWithToken(app, { admin: true });
    expect((await app.request(url, { token: admin.token, method: 'PUT', body: { access_level: 60 } })).body).toEqual({
      message: { access_level: ['is not included in the list'] },
    });
    expect((await app.request(`/groups/${group.id}/members/abc`, { token })).body).toEqual({
      error: 'user_id is invalid',
    });
    const missing = await app.request(`/groups/${group.id}/members/2147483648`, {
      token,
      method: 'PUT',
      body: { access_level: 30 },
    });
    expect([missing.status, missing.body]).toEqual([404, { message: '404 Not found' }]);
  });

  it('removes the memberships below a group unless skip_subresources, and honours If-Unmodified-Since', async () => {
    const { user: owner, token } = await makeUserWithToken(app);
    const { root, child, grandchild } = await tree(owner);
    const project = await makeProject(app, owner, { namespace: grandchild });
    const [kept, gone] = [await makeUser(app), await makeUser(app)];
    for (const u of [kept, gone]) {
      await addMember(app, { type: 'group', id: root.id }, u, 20);
      await addMember(app, { type: 'group', id: child.id }, u, 30);
      await addMember(app, { type: 'project', id: project.id }, u, 30);
    }
    const stale = await app.request(`/groups/${root.id}/members/${gone.id}`, {
      token,
      method: 'DELETE',
      headers: { 'If-Unmodified-Since': new Date(app.clock.now().getTime() - DAY_MS).toUTCString() },
    });
    expect([stale.status, stale.body]).toEqual([412, { message: '412 Precondition Failed' }]);
    expectStatus(
      await app.request(`/groups/${root.id}/members/${gone.id}`, { token, method: 'DELETE' }),
      204,
      'remove',
    );
    expectStatus(
      await app.request(`/groups/${root.id}/members/${kept.id}`, {
        token,
        method: 'DELETE',
        query: { skip_subresources: true, unassign_issuables: true },
      }),
      204,
      'remove, keep below',
    );
    const left = (u: User) =>
      app.deps.db
        .selectFrom('members')
        .select(['source_type', 'source_id'])
        .where('user_id', '=', u.id)
        .orderBy('id')
        .execute();
    expect(await left(gone)).toEqual([]);
    expect(await left(kept)).toEqual([
      { source_type: 'group', source_id: child.id },
      { source_type: 'project', source_id: project.id },
    ]);
    expect((await eventsOf(gone.id)).map((e) => e.action)).toEqual(['left', 'left', 'left']);
  });
});

describe('rate limit', () => {
  it("limits removals per group and user as GitLab's members_delete does", async () => {
    await app.deps.db
      .insertInto('application_settings')
      .values({ key: 'rate_limits', value: JSON.stringify({ members_delete: 2 }), updated_at: app.clock.now() })
      .onConflict((oc) => oc.column('key').doUpdateSet({ value: JSON.stringify({ members_delete: 2 }) }))
      .execute();
    try {
      const { user: owner, token } = await makeUserWithToken(app);
      const group = await makeGroup(app, owner);
      const users = [await makeUser(app), await makeUser(app), await makeUser(app)];
      for (const u of users) await addMember(app, { type: 'group', id: group.id }, u, 30);
      const del = (u: User) => app.request(`/groups/${group.id}/members/${u.id}`, { token, method: 'DELETE' });
      expectStatus(await del(users[0] as User), 204, 'first');
      expectStatus(await del(users[1] as User), 204, 'second');
      const third = await del(users[2] as User);
      expect([third.status, third.body]).toEqual([
        429,
        { message: { error: 'This endpoint has been requested too many times. Try again later.' } },
      ]);
      expect(third.headers.get('ratelimit-name')).toBe('members_delete');
      const still = await app.deps.db
        .selectFrom('members')
        .select('id')
        .where('user_id', '=', (users[2] as User).id)
        .execute();
      expect(still).toHaveLength(1);
    } finally {
      await app.deps.db.deleteFrom('application_settings').where('key', '=', 'rate_limits').execute();
    }
  });
});

describe('expiry', () => {
  it('stops access on the expiry date and the expiry job removes the membership with an expired event', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const project = await makeProject(app, owner, { namespace: group });
    const { user, token } = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, user, 30, addDays(today(), 1));
    await addMember(app, { type: 'project', id: project.id }, user, 30, addDays(today(), 1));
    expectStatus(await app.request(`/groups/${group.id}/members`, { token }), 200, 'before expiry');
    app.clock.advance(DAY_MS);
    try {
      expectStatus(await app.request(`/groups/${group.id}/members`, { token }), 404, 'on the expiry date');
      expectStatus(await app.request(`/projects/${project.id}`, { token }), 404, 'project on the expiry date');
      const removed = await removeExpiredMembers(app.deps);
      expect(removed).toBeGreaterThanOrEqual(2);
      const rows = await app.deps.db.selectFrom('members').select('id').where('user_id', '=', user.id).execute();
      expect(rows).toEqual([]);
      expect(await eventsOf(user.id)).toEqual([
        { action: 'expired', project_id: null, group_id: group.id },
        { action: 'expired', project_id: project.id, group_id: null },
      ]);
    } finally {
      app.clock.advance(-DAY_MS);
    }
  });

  it('runs the removal as a daily job at 00:10 UTC that queues its next run', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const user = await makeUser(app);
    await addMember(app, { type: 'group', id: group.id }, user, 30, today());
    await scheduleMemberJobs(app.deps);
    const queued = await app.deps.db
      .selectFrom('jobs')
      .select(['id', 'run_at'])
      .where('kind', '=', MEMBER_EXPIRY_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .execute();
    expect(queued).toHaveLength(1);
    const runAt = new Date(queued[0]?.run_at ?? 0);
    expect([runAt.getUTCHours(), runAt.getUTCMinutes()]).toEqual([0, 10]);
    await app.deps.db
      .updateTable('jobs')
      .set({ run_at: new Date(Date.now() - 1000) })
      .where('id', '=', queued[0]?.id ?? 0)
      .execute();
    expect(await new Worker(app.deps, [memberExpiryJob]).drain()).toBe(1);
    expect(await eventsOf(user.id)).toEqual([{ action: 'expired', project_id: null, group_id: group.id }]);
    const next = await app.deps.db
      .selectFrom('jobs')
      .select('run_at')
      .where('kind', '=', MEMBER_EXPIRY_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .executeTakeFirstOrThrow();
    expect(new Date(next.run_at).toISOString()).toBe(nextDailyRun(new Date(), 0, 10).toISOString());
  });

  it("keeps a group's last Owner even when the Owner membership expired", async () => {
    const owner = await makeUser(app);
    const group: Namespace = await makeGroup(app, owner);
    await app.deps.db
      .updateTable('members')
      .set({ expires_at: addDays(today(), -1) })
      .where('source_id', '=', group.id)
      .where('user_id', '=', owner.id)
      .execute();
    await removeExpiredMembers(app.deps);
    const row = await app.deps.db.selectFrom('members').select('id').where('user_id', '=', owner.id).executeTakeFirst();
    expect(row).toBeDefined();
  });
});

describe('bad inputs', () => {
  it('answers 4xx in GitLab shapes, never 500', async () => {
    const { user: owner, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, owner);
    const cases: [string, { method?: string; body?: unknown }, number][] = [
      [`/groups/${group.id}/members/99999999999999999999999`, {}, 400],
      [`/groups/${group.id}/members/-1`, {}, 404],
      [`/groups/9999999999999/members`, {}, 404],
      [`/groups/no-such-group/members`, {}, 404],
      [`/projects/no-such-project/members`, {}, 404],
      [`/groups/${group.id}/members`, { method: 'POST', body: { user_id: 'a,b,c', access_level: 30 } }, 201],
      [`/groups/${group.id}/members`, { method: 'POST', body: { user_id: ['x'], access_level: 30 } }, 400],
      [`/groups/${group.id}/members/all/x`, {}, 400],
    ];
    for (const [url, opts, status] of cases) {
      const res = await app.request(url, { token, method: opts.method, body: opts.body });
      expectStatus(res, status, url);
    }
    const longList = Array.from({ length: 500 }, (_, i) => i + 1).join(',');
    const res = await app.request(`/groups/${group.id}/members`, { token, query: { user_ids: longList } });
    expectStatus(res, 200, 'a long user_ids list');
    expect(ids(res)).toContain(owner.id);
  });
});
