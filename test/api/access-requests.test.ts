import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Namespace, Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import { addMember, makeGroup, makePersonas, makeProject, makeUser, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const MINUTE_MS = 60_000;

function expectStatus(res: TestResponse, status: number, what: string) {
  expect(res.status, `${what}: ${res.text}`).toBe(status);
}

type Source = { type: 'group'; group: Namespace } | { type: 'project'; project: Project };
const pathOf = (s: Source) => (s.type === 'group' ? `/groups/${s.group.id}` : `/projects/${s.project.id}`);
const refOf = (s: Source) =>
  s.type === 'group' ? { type: 'group' as const, id: s.group.id } : { type: 'project' as const, id: s.project.id };

async function makeSource(type: 'group' | 'project', owner: User): Promise<Source> {
  const group = await makeGroup(app, owner, { visibility: 'internal' });
  if (type === 'group') return { type, group };
  return { type, project: await makeProject(app, owner, { namespace: group, visibility: 'internal' }) };
}

async function request(source: Source, token: string) {
  return app.request(`${pathOf(source)}/access_requests`, { token, method: 'POST' });
}

for (const type of ['group', 'project'] as const) {
  describe(`${type} access requests`, () => {
    it('lets a signed-in user request access once, at Developer level, and not when they have access', async () => {
      const owner = await makeUser(app);
      const source = await makeSource(type, owner);
      const { user, token } = await makeUserWithToken(app);
      const before = app.clock.now().toISOString();
      const res = await request(source, token);
      expectStatus(res, 201, 'request');
      expect(Object.keys(res.body)).toEqual([
        'id',
        'username',
        'name',
        'state',
        'locked',
        'avatar_url',
        'web_url',
        'created_at',
        'requested_at',
      ]);
      expect(res.body).toMatchObject({ id: user.id, username: user.username, requested_at: before });
      const row = await app.deps.db
        .selectFrom('members')
        .selectAll()
        .where('user_id', '=', user.id)
        .executeTakeFirstOrThrow();
      expect(row.access_level).toBe(30);
      const again = await request(source, token);
      expect([again.status, again.body]).toEqual([400, { message: { user_id: ['already exists in source'] } }]);
      // A pending request grants nothing.
      const members = await app.request(`${pathOf(source)}/members/${user.id}`, { token });
      expect(members.status).toBe(404);

      const member = await makeUserWithToken(app);
      await addMember(app, refOf(source), member.user, 20);
      expectStatus(await request(source, member.token), 403, 'a member requests');
      expectStatus(await app.request(`${pathOf(source)}/access_requests`, { method: 'POST' }), 401, 'anonymous');
    });

    it('refuses requests when the source does not accept them, and hides private sources', async () => {
      const owner = await makeUser(app);
      const source = await makeSource(type, owner);
      const table = source.type === 'group' ? 'namespaces' : 'projects';
      const id = source.type === 'group' ? source.group.id : source.project.id;
      await app.deps.db.updateTable(table).set({ request_access_enabled: false }).where('id', '=', id).execute();
      const { token } = await makeUserWithToken(app);
      expectStatus(await request(source, token), 403, 'disabled');
      await app.deps.db
        .updateTable(table)
        .set({ request_access_enabled: true, visibility: 'private' })
        .where('id', '=', id)
        .execute();
      const hidden = await request(source, token);
      expect([hidden.status, hidden.body]).toEqual([
        404,
        { message: type === 'group' ? '404 Group Not Found' : '404 Project Not Found' },
      ]);
    });

    it('shows, approves and denies requests for the roles GitLab allows', async () => {
      const owner = await makeUser(app);
      const source = await makeSource(type, owner);
      const personas = await makePersonas(app, refOf(source));
      const admins = type === 'group' ? ['owner', 'admin'] : ['maintainer', 'admin'];
      for (const { name, token } of personas) {
        const requester = await makeUserWithToken(app);
        expectStatus(await request(source, requester.token), 201, 'request');
        app.clock.advance(MINUTE_MS);
        const expected = name === 'anonymous' ? 401 : admins.includes(name) ? 200 : 403;
        const list = await app.request(`${pathOf(source)}/access_requests`, { token });
        expectStatus(list, expected, `${name} lists`);
        if (list.status === 200) {
          expect((list.body as { id: number }[]).map((r) => r.id)).toContain(requester.user.id);
        }
        const approve = await app.request(`${pathOf(source)}/access_requests/${requester.user.id}/approve`, {
          token,
          method: 'PUT',
        });
        expectStatus(approve, expected === 200 ? 201 : expected, `${name} approves`);
        const other = await makeUserWithToken(app);
        expectStatus(await request(source, other.token), 201, 'request');
        const deny = await app.request(`${pathOf(source)}/access_requests/${other.user.id}`, {
          token,
          method: 'DELETE',
        });
        expectStatus(deny, expected === 200 ? 204 : expected, `${name} denies`);
      }
    });

    it('approves with the default or a chosen level, making the requester a member with a joined event', async () => {
      const { user: owner, token } = await makeUserWithToken(app);
      const source = await makeSource(type, owner);
      const a = await makeUserWithToken(app);
      const b = await makeUserWithToken(app);
      expectStatus(await request(source, a.token), 201, 'request a');
      expectStatus(await request(source, b.token), 201, 'request b');
      const listed = await app.request(`${pathOf(source)}/access_requests`, { token });
      expect((listed.body as { id: number }[]).map((r) => r.id)).toEqual([a.user.id, b.user.id]);
      const approved = await app.request(`${pathOf(source)}/access_requests/${a.user.id}/approve`, {
        token,
        method: 'PUT',
      });
      expectStatus(approved, 201, 'approve');
      expect(approved.body).toMatchObject({ id: a.user.id, access_level: 30, created_by: { id: owner.id } });
      expect(approved.body).not.toHaveProperty('requested_at');
      const chosen = await app.request(`${pathOf(source)}/access_requests/${b.user.id}/approve`, {
        token,
        method: 'PUT',
        body: { access_level: 20 },
      });
      expect(chosen.body.access_level).toBe(20);
      const member = await app.request(`${pathOf(source)}/members/${b.user.id}`, { token: b.token });
      expectStatus(member, 200, 'the requester is a member');
      const events = await app.deps.db
        .selectFrom('events')
        .select(['action', 'project_id', 'group_id'])
        .where('author_id', '=', b.user.id)
        .execute();
      expect(events).toEqual([
        source.type === 'group'
          ? { action: 'joined', project_id: null, group_id: source.group.id }
          : { action: 'joined', project_id: source.project.id, group_id: null },
      ]);
      expect((await app.request(`${pathOf(source)}/access_requests`, { token })).body).toEqual([]);
    });

    it('validates the level and answers 404 for users without a request', async () => {
      const { user: owner, token } = await makeUserWithToken(app);
      const source = await makeSource(type, owner);
      const requester = await makeUserWithToken(app);
      expectStatus(await request(source, requester.token), 201, 'request');
      const url = `${pathOf(source)}/access_requests/${requester.user.id}/approve`;
      const bad = await app.request(url, { token, method: 'PUT', body: { access_level: 50 } });
      if (type === 'group') expectStatus(bad, 201, 'owner on a group');
      else
        expect([bad.status, bad.body]).toEqual([400, { message: { access_level: ['is not included in the list'] } }]);
      const malformed = await app.request(url, { token, method: 'PUT', body: { access_level: 'high' } });
      expect(malformed.body).toEqual({ error: 'access_level is invalid' });
      const nobody = await app.request(`${pathOf(source)}/access_requests/${owner.id}/approve`, {
        token,
        method: 'PUT',
      });
      expect([nobody.status, nobody.body]).toEqual([404, { message: '404 Not found' }]);
      const unknown = await app.request(`${pathOf(source)}/access_requests/2147483648`, { token, method: 'DELETE' });
      expect([unknown.status, unknown.body]).toEqual([404, { message: '404 Not found' }]);
      expect((await app.request(`${pathOf(source)}/access_requests/x`, { token, method: 'DELETE' })).body).toEqual({
        error: 'user_id is invalid',
      });
    });

    it('lets a requester withdraw their own request', async () => {
      const owner = await makeUser(app);
      const source = await makeSource(type, owner);
      const requester = await makeUserWithToken(app);
      expectStatus(await request(source, requester.token), 201, 'request');
      const withdraw = await app.request(`${pathOf(source)}/access_requests/${requester.user.id}`, {
        token: requester.token,
        method: 'DELETE',
      });
      expectStatus(withdraw, 204, 'withdraw');
      const rows = await app.deps.db
        .selectFrom('members')
        .select('id')
        .where('user_id', '=', requester.user.id)
        .execute();
      expect(rows).toEqual([]);
    });
  });
}
