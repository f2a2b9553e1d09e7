import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findUserNamespace } from '../../src/db/queries/namespaces.js';
import type { Namespace, User } from '../../src/db/schema.js';
import { addDays, utcDate } from '../../src/lib/clock.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import { addMember, makeGroup, makePersonas, makeProject, makeUser, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

let tagCount = 0;
const uniq = () => {
  tagCount += 1;
  return `n${process.pid.toString(36)}x${tagCount}`;
};
const ids = (res: TestResponse) => (res.body as { id: number }[]).map((n) => n.id);
const enc = (path: string) => encodeURIComponent(path);
const gravatar = (email: string) =>
  `https://www.gravatar.com/avatar/${createHash('sha256').update(email.toLowerCase()).digest('hex')}?s=80&d=identicon`;

const BASIC_KEYS = ['id', 'name', 'path', 'kind', 'full_path', 'parent_id', 'avatar_url', 'web_url'];
const OWNER_KEYS = [...BASIC_KEYS, 'members_count_with_descendants', 'root_repository_size', 'projects_count'];

async function personal(user: User): Promise<Namespace> {
  const ns = await findUserNamespace(app.deps.db, user.id);
  if (!ns) throw new Error('no personal namespace');
  return ns;
}

describe('GET /namespaces', () => {
  it('needs authentication', async () => {
    const res = await app.request('/namespaces');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: '401 Unauthorized' });
  });

  it('lists the user’s own namespace and the groups they are a direct member of, by id', async () => {
    const owner = await makeUser(app);
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const member = await makeGroup(app, owner, { path: `${tag}-member` });
    const inherited = await makeGroup(app, owner, { parent: member, path: `${tag}-inherited` });
    const publicGroup = await makeGroup(app, owner, { visibility: 'public', path: `${tag}-public` });
    const viaProject = await makeGroup(app, owner, { path: `${tag}-project` });
    const project = await makeProject(app, owner, { namespace: viaProject });
    await addMember(app, { type: 'group', id: member.id }, user, 10);
    await addMember(app, { type: 'project', id: project.id }, user, 40);
    const own = await personal(user);

    const res = await app.request('/namespaces', { token });
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([own.id, member.id]);
    expect(res.headers.get('x-total')).toBe('2');
    for (const hidden of [inherited, publicGroup, viaProject]) expect(ids(res)).not.toContain(hidden.id);

    expect(res.body[0]).toEqual({
      id: own.id,
      name: user.name,
      path: user.username,
      kind: 'user',
      full_path: user.username,
      parent_id: null,
      avatar_url: gravatar(user.email),
      web_url: `${app.baseUrl}/${user.username}`,
    });
    // A guest does not administer the group: no counts.
    expect(res.body[1]).toEqual({
      id: member.id,
      name: member.name,
      path: member.path,
      kind: 'group',
      full_path: member.full_path,
      parent_id: null,
      avatar_url: null,
      web_url: `${app.baseUrl}/groups/${member.full_path}`,
    });
  });

  it('shows owners the member and project counts of the whole subtree', async () => {
    const { user: owner, token } = await makeUserWithToken(app);
    const tag = uniq();
    const root = await makeGroup(app, owner, { path: `${tag}-root` });
    const sub = await makeGroup(app, owner, { parent: root, path: `${tag}-sub` });
    const deep = await makeGroup(app, owner, { parent: sub, path: `${tag}-deep` });
    await makeProject(app, owner, { namespace: root });
    await makeProject(app, owner, { namespace: deep });
    await makeProject(app, owner, { namespace: deep });
    const a = await makeUser(app);
    const b = await makeUser(app);
    const gone = await makeUser(app);
    await addMember(app, { type: 'group', id: root.id }, a, 30);
    await addMember(app, { type: 'group', id: deep.id }, a, 40);
    await addMember(app, { type: 'group', id: sub.id }, b, 10);
    await addMember(app, { type: 'group', id: deep.id }, gone, 10, utcDate(app.clock.now()));

    const res = await app.request('/namespaces', { token, query: { search: tag } });
    expect(ids(res)).toEqual([root.id, sub.id, deep.id]);
    expect(Object.keys(res.body[0])).toEqual(OWNER_KEYS);
    // owner (in each group, counted once), a and b; the expired membership does not count.
    expect(res.body[0]).toMatchObject({
      members_count_with_descendants: 3,
      root_repository_size: null,
      projects_count: 3,
    });
    expect(res.body[1]).toMatchObject({ members_count_with_descendants: 3, projects_count: 2, parent_id: root.id });
    // Below `deep` only owner and a remain (b is a member of `sub`, above it).
    expect(res.body[2]).toMatchObject({ members_count_with_descendants: 2, projects_count: 2 });
    expect(res.body[2].web_url).toBe(`${app.baseUrl}/groups/${tag}-root/${tag}-sub/${tag}-deep`);

    const maintainer = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: root.id }, maintainer.user, 40);
    const asMaintainer = await app.request('/namespaces', { token: maintainer.token, query: { search: tag } });
    expect(ids(asMaintainer)).toEqual([root.id]);
    expect(Object.keys(asMaintainer.body[0])).toEqual(BASIC_KEYS);
  });

  it('filters with owned_only, top_level_only and search', async () => {
    const owner = await makeUser(app);
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const owned = await makeGroup(app, user, { path: `${tag}-owned` });
    const ownedSub = await makeGroup(app, user, { parent: owned, path: `${tag}-ownedsub` });
    const developer = await makeGroup(app, owner, { path: `${tag}-dev` });
    await addMember(app, { type: 'group', id: developer.id }, user, 30);
    const own = await personal(user);

    const ownedOnly = await app.request('/namespaces', { token, query: { owned_only: true } });
    expect(ids(ownedOnly)).toEqual([own.id, owned.id, ownedSub.id]);
    const notOwnedOnly = await app.request('/namespaces', { token, query: { owned_only: false } });
    expect(ids(notOwnedOnly)).toEqual([own.id, owned.id, ownedSub.id, developer.id]);
    const top = await app.request('/namespaces', { token, query: { top_level_only: true } });
    expect(ids(top)).toEqual([own.id, owned.id, developer.id]);
    expect(ids(await app.request('/namespaces', { token, query: { search: `${tag}-dev` } }))).toEqual([developer.id]);
    expect(ids(await app.request('/namespaces', { token, query: { search: user.username } }))).toEqual([own.id]);
    // Without full_path_search a subgroup is found by its own path only.
    expect(ids(await app.request('/namespaces', { token, query: { search: `${tag}-owned/` } }))).toEqual([]);
    expect(
      ids(await app.request('/namespaces', { token, query: { search: `${tag}-owned/`, full_path_search: true } })),
    ).toEqual([ownedSub.id]);
  });

  it('shows administrators every namespace', async () => {
    const someone = await makeUser(app);
    const tag = uniq();
    const group = await makeGroup(app, someone, { path: `${tag}-priv` });
    const sub = await makeGroup(app, someone, { parent: group, path: `${tag}-sub` });
    const { token } = await makeUserWithToken(app, { admin: true });
    const res = await app.request('/namespaces', { token, query: { search: tag } });
    expect(ids(res)).toEqual([group.id, sub.id]);
    expect(Object.keys(res.body[0])).toEqual(OWNER_KEYS);
    const users = await app.request('/namespaces', { token, query: { search: someone.username } });
    expect(ids(users)).toEqual([(await personal(someone)).id]);
    const all = await app.request('/namespaces', { token, query: { per_page: 100 } });
    expect(Number(all.headers.get('x-total'))).toBeGreaterThanOrEqual(4);
  });

  it('ignores expired memberships', async () => {
    const owner = await makeUser(app);
    const { user, token } = await makeUserWithToken(app);
    const expired = await makeGroup(app, owner);
    const current = await makeGroup(app, owner);
    await addMember(app, { type: 'group', id: expired.id }, user, 50, utcDate(app.clock.now()));
    await addMember(app, { type: 'group', id: current.id }, user, 50, addDays(utcDate(app.clock.now()), 1));
    const res = await app.request('/namespaces', { token });
    expect(ids(res)).toEqual([(await personal(user)).id, current.id]);
    expect(ids(await app.request('/namespaces', { token, query: { owned_only: true } }))).toEqual([
      (await personal(user)).id,
      current.id,
    ]);
  });

  it('paginates', async () => {
    const { user, token } = await makeUserWithToken(app);
    const groups: Namespace[] = [];
    for (let i = 0; i < 3; i++) groups.push(await makeGroup(app, user));
    const res = await app.request('/namespaces', { token, query: { per_page: 2, page: 2 } });
    expect(ids(res)).toEqual([groups[1]?.id, groups[2]?.id]);
    expect(res.headers.get('x-total')).toBe('4');
    expect(res.headers.get('x-total-pages')).toBe('2');
    expect(res.headers.get('x-prev-page')).toBe('1');
    expect(res.headers.get('x-next-page')).toBe('');
    expect(res.headers.get('link')).toContain('rel="first"');
  });

  it('answers odd input without a 500', async () => {
    const { token } = await makeUserWithToken(app);
    for (const search of ['ü', '😀', '%', '_', '\\', 'x'.repeat(2000), '"a b"', '   ']) {
      expect((await app.request('/namespaces', { token, query: { search } })).status, search).toBe(200);
    }
    expect((await app.request('/namespaces?search=%00', { token })).status).toBe(400);
    const bad = await app.request('/namespaces', { token, query: { owned_only: 'maybe' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'owned_only is invalid' });
  });
});

describe('GET /namespaces/:id', () => {
  it('needs authentication', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const res = await app.request(`/namespaces/${group.id}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: '401 Unauthorized' });
  });

  it('finds the user’s own namespace by id and by path', async () => {
    const { user, token } = await makeUserWithToken(app);
    const own = await personal(user);
    for (const id of [String(own.id), user.username, user.username.toUpperCase()]) {
      const res = await app.request(`/namespaces/${id}`, { token });
      expect(res.status, id).toBe(200);
      expect(res.body).toEqual({
        id: own.id,
        name: user.name,
        path: user.username,
        kind: 'user',
        full_path: user.username,
        parent_id: null,
        avatar_url: gravatar(user.email),
        web_url: `${app.baseUrl}/${user.username}`,
      });
    }
  });

  it('shows a group to its members only, even when it is public', async () => {
    const owner = await makeUser(app);
    for (const visibility of ['private', 'internal', 'public'] as const) {
      const group = await makeGroup(app, owner, { visibility });
      const personas = await makePersonas(app, { type: 'group', id: group.id });
      for (const p of personas) {
        const res = await app.request(`/namespaces/${group.id}`, { token: p.token });
        const expected = p.name === 'anonymous' ? 401 : p.name === 'non-member' ? 404 : 200;
        expect(res.status, `${visibility} ${p.name}`).toBe(expected);
        if (res.status === 404) expect(res.body).toEqual({ message: '404 Namespace Not Found' });
        if (res.status === 200) {
          const admin = p.name === 'owner' || p.name === 'admin';
          expect(Object.keys(res.body), p.name).toEqual(admin ? OWNER_KEYS : BASIC_KEYS);
          expect(res.body).toMatchObject({
            id: group.id,
            kind: 'group',
            web_url: `${app.baseUrl}/groups/${group.path}`,
          });
        }
      }
    }
  });

  it('finds a subgroup by URL-encoded full path for members of an ancestor, not of a descendant', async () => {
    const owner = await makeUser(app);
    const root = await makeGroup(app, owner);
    const sub = await makeGroup(app, owner, { parent: root });
    const rootMember = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: root.id }, rootMember.user, 10);
    const res = await app.request(`/namespaces/${enc(sub.full_path)}`, { token: rootMember.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: sub.id, full_path: sub.full_path, parent_id: root.id });
    const subMember = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: sub.id }, subMember.user, 50);
    expect((await app.request(`/namespaces/${root.id}`, { token: subMember.token })).status).toBe(404);
    const subOwner = await app.request(`/namespaces/${sub.id}`, { token: subMember.token });
    // Members of ancestors are not counted: the group's creator and subMember.
    expect(subOwner.body.members_count_with_descendants).toBe(2);
  });

  it('hides other users’ namespaces except from administrators', async () => {
    const other = await makeUser(app);
    const otherNs = await personal(other);
    const { token } = await makeUserWithToken(app);
    for (const id of [String(otherNs.id), other.username]) {
      const res = await app.request(`/namespaces/${id}`, { token });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: '404 Namespace Not Found' });
    }
    const admin = await makeUserWithToken(app, { admin: true });
    const res = await app.request(`/namespaces/${other.username}`, { token: admin.token });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(BASIC_KEYS);
  });

  it('ignores an expired membership', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const { user, token } = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, user, 50, utcDate(app.clock.now()));
    expect((await app.request(`/namespaces/${group.id}`, { token })).status).toBe(404);
  });

  it('answers unknown and malformed ids with 404 or 400, never 500', async () => {
    const { token } = await makeUserWithToken(app);
    for (const id of [
      '0',
      '-1',
      '2147483648',
      '99999999999999999999',
      'nobody-here',
      'a%2Fb',
      '%C3%BC',
      'x'.repeat(3000),
    ]) {
      const res = await app.request(`/namespaces/${id}`, { token });
      expect(res.status, id.slice(0, 20)).toBe(404);
      expect(res.body).toEqual({ message: '404 Namespace Not Found' });
    }
    expect((await app.request('/namespaces/a%00b', { token })).status).toBe(400);
  });
});

describe('GET /namespaces/:id/exists', () => {
  it('says whether a path is taken among top-level namespaces or a parent’s children', async () => {
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const parent = await makeGroup(app, user, { path: `${tag}-parent` });
    const child = await makeGroup(app, user, { parent, path: `${tag}-child` });
    await makeGroup(app, user, { parent, path: `${tag}-child1` });
    const exists = (path: string, query: Record<string, number> = {}) =>
      app.request(`/namespaces/${enc(path)}/exists`, { token, query });

    expect((await exists(parent.path)).body).toEqual({ exists: true, suggests: [`${tag}-parent1`] });
    expect((await exists(parent.path.toUpperCase())).body).toEqual({
      exists: true,
      suggests: [`${tag.toUpperCase()}-PARENT1`],
    });
    expect((await exists(user.username)).body).toEqual({ exists: true, suggests: [`${user.username}1`] });
    expect((await exists('nothing-like-this')).body).toEqual({ exists: false, suggests: [] });
    // Within a parent: child1 is taken too, so the suggestion moves on.
    expect((await exists(child.path, { parent_id: parent.id })).body).toEqual({
      exists: true,
      suggests: [`${tag}-child2`],
    });
    expect((await exists(child.path)).body).toEqual({ exists: false, suggests: [] });
    expect((await exists(parent.path, { parent_id: parent.id })).body).toEqual({ exists: false, suggests: [] });
    expect((await exists(child.path, { parent_id: 2147483647 })).body).toEqual({ exists: false, suggests: [] });
    expect((await exists(child.path, { parent_id: 99999999999 })).body).toEqual({ exists: false, suggests: [] });
    expect((await app.request(`/namespaces/${parent.path}/exists`)).status).toBe(401);
  });
});
