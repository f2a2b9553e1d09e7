import fs from 'node:fs/promises';
import { Gitlab } from '@gitbeaker/rest';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import { addDays, utcDate } from '../../src/lib/clock.js';
import { deleteUserNow } from '../../src/services/user-lifecycle.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import {
  addMember,
  makeAdmin,
  makeGroup,
  makePersonas,
  makeProject,
  makeToken,
  makeUser,
  makeUserWithToken,
} from '../support/factories.js';
import { oauthPost, registerApp } from '../support/oauth.js';
import { WebClient } from '../support/web-client.js';

let app: TestApp;
let admin: User;
let adminToken: string;

beforeAll(async () => {
  app = await startTestApp();
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
});
afterAll(async () => {
  await app?.close();
});

const api = (token = adminToken) => new Gitlab({ host: app.baseUrl, token });

function expectStatus(res: TestResponse, status: number, what: string) {
  expect(res.status, `${what}: ${res.text}`).toBe(status);
}

/** A POST as the administrator, or with `token` (`null` for an anonymous caller). */
const post = (path: string, token?: string | null) =>
  app.request(path, { method: 'POST', token: token === undefined ? adminToken : (token ?? undefined) });

async function stateOf(id: number): Promise<string | undefined> {
  const row = await app.deps.db.selectFrom('users').select('state').where('id', '=', id).executeTakeFirst();
  return row?.state;
}

/** Makes a user look dormant (last active long ago), so that they may be deactivated. */
async function makeDormant(id: number): Promise<void> {
  await app.deps.db
    .updateTable('users')
    .set({ last_activity_on: addDays(utcDate(app.clock.now()), -200), current_sign_in_at: null })
    .where('id', '=', id)
    .execute();
}

/** Statuses and GitLab's message for a request made with a token whose user may not use the API. */
const BLOCKED = '403 Forbidden - Your account has been blocked.';
const deactivatedMessage = () =>
  '403 Forbidden - Your account has been deactivated by your administrator. ' +
  `Please log back in from a web browser to reactivate your account at ${app.baseUrl}`;

const drain = () => new Worker(app.deps, JOB_KINDS).drain();

describe('state changes: who may', () => {
  it('answers 401 to anonymous callers, 403 to every non-administrator role, and changes nothing', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const personas = await makePersonas(app, { type: 'group', id: group.id });
    const target = await makeUser(app);
    await makeDormant(target.id);
    for (const persona of personas) {
      if (persona.name === 'admin') continue;
      for (const action of ['block', 'unblock', 'deactivate', 'activate', 'ban', 'unban']) {
        const res = await post(`/users/${target.id}/${action}`, persona.token ?? null);
        expectStatus(res, persona.name === 'anonymous' ? 401 : 403, `${persona.name} ${action}`);
        if (persona.name !== 'anonymous') expect(res.body).toEqual({ message: '403 Forbidden' });
      }
      const approve = await post(`/users/${target.id}/approve`, persona.token ?? null);
      expectStatus(approve, persona.name === 'anonymous' ? 401 : 403, `${persona.name} approve`);
      if (persona.name !== 'anonymous')
        expect(approve.body).toEqual({ message: 'You are not allowed to approve a user' });
      const reject = await post(`/users/${target.id}/reject`, persona.token ?? null);
      if (persona.name !== 'anonymous')
        expect(reject.body).toEqual({ message: 'You are not allowed to reject a user' });
      const remove = await app.request(`/users/${target.id}`, { method: 'DELETE', token: persona.token });
      expectStatus(remove, persona.name === 'anonymous' ? 401 : 403, `${persona.name} delete`);
    }
    expect(await stateOf(target.id)).toBe('active');
    expectStatus(await app.request(`/users/${target.id}`, { token: adminToken }), 200, 'still there');
    // The administrator of the same list may.
    const adminPersona = personas.find((p) => p.name === 'admin');
    expect((await post(`/users/${target.id}/block`, adminPersona?.token)).body).toBe(true);
  });

  it('answers 404 for unknown users and for ids that are not numbers, in GitLab shapes', async () => {
    for (const action of ['block', 'unblock', 'deactivate', 'activate', 'ban', 'unban', 'approve', 'reject']) {
      const missing = await post(`/users/999999/${action}`);
      expectStatus(missing, 404, action);
      expect(missing.body).toEqual({ message: '404 User Not Found' });
      const word = await post(`/users/ASDF/${action}`);
      expectStatus(word, 404, `${action} ASDF`);
      expect(word.body).toEqual({ error: '404 Not Found' });
    }
    const target = await makeUser(app);
    const badFlag = await app.request(`/users/${target.id}`, {
      method: 'DELETE',
      token: adminToken,
      query: { hard_delete: 'maybe' },
    });
    expectStatus(badFlag, 400, 'bad hard_delete');
    expect(badFlag.body).toEqual({ error: 'hard_delete is invalid' });
    expect(await stateOf(target.id)).toBe('active');
    const missing = await app.request('/users/999999', { method: 'DELETE', token: adminToken });
    expect(missing.body).toEqual({ message: '404 User Not Found' });
    expect((await app.request('/users/99999999999', { method: 'DELETE', token: adminToken })).status).toBe(404);
  });
});

describe('block and unblock', () => {
  it('refuses a blocked user’s personal access and OAuth tokens at once, in this process and another', async () => {
    const password = 'block-me-password-1';
    const { user, token } = await makeUserWithToken(app, { password });
    const client = await registerApp(app, adminToken);
    const grant = await oauthPost(
      app,
      '/oauth/token',
      { grant_type: 'password', username: user.username, password },
      { basic: [client.clientId, client.secret] },
    );
    expect(grant.status).toBe(200);
    const bearer = { Authorization: `Bearer ${grant.body.access_token}` };
    const peer = await startTestApp({ peer: app });
    try {
      // Both processes have the user cached now.
      expectStatus(await app.request('/user', { token }), 200, 'before');
      expectStatus(await peer.request('/user', { token }), 200, 'peer before');
      expectStatus(await peer.request('/user', { headers: bearer }), 200, 'peer oauth before');

      await expect(api().Users.block(user.id)).resolves.toBe(true);
      expect(await stateOf(user.id)).toBe('blocked');
      const refused = await app.request('/user', { token });
      expectStatus(refused, 403, 'blocked token');
      expect(refused.body).toEqual({ message: BLOCKED });
      expect((await app.request('/user', { headers: bearer })).body).toEqual({ message: BLOCKED });
      // The other process hears of the change through the row-change notice.
      let peerStatus = 0;
      for (let i = 0; i < 100 && peerStatus !== 403; i++) {
        peerStatus = (await peer.request('/user', { token })).status;
        if (peerStatus !== 403) await new Promise((r) => setTimeout(r, 20));
      }
      expect(peerStatus).toBe(403);
      expect((await peer.request('/user', { headers: bearer })).body).toEqual({ message: BLOCKED });
      // Blocked users cannot sign in on the web either.
      const browser = new WebClient(app);
      expect((await browser.signIn(user.username, password)).status).not.toBe(303);

      // Blocking again changes nothing: GitLab's endpoint stops early and answers null.
      const again = await post(`/users/${user.id}/block`);
      expectStatus(again, 201, 'block again');
      expect(again.text).toBe('null');
      expect(again.headers.get('content-type')).toBe('application/json');

      await expect(api().Users.unblock(user.id)).resolves.toBe(true);
      expect(await stateOf(user.id)).toBe('active');
      expectStatus(await app.request('/user', { token }), 200, 'unblocked');
      // Unblocking an active user: GitLab's `activate` event does not apply, and the answer is false.
      const active = await post(`/users/${user.id}/unblock`);
      expectStatus(active, 201, 'unblock active');
      expect(active.text).toBe('false');
    } finally {
      await peer.close();
    }
  });

  it('refuses to block oneself and to unblock a deactivated user', async () => {
    const self = await post(`/users/${admin.id}/block`);
    expectStatus(self, 403, 'self');
    expect(self.body).toEqual({ message: '403 Forbidden - The API initiating user cannot be blocked by the API' });
    expect(await stateOf(admin.id)).toBe('active');

    const user = await makeUser(app);
    await makeDormant(user.id);
    await expect(api().Users.deactivate(user.id)).resolves.toBe(true);
    const unblock = await post(`/users/${user.id}/unblock`);
    expectStatus(unblock, 403, 'unblock deactivated');
    expect(unblock.body).toEqual({ message: '403 Forbidden - Deactivated users cannot be unblocked by the API' });
    expect(await stateOf(user.id)).toBe('deactivated');
    // A deactivated user may be blocked, and then unblocked to active.
    expect((await post(`/users/${user.id}/block`)).body).toBe(true);
    expect(await stateOf(user.id)).toBe('blocked');
    expect((await post(`/users/${user.id}/unblock`)).body).toBe(true);
    expect(await stateOf(user.id)).toBe('active');
  });
});

describe('deactivate and activate', () => {
  it('refuses recently active users with the instance’s dormant period in the message', async () => {
    const { user, token } = await makeUserWithToken(app);
    expectStatus(await app.request('/user', { token }), 200, 'active today');
    const res = await post(`/users/${user.id}/deactivate`);
    expectStatus(res, 403, 'recent');
    expect(res.body).toEqual({
      message: 'The user you are trying to deactivate has been active in the past 90 days and cannot be deactivated',
    });
    expect(await stateOf(user.id)).toBe('active');
  });

  it('gives a deactivated user GitLab’s 403 on the API, and signing in on the web makes them active', async () => {
    const password = 'deactivated-password-1';
    const { user, token } = await makeUserWithToken(app, { password });
    await makeDormant(user.id);
    await expect(api().Users.deactivate(user.id)).resolves.toBe(true);
    expect(await stateOf(user.id)).toBe('deactivated');
    const refused = await app.request('/user', { token });
    expectStatus(refused, 403, 'deactivated token');
    expect(refused.body).toEqual({ message: deactivatedMessage() });
    // Deactivating again: an empty 201.
    const again = await post(`/users/${user.id}/deactivate`);
    expectStatus(again, 201, 'again');
    expect(again.text).toBe('null');

    const browser = new WebClient(app);
    expect((await browser.signIn(user.username, password)).status).toBe(303);
    expect(await stateOf(user.id)).toBe('active');
    expectStatus(await app.request('/user', { token }), 200, 'after sign-in');
  });

  it('activates a deactivated user, and refuses blocked ones either way', async () => {
    const { user, token } = await makeUserWithToken(app);
    await makeDormant(user.id);
    await api().Users.deactivate(user.id);
    const activated = await post(`/users/${user.id}/activate`);
    expectStatus(activated, 201, 'activate');
    expect(activated.body).toBe(true);
    expectStatus(await app.request('/user', { token }), 200, 'active again');
    // Activating an active user succeeds and changes nothing.
    expect((await post(`/users/${user.id}/activate`)).body).toBe(true);

    await api().Users.block(user.id);
    const activateBlocked = await post(`/users/${user.id}/activate`);
    expectStatus(activateBlocked, 403, 'activate blocked');
    expect(activateBlocked.body).toEqual({
      message: 'Error occurred. A blocked user must be unblocked to be activated',
    });
    const deactivateBlocked = await post(`/users/${user.id}/deactivate`);
    expectStatus(deactivateBlocked, 403, 'deactivate blocked');
    expect(deactivateBlocked.body).toEqual({ message: 'Error occurred. A blocked user cannot be deactivated' });
    expect(await stateOf(user.id)).toBe('blocked');
  });
});

describe('ban and unban', () => {
  it('bans only active users, refuses their tokens as blocked, and unbans only banned ones', async () => {
    const { user, token } = await makeUserWithToken(app);
    const unbanActive = await post(`/users/${user.id}/unban`);
    expectStatus(unbanActive, 403, 'unban active');
    expect(unbanActive.body).toEqual({ message: 'You cannot unban active users.' });

    await expect(api().Users.ban(user.id)).resolves.toBe(true);
    expect(await stateOf(user.id)).toBe('banned');
    expect((await app.request(`/users/${user.id}`, { token: adminToken })).body.state).toBe('banned');
    const refused = await app.request('/user', { token });
    expectStatus(refused, 403, 'banned token');
    expect(refused.body).toEqual({ message: BLOCKED });

    // Git over HTTP tells them too.
    const project = await makeProject(app, user);
    const basic = Buffer.from(`${user.username}:${token}`).toString('base64');
    const git = await fetch(`${app.baseUrl}/${project.full_path}.git/info/refs?service=git-upload-pack`, {
      headers: { Authorization: `Basic ${basic}` },
    });
    expect(git.status).toBe(403);
    expect(await git.text()).toContain('Your account has been blocked.');

    // Other users no longer list a banned user; administrators do.
    const { token: someone } = await makeUserWithToken(app);
    const byName = (t: string) => app.request('/users', { token: t, query: { username: user.username } });
    expect((await byName(someone)).body).toEqual([]);
    expect(((await byName(adminToken)).body as { id: number }[]).map((u) => u.id)).toEqual([user.id]);

    const banAgain = await post(`/users/${user.id}/ban`);
    expectStatus(banAgain, 403, 'ban banned');
    expect(banAgain.body).toEqual({ message: 'You cannot ban banned users.' });
    // A banned user counts as blocked: block stops early, deactivate and activate refuse.
    expect((await post(`/users/${user.id}/block`)).text).toBe('null');
    expect((await post(`/users/${user.id}/deactivate`)).status).toBe(403);
    expect(await stateOf(user.id)).toBe('banned');

    await expect(api().Users.unban(user.id)).resolves.toBe(true);
    expectStatus(await app.request('/user', { token }), 200, 'unbanned');

    await api().Users.block(user.id);
    const banBlocked = await post(`/users/${user.id}/ban`);
    expect(banBlocked.body).toEqual({ message: 'You cannot ban blocked users.' });
    expect(await stateOf(user.id)).toBe('blocked');
  });
});

describe('approve and reject', () => {
  it('approves and rejects only users pending approval', async () => {
    const pending = await makeUser(app, { state: 'blocked_pending_approval' });
    const approved = await api().Users.approve(pending.id);
    expect(approved).toEqual({ message: 'Success' });
    expect(await stateOf(pending.id)).toBe('active');
    const again = await post(`/users/${pending.id}/approve`);
    expectStatus(again, 409, 'approve active');
    expect(again.body).toEqual({ message: 'The user you are trying to approve is not pending approval' });

    const rejectActive = await post(`/users/${pending.id}/reject`);
    expectStatus(rejectActive, 409, 'reject active');
    expect(rejectActive.body).toEqual({ message: 'User does not have a pending request' });
    expect(await stateOf(pending.id)).toBe('active');

    const other = await makeUser(app, { state: 'blocked_pending_approval' });
    const rejected = await post(`/users/${other.id}/reject`);
    expectStatus(rejected, 200, 'reject');
    expect(rejected.body).toEqual({ message: 'Success' });
    expectStatus(await app.request(`/users/${other.id}`, { token: adminToken }), 404, 'rejected is gone');
    await drain();
    expect(await stateOf(other.id)).toBeUndefined();
  });
});

describe('DELETE /users/:id', () => {
  it('answers 204, hides the user at once, and the job removes projects, memberships and events', async () => {
    const { user, token } = await makeUserWithToken(app);
    const project = await makeProject(app, user);
    const gitDir = app.deps.storages.repositoryPath(project.repository_storage, project.id);
    await fs.access(gitDir);
    const groupOwner = await makeUser(app);
    const group = await makeGroup(app, groupOwner);
    await addMember(app, { type: 'group', id: group.id }, user, 30);
    const groupProject = await makeProject(app, groupOwner, { namespace: group });
    await app.deps.db
      .insertInto('events')
      .values({
        action: 'pushed',
        author_id: user.id,
        project_id: groupProject.id,
        push_data: JSON.stringify(null),
        created_at: app.clock.now(),
      })
      .execute();

    await api().Users.remove(user.id);
    expectStatus(await app.request(`/users/${user.id}`, { token: adminToken }), 404, 'gone at once');
    expect((await app.request('/users', { token: adminToken, query: { username: user.username } })).body).toEqual([]);
    expect((await app.request('/user', { token })).body).toEqual({ message: BLOCKED });
    expectStatus(await app.request(`/users/${user.id}`, { method: 'DELETE', token: adminToken }), 404, 'again');

    expect(await drain()).toBeGreaterThanOrEqual(1);
    expect(await stateOf(user.id)).toBeUndefined();
    expectStatus(await app.request(`/projects/${project.id}`, { token: adminToken }), 404, 'project');
    await expect(fs.access(gitDir)).rejects.toThrow();
    const members = await app.deps.db.selectFrom('members').selectAll().where('user_id', '=', user.id).execute();
    expect(members).toEqual([]);
    const ghost = await app.deps.db.selectFrom('users').selectAll().where('ghost', '=', true).executeTakeFirstOrThrow();
    expect(ghost.username).toBe('ghost');
    expect(ghost.state).toBe('blocked');
    // As in GitLab, events go with their author; the group project keeps no creator.
    const events = await app.deps.db
      .selectFrom('events')
      .select('author_id')
      .where('project_id', '=', groupProject.id)
      .where('action', '=', 'pushed')
      .execute();
    expect(events).toEqual([]);
    const kept = await app.deps.db
      .selectFrom('projects')
      .select('creator_id')
      .where('id', '=', groupProject.id)
      .executeTakeFirstOrThrow();
    expect(kept.creator_id).toBe(groupOwner.id);
    // The ghost holds what deleted users made: it cannot be blocked or removed.
    expect((await post(`/users/${ghost.id}/block`)).text).toBe('null');
    expectStatus(await app.request(`/users/${ghost.id}`, { method: 'DELETE', token: adminToken }), 403, 'ghost');
  });

  it('refuses the only Owner of a group unless hard_delete, which removes the group and the authored rows too', async () => {
    const user = await makeUser(app);
    const group = await makeGroup(app, user);
    const project = await makeProject(app, user, { namespace: group });
    await app.deps.db
      .insertInto('events')
      .values({
        action: 'created',
        author_id: user.id,
        project_id: project.id,
        push_data: JSON.stringify(null),
        created_at: app.clock.now(),
      })
      .execute();
    const refused = await app.request(`/users/${user.id}`, { method: 'DELETE', token: adminToken });
    expectStatus(refused, 409, 'sole owner');
    expect(refused.body).toEqual({ message: 'User cannot be removed while is the sole-owner of a group' });
    expect(await stateOf(user.id)).toBe('active');

    const stale = await app.request(`/users/${user.id}`, {
      method: 'DELETE',
      token: adminToken,
      headers: { 'If-Unmodified-Since': new Date(Date.now() - 3_600_000 * 24 * 365).toUTCString() },
    });
    expectStatus(stale, 412, 'if-unmodified-since');
    expect(await stateOf(user.id)).toBe('active');

    const hard = await app.request(`/users/${user.id}`, {
      method: 'DELETE',
      token: adminToken,
      query: { hard_delete: true },
    });
    expectStatus(hard, 204, 'hard delete');
    expect(hard.text).toBe('');
    await drain();
    expect(await stateOf(user.id)).toBeUndefined();
    expectStatus(await app.request(`/groups/${group.id}`, { token: adminToken }), 404, 'group');
    const events = await app.deps.db.selectFrom('events').selectAll().where('project_id', '=', project.id).execute();
    expect(events).toEqual([]);
  });

  it('passes authored rows to the ghost user unless hard_delete', async () => {
    await sql`CREATE TABLE authored_things (id serial PRIMARY KEY, author_id integer REFERENCES users (id) ON DELETE CASCADE)`.execute(
      app.deps.db,
    );
    const columns = [{ table: 'authored_things', column: 'author_id' }];
    const soft = await makeUser(app);
    const hard = await makeUser(app);
    await sql`INSERT INTO authored_things (author_id) VALUES (${soft.id}), (${soft.id}), (${hard.id})`.execute(
      app.deps.db,
    );
    expect(await deleteUserNow(app.deps, soft.id, false, columns)).toBe(true);
    expect(await deleteUserNow(app.deps, hard.id, true, columns)).toBe(true);
    // A second run finds nothing left to do.
    expect(await deleteUserNow(app.deps, soft.id, false, columns)).toBe(false);
    const ghost = await app.deps.db
      .selectFrom('users')
      .select('id')
      .where('ghost', '=', true)
      .executeTakeFirstOrThrow();
    const { rows } = await sql<{ author_id: number }>`SELECT author_id FROM authored_things ORDER BY id`.execute(
      app.deps.db,
    );
    expect(rows).toEqual([{ author_id: ghost.id }, { author_id: ghost.id }]);
  });

  it('queues the deletion again when its job was lost or gave up, as hard as it was asked', async () => {
    const lost = await makeUser(app);
    await api().Users.remove(lost.id);
    await app.deps.db.deleteFrom('jobs').where('kind', '=', 'delete_user').execute();
    // The only Owner of a group: only a hard deletion may go on.
    const gaveUp = await makeUser(app);
    const group = await makeGroup(app, gaveUp);
    await api().Users.remove(gaveUp.id, { hardDelete: true });
    await app.deps.db.updateTable('jobs').set({ state: 'failed' }).where('kind', '=', 'delete_user').execute();
    await new Worker(app.deps, JOB_KINDS).drain({ recover: true });
    expect(await stateOf(lost.id)).toBeUndefined();
    expect(await stateOf(gaveUp.id)).toBeUndefined();
    expectStatus(await app.request(`/groups/${group.id}`, { token: adminToken }), 404, 'hard deletion kept');
  });

  it('lets a group keep its other owners when one is deleted', async () => {
    const user = await makeUser(app);
    const other = await makeUser(app);
    const group = await makeGroup(app, user);
    await addMember(app, { type: 'group', id: group.id }, other, 50);
    await api().Users.remove(user.id);
    await drain();
    expectStatus(await app.request(`/groups/${group.id}`, { token: adminToken }), 200, 'group stays');
  });
});

describe('GET /users/:id/memberships', () => {
  it('lists memberships for administrators, with the type filter', async () => {
    const owner = await makeUser(app);
    const user = await makeUser(app);
    const group = await makeGroup(app, owner);
    const project = await makeProject(app, owner);
    await addMember(app, { type: 'group', id: group.id }, user, 20);
    await addMember(app, { type: 'project', id: project.id }, user, 30);

    const all = await api().Users.allMemberships(user.id);
    expect(all).toEqual([
      { source_id: group.id, source_name: group.name, source_type: 'Namespace', access_level: 20 },
      { source_id: project.id, source_name: project.name, source_type: 'Project', access_level: 30 },
    ]);
    const raw = await app.request(`/users/${user.id}/memberships`, { token: adminToken, query: { type: 'Project' } });
    expect(raw.body).toEqual([
      { source_id: project.id, source_name: project.name, source_type: 'Project', access_level: 30 },
    ]);
    expect(raw.headers.get('X-Total')).toBe('1');
    const groups = await api().Users.allMemberships(user.id, { type: 'Namespace' });
    expect(groups.map((m) => m.source_id)).toEqual([group.id]);

    const bad = await app.request(`/users/${user.id}/memberships`, { token: adminToken, query: { type: 'Group' } });
    expectStatus(bad, 400, 'bad type');
    expect(bad.body).toEqual({ error: 'type does not have a valid value' });
    const word = await app.request('/users/abc/memberships', { token: adminToken });
    expectStatus(word, 400, 'bad id');
    expect(word.body).toEqual({ error: 'user_id is invalid' });
    expect((await app.request('/users/999999/memberships', { token: adminToken })).body).toEqual({
      message: '404 User Not Found',
    });
    const personas = await makePersonas(app, { type: 'group', id: group.id });
    for (const persona of personas) {
      const res = await app.request(`/users/${user.id}/memberships`, { token: persona.token });
      expectStatus(res, persona.name === 'admin' ? 200 : persona.name === 'anonymous' ? 401 : 403, persona.name);
    }
  });
});

describe('GET /users/:id/projects', () => {
  it('lists the personal projects the caller may see, with GitLab’s filters', async () => {
    const owner = await makeUser(app);
    const pub = await makeProject(app, owner, { visibility: 'public', path: `pub-${owner.id}` });
    const internal = await makeProject(app, owner, { visibility: 'internal', path: `int-${owner.id}` });
    const priv = await makeProject(app, owner, { visibility: 'private', path: `priv-${owner.id}` });
    // A group project the owner created is not one of their personal projects.
    const group = await makeGroup(app, owner, { visibility: 'public' });
    await makeProject(app, owner, { visibility: 'public', namespace: group });
    const { token: memberToken, user: member } = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: priv.id }, member, 10);
    const { token: strangerToken } = await makeUserWithToken(app);

    const ids = (res: TestResponse) => (res.body as { id: number }[]).map((p) => p.id).sort((a, b) => a - b);
    const path = `/users/${owner.id}/projects`;
    expect(ids(await app.request(path))).toEqual([pub.id]);
    expect(ids(await app.request(path, { token: strangerToken }))).toEqual([pub.id, internal.id]);
    expect(ids(await app.request(path, { token: memberToken }))).toEqual([pub.id, internal.id, priv.id]);
    expect(ids(await app.request(path, { token: await makeToken(app, owner) }))).toEqual([
      pub.id,
      internal.id,
      priv.id,
    ]);
    expect(ids(await app.request(path, { token: adminToken }))).toEqual([pub.id, internal.id, priv.id]);
    // By username too, and with filters.
    expect(
      ids(
        await app.request(`/users/${owner.username}/projects`, {
          token: adminToken,
          query: { visibility: 'internal' },
        }),
      ),
    ).toEqual([internal.id]);
    expect(ids(await app.request(path, { token: adminToken, query: { search: `priv-${owner.id}` } }))).toEqual([
      priv.id,
    ]);
    // `owned` and `membership` choose among the caller's projects in GET /projects; here they are ignored.
    expect(ids(await app.request(path, { token: memberToken, query: { owned: true, membership: true } }))).toEqual([
      pub.id,
      internal.id,
      priv.id,
    ]);
    const viaClient = await api().Users.allProjects(owner.id, { orderBy: 'id', sort: 'asc' });
    expect(viaClient.map((p) => p.id)).toEqual([pub.id, internal.id, priv.id]);
    expect(viaClient[0]?.namespace?.id).toBeDefined();
    const simple = await app.request(path, { token: adminToken, query: { simple: true, per_page: 1 } });
    expect(simple.headers.get('X-Total')).toBe('3');
    expect(simple.body).toHaveLength(1);
    expect(member.id).toBeGreaterThan(0);

    const missing = await app.request('/users/999999/projects');
    expectStatus(missing, 404, 'unknown');
    expect(missing.body).toEqual({ message: '404 User Not Found' });
    const bad = await app.request(path, { query: { visibility: 'secret' } });
    expectStatus(bad, 400, 'bad visibility');
    expect(bad.body).toEqual({ error: 'visibility does not have a valid value' });
  });
});

describe('impersonation tokens', () => {
  it('are made by administrators, act as the user, and are listed apart from personal access tokens', async () => {
    const { user, token: own } = await makeUserWithToken(app);
    const created = await api().UserImpersonationTokens.create(user.id, 'support', ['api'], {
      expiresAt: addDays(utcDate(app.clock.now()), 30),
    });
    expect(created.impersonation).toBe(true);
    expect(created.active).toBe(true);
    expect(created.user_id).toBe(user.id);
    expect(created.scopes).toEqual(['api']);
    const plaintext = created.token as string;
    expect(plaintext).toMatch(/^glpat-/);
    const raw = await app.request(`/users/${user.id}/impersonation_tokens/${created.id}`, { token: adminToken });
    expect(Object.keys(raw.body)).toEqual([
      'id',
      'name',
      'revoked',
      'created_at',
      'description',
      'scopes',
      'user_id',
      'last_used_at',
      'active',
      'expires_at',
      'impersonation',
    ]);

    // The token acts as the user.
    const me = await app.request('/user', { token: plaintext });
    expectStatus(me, 200, 'acts as');
    expect(me.body.username).toBe(user.username);

    // Listed apart: the user's own token is not an impersonation token; the user does not see this one.
    const listed = await api().UserImpersonationTokens.all(user.id);
    expect(listed.map((t) => t.id)).toEqual([created.id]);
    const ownList = await app.request('/personal_access_tokens', { token: own });
    expect((ownList.body as { id: number }[]).map((t) => t.id)).not.toContain(created.id);
    const shown = await api().UserImpersonationTokens.show(user.id, created.id as number);
    expect(shown.name).toBe('support');

    await api().UserImpersonationTokens.revoke(user.id, created.id as number);
    expectStatus(await app.request('/user', { token: plaintext }), 401, 'revoked');
    const inactive = await app.request(`/users/${user.id}/impersonation_tokens`, {
      token: adminToken,
      query: { state: 'inactive' },
    });
    expect((inactive.body as { id: number }[]).map((t) => t.id)).toEqual([created.id]);
    const active = await app.request(`/users/${user.id}/impersonation_tokens`, {
      token: adminToken,
      query: { state: 'active' },
    });
    expect(active.body).toEqual([]);
  });

  it('refuses bad input and other callers, in GitLab shapes, and creates nothing', async () => {
    const user = await makeUser(app);
    const count = async () =>
      (await app.deps.db.selectFrom('personal_access_tokens').select('id').where('user_id', '=', user.id).execute())
        .length;
    const path = `/users/${user.id}/impersonation_tokens`;
    const create = (body: Record<string, unknown>, token: string | null = adminToken) =>
      app.request(path, { method: 'POST', token: token ?? undefined, body });

    expect((await create({ scopes: ['api'] })).body).toEqual({ error: 'name is missing' });
    const noScopes = await create({ name: 'x' });
    expectStatus(noScopes, 400, 'no scopes');
    expect(noScopes.body).toEqual({ message: { scopes: ["can't be blank"] } });
    expect((await create({ name: 'x', scopes: ['everything'] })).body).toEqual({
      message: { scopes: ['can only contain available scopes'] },
    });
    expect((await create({ name: 'x', scopes: ['api'], expires_at: 'soon' })).body).toEqual({
      error: 'expires_at is invalid',
    });
    expect((await create({ name: 'x', scopes: ['api'], expires_at: '2001-01-01' })).status).toBe(400);
    expect((await app.request(path, { token: adminToken, query: { state: 'revoked' } })).body).toEqual({
      error: 'state does not have a valid value',
    });
    expect((await app.request(`${path}/abc`, { token: adminToken })).body).toEqual({
      error: 'impersonation_token_id is invalid',
    });
    expect((await app.request('/users/abc/impersonation_tokens', { token: adminToken })).body).toEqual({
      error: 'user_id is invalid',
    });
    expect((await app.request('/users/999999/impersonation_tokens', { token: adminToken })).body).toEqual({
      message: '404 User Not Found',
    });
    expect(await count()).toBe(0);

    // A personal access token, or another user's impersonation token, is not found here.
    await makeToken(app, user);
    const pat = await app.deps.db
      .selectFrom('personal_access_tokens')
      .select('id')
      .where('user_id', '=', user.id)
      .executeTakeFirstOrThrow();
    const notOne = await app.request(`${path}/${pat.id}`, { token: adminToken });
    expectStatus(notOne, 404, 'pat');
    expect(notOne.body).toEqual({ message: '404 Impersonation Token Not Found' });
    const otherUser = await makeUser(app);
    const other = await create({ name: 'other', scopes: ['read_api'] });
    expectStatus(other, 201, 'create');
    expectStatus(
      await app.request(`/users/${otherUser.id}/impersonation_tokens/${other.body.id}`, { token: adminToken }),
      404,
      'other user',
    );
    expectStatus(
      await app.request(`/users/${otherUser.id}/impersonation_tokens/${other.body.id}`, {
        method: 'DELETE',
        token: adminToken,
      }),
      404,
      'revoke as other user',
    );
    expect((await app.request(`${path}/${other.body.id}`, { token: adminToken })).body.revoked).toBe(false);

    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    for (const persona of await makePersonas(app, { type: 'group', id: group.id })) {
      if (persona.name === 'admin') continue;
      const expected = persona.name === 'anonymous' ? 401 : 403;
      expectStatus(await app.request(path, { token: persona.token }), expected, `${persona.name} lists`);
      expectStatus(
        await create({ name: 'y', scopes: ['api'] }, persona.token ?? null),
        expected,
        `${persona.name} creates`,
      );
      expectStatus(
        await app.request(`${path}/${other.body.id}`, { method: 'DELETE', token: persona.token }),
        expected,
        `${persona.name} revokes`,
      );
    }
    expect(await count()).toBe(2);
  });
});

describe('the OpenAPI document', () => {
  it('declares every route of the user lifecycle', async () => {
    const doc = (await app.request('/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    for (const [path, method] of [
      ['/users/{id}', 'delete'],
      ['/users/{id}/block', 'post'],
      ['/users/{id}/unblock', 'post'],
      ['/users/{id}/deactivate', 'post'],
      ['/users/{id}/activate', 'post'],
      ['/users/{id}/ban', 'post'],
      ['/users/{id}/unban', 'post'],
      ['/users/{id}/approve', 'post'],
      ['/users/{id}/reject', 'post'],
      ['/users/{user_id}/projects', 'get'],
      ['/users/{user_id}/memberships', 'get'],
      ['/users/{user_id}/impersonation_tokens', 'get'],
      ['/users/{user_id}/impersonation_tokens', 'post'],
      ['/users/{user_id}/impersonation_tokens/{impersonation_token_id}', 'get'],
      ['/users/{user_id}/impersonation_tokens/{impersonation_token_id}', 'delete'],
    ] as const) {
      expect(doc.paths[`/api/v4${path}`]?.[method] ?? doc.paths[path]?.[method], `${method} ${path}`).toBeDefined();
    }
  });
});
