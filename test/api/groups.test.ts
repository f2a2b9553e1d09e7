import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Namespace, User } from '../../src/db/schema.js';
import { addDays, utcDate } from '../../src/lib/clock.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import {
  addMember,
  makeGroup,
  makePersonas,
  makeProject,
  makeToken,
  makeUser,
  makeUserWithToken,
  type Persona,
  ROLES,
  type Role,
} from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

let tagCount = 0;
/** A word no other test uses, to build paths and to search for this test's groups only. */
const uniq = () => {
  tagCount += 1;
  return `t${process.pid.toString(36)}x${tagCount}`;
};
const ids = (res: TestResponse) => (res.body as { id: number }[]).map((g) => g.id);
const enc = (path: string) => encodeURIComponent(path);
const today = () => utcDate(app.clock.now());

/** Group entity keys, in GitLab's order (lib/api/entities/group.rb). */
const GROUP_KEYS = [
  'id',
  'web_url',
  'name',
  'path',
  'description',
  'visibility',
  'share_with_group_lock',
  'require_two_factor_authentication',
  'two_factor_grace_period',
  'project_creation_level',
  'auto_devops_enabled',
  'subgroup_creation_level',
  'emails_disabled',
  'emails_enabled',
  'show_diff_preview_in_email',
  'mentions_disabled',
  'lfs_enabled',
  'archived',
  'math_rendering_limits_enabled',
  'lock_math_rendering_limits_enabled',
  'default_branch',
  'default_branch_protection',
  'default_branch_protection_defaults',
  'avatar_url',
  'request_access_enabled',
  'full_name',
  'full_path',
  'created_at',
  'parent_id',
  'organization_id',
  'shared_runners_setting',
  'max_artifacts_size',
  'marked_for_deletion_on',
];

/** A root group with a subgroup and a grand-child, all of one visibility, owned by `owner`. */
async function tree(owner: User, visibility: 'private' | 'internal' | 'public' = 'private') {
  const tag = uniq();
  const root = await makeGroup(app, owner, { visibility, path: `${tag}-root` });
  const child = await makeGroup(app, owner, { visibility, parent: root, path: `${tag}-child` });
  const grandchild = await makeGroup(app, owner, { visibility, parent: child, path: `${tag}-grand` });
  return { tag, root, child, grandchild };
}

function persona(personas: Persona[], name: Persona['name']): Persona {
  const found = personas.find((p) => p.name === name);
  if (!found) throw new Error(`no persona ${name}`);
  return found;
}

describe('GET /groups', () => {
  it('shows anonymous callers the public groups only', async () => {
    const owner = await makeUser(app);
    const tag = uniq();
    const pub = await makeGroup(app, owner, { visibility: 'public', path: `${tag}-pub` });
    await makeGroup(app, owner, { visibility: 'internal', path: `${tag}-int` });
    await makeGroup(app, owner, { visibility: 'private', path: `${tag}-priv` });
    const res = await app.request('/groups', { query: { search: tag } });
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([pub.id]);
    expect(Object.keys(res.body[0])).toEqual(GROUP_KEYS);
    // all_available=false does not hide public groups from anonymous callers.
    expect(ids(await app.request('/groups', { query: { search: tag, all_available: false } }))).toEqual([pub.id]);
  });

  it('shows a signed-in user only the groups they belong to, unless all_available', async () => {
    const owner = await makeUser(app);
    const tag = uniq();
    const pub = await makeGroup(app, owner, { visibility: 'public', path: `${tag}-pub` });
    const int = await makeGroup(app, owner, { visibility: 'internal', path: `${tag}-int` });
    const priv = await makeGroup(app, owner, { visibility: 'private', path: `${tag}-priv` });
    const mine = await makeGroup(app, owner, { visibility: 'private', path: `${tag}-mine` });
    const { user, token } = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: mine.id }, user, 10);

    expect(ids(await app.request('/groups', { token, query: { search: tag } }))).toEqual([mine.id]);
    const all = await app.request('/groups', { token, query: { search: tag, all_available: true } });
    expect(ids(all).sort()).toEqual([pub.id, int.id, mine.id].sort());
    expect(ids(all)).not.toContain(priv.id);
  });

  it('counts ancestors, descendants and the groups of member projects as belonging', async () => {
    const owner = await makeUser(app);
    const { tag, root, child, grandchild } = await tree(owner);
    const other = await makeGroup(app, owner, { path: `${tag}-other` });
    const otherSub = await makeGroup(app, owner, { parent: other, path: `${tag}-othersub` });
    const project = await makeProject(app, owner, { namespace: otherSub });
    const { user, token } = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: child.id }, user, 30);
    await addMember(app, { type: 'project', id: project.id }, user, 20);

    const res = await app.request('/groups', { token, query: { search: tag } });
    expect(res.status).toBe(200);
    expect(ids(res).sort()).toEqual([root.id, child.id, grandchild.id, other.id, otherSub.id].sort());
  });

  it('hides internal groups from external users', async () => {
    const owner = await makeUser(app);
    const tag = uniq();
    const pub = await makeGroup(app, owner, { visibility: 'public', path: `${tag}-pub` });
    await makeGroup(app, owner, { visibility: 'internal', path: `${tag}-int` });
    const { token } = await makeUserWithToken(app, { external: true });
    expect(ids(await app.request('/groups', { token, query: { search: tag, all_available: true } }))).toEqual([pub.id]);
  });

  it('shows administrators every group, and only theirs with all_available=false', async () => {
    const owner = await makeUser(app);
    const tag = uniq();
    const priv = await makeGroup(app, owner, { visibility: 'private', path: `${tag}-priv` });
    const int = await makeGroup(app, owner, { visibility: 'internal', path: `${tag}-int` });
    const { user: admin, token } = await makeUserWithToken(app, { admin: true });
    const own = await makeGroup(app, admin, { path: `${tag}-admin` });
    const res = await app.request('/groups', { token, query: { search: tag } });
    expect(ids(res).sort()).toEqual([priv.id, int.id, own.id].sort());
    expect(ids(await app.request('/groups', { token, query: { search: tag, all_available: false } }))).toEqual([
      own.id,
    ]);
  });

  it('filters by search on name and path, case-insensitively, and on full paths', async () => {
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const alpha = await makeGroup(app, user, { path: `${tag}-alpha` });
    const beta = await makeGroup(app, user, { path: `${tag}-beta` });
    const sub = await makeGroup(app, user, { parent: beta, path: 'nested-one' });
    await app.request(`/groups/${alpha.id}`, { method: 'PUT', token, body: { name: `Zeta ${tag}` } });

    expect(ids(await app.request('/groups', { token, query: { search: `${tag}-ALPHA` } }))).toEqual([alpha.id]);
    expect(ids(await app.request('/groups', { token, query: { search: 'zeta' } }))).toEqual([alpha.id]);
    // A subgroup matches a search on its parent's path through its full path.
    expect(ids(await app.request('/groups', { token, query: { search: `${tag}-beta` } })).sort()).toEqual(
      [beta.id, sub.id].sort(),
    );
    // Every word of three characters or more must match.
    expect(ids(await app.request('/groups', { token, query: { search: `zeta ${tag}` } }))).toEqual([alpha.id]);
    expect(ids(await app.request('/groups', { token, query: { search: `zeta nomatch` } }))).toEqual([]);
    // LIKE wildcards are literal characters.
    expect(ids(await app.request('/groups', { token, query: { search: `${tag}%` } }))).toEqual([]);
    expect(ids(await app.request('/groups', { token, query: { search: `${tag}_alpha` } }))).toEqual([]);
  });

  it('matches searches shorter than three characters against whole names and paths only', async () => {
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const group = await makeGroup(app, user, { path: `${tag}-short` });
    await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { name: 'Qz' } });
    const exact = await app.request('/groups', { token, query: { search: 'qz' } });
    expect(ids(exact)).toContain(group.id);
    expect(ids(await app.request('/groups', { token, query: { search: 'q' } }))).not.toContain(group.id);
  });

  it('filters owned groups: direct Owner memberships only', async () => {
    const owner = await makeUser(app);
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const owned = await makeGroup(app, user, { path: `${tag}-owned` });
    // Owned through the parent only: `owned` lists direct Owner memberships.
    const ownedSub = await makeGroup(app, owner, { parent: owned, path: `${tag}-ownedsub` });
    const maintained = await makeGroup(app, owner, { path: `${tag}-maint` });
    await addMember(app, { type: 'group', id: maintained.id }, user, 40);
    const res = await app.request('/groups', { token, query: { search: tag, owned: true } });
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([owned.id]);
    await app.request(`/groups/${owned.id}`, { method: 'PUT', token, body: { visibility: 'public' } });
    // Anonymous callers own nothing, even among public groups.
    expect(ids(await app.request('/groups', { query: { search: tag, owned: true } }))).toEqual([]);
    expect(ids(await app.request('/groups', { query: { search: tag } }))).toEqual([owned.id]);
    const all = await app.request('/groups', { token, query: { search: tag } });
    expect(ids(all).sort()).toEqual([owned.id, ownedSub.id, maintained.id].sort());
  });

  it('filters by min_access_level, counting inherited levels on subgroups', async () => {
    const owner = await makeUser(app);
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const dev = await makeGroup(app, owner, { path: `${tag}-dev`, visibility: 'public' });
    const maint = await makeGroup(app, owner, { path: `${tag}-maint` });
    const maintSub = await makeGroup(app, owner, { parent: maint, path: `${tag}-maintsub` });
    await addMember(app, { type: 'group', id: dev.id }, user, 30);
    await addMember(app, { type: 'group', id: maint.id }, user, 40);
    const res = await app.request('/groups', { token, query: { search: tag, min_access_level: 40 } });
    expect(ids(res).sort()).toEqual([maint.id, maintSub.id].sort());
    const dev30 = await app.request('/groups', { token, query: { search: tag, min_access_level: 30 } });
    expect(ids(dev30).sort()).toEqual([dev.id, maint.id, maintSub.id].sort());
    const bad = await app.request('/groups', { token, query: { min_access_level: 25 } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'min_access_level does not have a valid value' });
    const notInt = await app.request('/groups', { token, query: { min_access_level: 'owner' } });
    expect(notInt.status).toBe(400);
    expect(notInt.body).toEqual({ error: 'min_access_level is invalid' });
  });

  it('filters by visibility, skip_groups (both forms) and top_level_only', async () => {
    const { user, token } = await makeUserWithToken(app);
    const { tag, root, child, grandchild } = await tree(user, 'public');
    const priv = await makeGroup(app, user, { path: `${tag}-priv` });
    const byVisibility = await app.request('/groups', { token, query: { search: tag, visibility: 'private' } });
    expect(ids(byVisibility)).toEqual([priv.id]);
    const commas = await app.request(`/groups?search=${tag}&skip_groups=${root.id},${priv.id}`, { token });
    expect(ids(commas).sort()).toEqual([child.id, grandchild.id].sort());
    const brackets = await app.request('/groups', { token, query: { search: tag, skip_groups: [child.id] } });
    expect(ids(brackets).sort()).toEqual([root.id, grandchild.id, priv.id].sort());
    const top = await app.request('/groups', { token, query: { search: tag, top_level_only: true } });
    expect(ids(top).sort()).toEqual([root.id, priv.id].sort());
    // No group is archived.
    expect(ids(await app.request('/groups', { token, query: { search: tag, archived: true } }))).toEqual([]);
    expect(ids(await app.request('/groups', { token, query: { search: tag, archived: false } }))).toHaveLength(4);
    const bad = await app.request('/groups', { token, query: { visibility: 'secret' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'visibility does not have a valid value' });
  });

  it('orders by name ascending by default, ties broken by id ascending', async () => {
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const b = await makeGroup(app, user, { path: `${tag}-a1` });
    const a = await makeGroup(app, user, { path: `${tag}-a2` });
    const same1 = await makeGroup(app, user, { path: `${tag}-a3` });
    const same2 = await makeGroup(app, user, { path: `${tag}-a4` });
    for (const [group, name] of [
      [b, `B ${tag}`],
      [a, `a ${tag}`],
      [same1, `C ${tag}`],
      [same2, `C ${tag}`],
    ] as const) {
      expect((await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { name } })).status).toBe(200);
    }
    const byName = await app.request('/groups', { token, query: { search: tag } });
    expect(ids(byName)).toEqual([a.id, b.id, same1.id, same2.id]);
    const desc = await app.request('/groups', { token, query: { search: tag, sort: 'desc' } });
    expect(ids(desc)).toEqual([same1.id, same2.id, b.id, a.id]);
    const byPath = await app.request('/groups', { token, query: { search: tag, order_by: 'path', sort: 'desc' } });
    expect(ids(byPath)).toEqual([same2.id, same1.id, a.id, b.id]);
    const byId = await app.request('/groups', { token, query: { search: tag, order_by: 'id' } });
    expect(ids(byId)).toEqual([b.id, a.id, same1.id, same2.id]);
    const similarity = await app.request('/groups', { token, query: { search: tag, order_by: 'similarity' } });
    expect(similarity.status).toBe(200);
    expect(ids(similarity).sort()).toEqual([a.id, b.id, same1.id, same2.id].sort());
  });

  it('rejects unknown order_by and sort values', async () => {
    const { token } = await makeUserWithToken(app);
    const res = await app.request('/groups', { token, query: { order_by: 'created_at' } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'order_by does not have a valid value' });
    const sort = await app.request('/groups', { query: { sort: 'up' } });
    expect(sort.status).toBe(400);
    expect(sort.body).toEqual({ error: 'sort does not have a valid value' });
  });

  it('paginates with GitLab headers and Link', async () => {
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const groups: Namespace[] = [];
    for (let i = 0; i < 5; i++) groups.push(await makeGroup(app, user, { path: `${tag}-p${i}` }));
    const res = await app.request('/groups', { token, query: { search: tag, per_page: 2, page: 3 } });
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([groups[4]?.id]);
    expect(res.headers.get('x-total')).toBe('5');
    expect(res.headers.get('x-total-pages')).toBe('3');
    expect(res.headers.get('x-page')).toBe('3');
    expect(res.headers.get('x-per-page')).toBe('2');
    expect(res.headers.get('x-next-page')).toBe('');
    expect(res.headers.get('x-prev-page')).toBe('2');
    const links = (res.headers.get('link') ?? '').split(', ').map((part) => {
      const [, url, rel] = /^<([^>]+)>; rel="(\w+)"$/.exec(part) ?? [];
      const parsed = new URL(url as string);
      return {
        rel,
        base: `${parsed.origin}${parsed.pathname}`,
        page: parsed.searchParams.get('page'),
        perPage: parsed.searchParams.get('per_page'),
        search: parsed.searchParams.get('search'),
      };
    });
    expect(links).toEqual(
      [
        ['prev', '2'],
        ['first', '1'],
        ['last', '3'],
      ].map(([rel, page]) => ({ rel, base: `${app.baseUrl}/api/v4/groups`, page, perPage: '2', search: tag })),
    );
    const first = await app.request('/groups', { token, query: { search: tag, per_page: 2 } });
    expect(ids(first)).toEqual([groups[0]?.id, groups[1]?.id]);
    expect(first.headers.get('x-next-page')).toBe('2');
    expect(first.headers.get('x-prev-page')).toBe('');
  });

  it('caps anonymous offsets as GitLab does for keyset-capable lists', async () => {
    const res = await app.request('/groups', { query: { page: 3000, per_page: 25 } });
    expect(res.status).toBe(405);
    expect(res.body).toEqual({
      error:
        'Offset pagination has a maximum allowed offset of 50000 for requests that return objects of type Group. Remaining records can be retrieved using keyset pagination.',
    });
    const { token } = await makeUserWithToken(app);
    expect((await app.request('/groups', { token, query: { page: 3000, per_page: 25 } })).status).toBe(200);
  });

  it('answers odd input with 400, never 500', async () => {
    const { token } = await makeUserWithToken(app);
    expect((await app.request('/groups?search=a%00b', { token })).status).toBe(400);
    for (const search of ['😀 ünïcödé', 'x'.repeat(2_000), "'; DROP TABLE namespaces; --", '\\', '"quoted phrase"']) {
      const res = await app.request('/groups', { token, query: { search } });
      expect(res.status, search.slice(0, 20)).toBe(200);
    }
    // Ids past the database's integer range name no group, and are no error.
    expect((await app.request('/groups?skip_groups=99999999999,-4', { token })).status).toBe(200);
    const stats = await app.request('/groups', { token, query: { statistics: true, all_available: true } });
    expect(stats.status).toBe(200);
    for (const group of stats.body) expect(group).not.toHaveProperty('statistics');
    const huge = await app.request('/groups?skip_groups=99999999999999999999', { token });
    expect(huge.status).toBe(400);
    expect(huge.body).toEqual({ error: 'skip_groups is invalid' });
    expect((await app.request('/groups', { token, query: { skip_groups: [2147483647, 1] } })).status).toBe(200);
    const page = await app.request('/groups', { token, query: { page: 0 } });
    expect(page.status).toBe(400);
  });
});

describe('GET /groups/:id', () => {
  it('finds a group by id and by URL-encoded full path (any case)', async () => {
    const owner = await makeUser(app);
    const { root, child } = await tree(owner, 'public');
    const byId = await app.request(`/groups/${child.id}`);
    expect(byId.status).toBe(200);
    expect(byId.body.id).toBe(child.id);
    const byPath = await app.request(`/groups/${enc(child.full_path)}`);
    expect(byPath.status).toBe(200);
    expect(byPath.body.id).toBe(child.id);
    expect((await app.request(`/groups/${enc(child.full_path.toUpperCase())}`)).body.id).toBe(child.id);
    expect((await app.request(`/groups/${root.path}`)).body.id).toBe(root.id);
    // An unencoded slash does not match the route at all.
    const raw = await app.request(`/groups/${child.full_path}`);
    expect(raw.status).toBe(404);
    expect(raw.body).toEqual({ error: '404 Not Found' });
  });

  it('answers GroupDetail with every field', async () => {
    const { user: owner, token } = await makeUserWithToken(app);
    const tag = uniq();
    const root = await makeGroup(app, owner, { visibility: 'public', path: `${tag}-parent` });
    const child = await makeGroup(app, owner, { visibility: 'public', parent: root, path: `${tag}-child` });
    await app.request(`/groups/${root.id}`, { method: 'PUT', token, body: { name: 'Parent' } });
    await app.request(`/groups/${child.id}`, { method: 'PUT', token, body: { name: 'Child' } });
    const res = await app.request(`/groups/${child.id}`, { token });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual([
      ...GROUP_KEYS,
      'shared_with_groups',
      'runners_token',
      'projects',
      'shared_projects',
    ]);
    expect(res.body).toMatchObject({
      id: child.id,
      web_url: `${app.baseUrl}/groups/${tag}-parent/${tag}-child`,
      name: 'Child',
      path: `${tag}-child`,
      description: '',
      visibility: 'public',
      share_with_group_lock: false,
      require_two_factor_authentication: false,
      two_factor_grace_period: 48,
      subgroup_creation_level: 'maintainer',
      emails_disabled: false,
      emails_enabled: true,
      lfs_enabled: true,
      archived: false,
      default_branch: null,
      avatar_url: null,
      request_access_enabled: true,
      full_name: 'Parent / Child',
      full_path: `${tag}-parent/${tag}-child`,
      created_at: child.created_at.toISOString(),
      parent_id: root.id,
      shared_runners_setting: 'enabled',
      marked_for_deletion_on: null,
      shared_with_groups: [],
      projects: [],
      shared_projects: [],
    });
    const top = await app.request(`/groups/${root.id}`, { token });
    expect(Object.keys(top.body)).toEqual([
      ...GROUP_KEYS,
      'shared_with_groups',
      'runners_token',
      'prevent_sharing_groups_outside_hierarchy',
      'projects',
      'shared_projects',
    ]);
    expect(top.body.full_name).toBe('Parent');
    expect(top.body.prevent_sharing_groups_outside_hierarchy).toBe(false);
    const without = await app.request(`/groups/${root.id}`, { token, query: { with_projects: false } });
    expect(without.body).not.toHaveProperty('projects');
    expect(without.body).not.toHaveProperty('shared_projects');
  });

  it('hides private groups from anonymous callers and non-members with 404', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'private' });
    const internal = await makeGroup(app, owner, { visibility: 'internal' });
    const { token } = await makeUserWithToken(app);
    for (const t of [undefined, token]) {
      for (const id of [String(group.id), group.full_path]) {
        const res = await app.request(`/groups/${id}`, { token: t });
        expect(res.status).toBe(404);
        expect(res.body).toEqual({ message: '404 Group Not Found' });
      }
    }
    expect((await app.request(`/groups/${internal.id}`)).status).toBe(404);
    expect((await app.request(`/groups/${internal.id}`, { token })).status).toBe(200);
    const external = await makeUserWithToken(app, { external: true });
    expect((await app.request(`/groups/${internal.id}`, { token: external.token })).status).toBe(404);
  });

  it('shows a private group to every member role and administrators only', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'private' });
    for (const p of await makePersonas(app, { type: 'group', id: group.id })) {
      const res = await app.request(`/groups/${group.id}`, { token: p.token });
      const visible = p.name !== 'anonymous' && p.name !== 'non-member';
      expect(res.status, p.name).toBe(visible ? 200 : 404);
      if (visible) expect(res.body.id).toBe(group.id);
    }
  });

  it('shows ancestors to members of a subgroup or of a project inside, three levels deep', async () => {
    const owner = await makeUser(app);
    const { root, child, grandchild } = await tree(owner);
    const sibling = await makeGroup(app, owner, { parent: root });
    const member = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: grandchild.id }, member.user, 10);
    for (const group of [root, child, grandchild]) {
      const res = await app.request(`/groups/${group.id}`, { token: member.token });
      expect(res.status, group.full_path).toBe(200);
    }
    expect((await app.request(`/groups/${sibling.id}`, { token: member.token })).status).toBe(404);

    const project = await makeProject(app, owner, { namespace: grandchild });
    const projectMember = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: project.id }, projectMember.user, 20);
    const rootSeen = await app.request(`/groups/${root.id}`, { token: projectMember.token });
    expect(rootSeen.status).toBe(200);
    expect(rootSeen.body.full_name).toBe(root.name);
    expect((await app.request(`/groups/${sibling.id}`, { token: projectMember.token })).status).toBe(404);
  });

  it('shows an internal parent to an external member of a subgroup, as the list does', async () => {
    const owner = await makeUser(app);
    const tag = uniq();
    const parent = await makeGroup(app, owner, { visibility: 'internal', path: `${tag}-parent` });
    const sub = await makeGroup(app, owner, { visibility: 'internal', parent, path: `${tag}-sub` });
    const external = await makeUserWithToken(app, { external: true });
    await addMember(app, { type: 'group', id: sub.id }, external.user, 30);
    expect((await app.request(`/groups/${parent.id}`, { token: external.token })).status).toBe(200);
    const list = await app.request('/groups', { token: external.token, query: { search: tag } });
    expect(ids(list).sort()).toEqual([parent.id, sub.id].sort());
  });

  it('lists the projects the caller may see, newest first', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const pub = await makeProject(app, owner, { namespace: group, visibility: 'public' });
    const int = await makeProject(app, owner, { namespace: group, visibility: 'internal' });
    const priv = await makeProject(app, owner, { namespace: group, visibility: 'private' });
    const sub = await makeGroup(app, owner, { visibility: 'public', parent: group });
    await makeProject(app, owner, { namespace: sub, visibility: 'public' });
    const projectIds = (res: TestResponse) => (res.body.projects as { id: number }[]).map((p) => p.id);

    expect(projectIds(await app.request(`/groups/${group.id}`))).toEqual([pub.id]);
    const { token } = await makeUserWithToken(app);
    expect(projectIds(await app.request(`/groups/${group.id}`, { token }))).toEqual([int.id, pub.id]);
    const member = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: priv.id }, member.user, 10);
    expect(projectIds(await app.request(`/groups/${group.id}`, { token: member.token }))).toEqual([
      priv.id,
      int.id,
      pub.id,
    ]);
    const full = await app.request(`/groups/${group.id}`, { token: member.token });
    expect(full.body.projects[0]).toMatchObject({
      id: priv.id,
      path_with_namespace: priv.full_path,
      namespace: { id: group.id, kind: 'group', full_path: group.full_path },
    });
    expect(full.body.projects[0]).not.toHaveProperty('permissions');
  });

  it('answers unknown and malformed ids with 404 or 400, never 500', async () => {
    for (const id of ['0', '-1', '99999999999999999999', '2147483648', 'no-such-group', 'a%2Fb%2Fc', '%C3%A9t%C3%A9']) {
      const res = await app.request(`/groups/${id}`);
      expect(res.status, id).toBe(404);
      expect(res.body, id).toEqual({ message: '404 Group Not Found' });
    }
    expect((await app.request(`/groups/${'x'.repeat(5000)}`)).status).toBe(404);
    const nul = await app.request('/groups/a%00b');
    expect(nul.status).toBe(400);
    expect(nul.body).toEqual({ message: '400 Bad request' });
  });

  it('does not answer for a user namespace', async () => {
    const { user, token } = await makeUserWithToken(app);
    const res = await app.request(`/groups/${user.username}`, { token });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: '404 Group Not Found' });
  });
});

describe('POST /groups', () => {
  it('needs authentication', async () => {
    const res = await app.request('/groups', { method: 'POST', body: { name: 'x', path: 'xyz' } });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: '401 Unauthorized' });
  });

  it('creates a top-level group whose creator becomes Owner', async () => {
    const { user, token } = await makeUserWithToken(app);
    const tag = uniq();
    const res = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: `Team ${tag}`, path: `${tag}-team`, description: 'Our team', request_access_enabled: false },
    });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body)).toEqual([
      ...GROUP_KEYS,
      'shared_with_groups',
      'prevent_sharing_groups_outside_hierarchy',
    ]);
    expect(res.body).toMatchObject({
      name: `Team ${tag}`,
      path: `${tag}-team`,
      full_path: `${tag}-team`,
      full_name: `Team ${tag}`,
      description: 'Our team',
      visibility: 'private',
      request_access_enabled: false,
      parent_id: null,
      web_url: `${app.baseUrl}/groups/${tag}-team`,
    });
    const member = await app.deps.db
      .selectFrom('members')
      .selectAll()
      .where('source_type', '=', 'group')
      .where('source_id', '=', res.body.id)
      .execute();
    expect(member.map((m) => [m.user_id, m.access_level])).toEqual([[user.id, 50]]);
    expect(ids(await app.request('/groups', { token, query: { owned: true, search: tag } }))).toEqual([res.body.id]);
  });

  it('maps emails_disabled onto emails_enabled and keeps the other settings', async () => {
    const { token } = await makeUserWithToken(app);
    const tag = uniq();
    const res = await app.request('/groups', {
      method: 'POST',
      token,
      body: new URLSearchParams({
        name: tag,
        path: tag,
        emails_disabled: 'true',
        visibility: 'internal',
        project_creation_level: 'maintainer',
        subgroup_creation_level: 'owner',
        default_branch: 'trunk',
        two_factor_grace_period: '12',
      }),
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      emails_disabled: true,
      emails_enabled: false,
      visibility: 'internal',
      project_creation_level: 'maintainer',
      subgroup_creation_level: 'owner',
      default_branch: 'trunk',
      two_factor_grace_period: 12,
    });
  });

  it('refuses users who may not create groups with 403', async () => {
    const { token } = await makeUserWithToken(app, { can_create_group: false });
    const res = await app.request('/groups', { method: 'POST', token, body: { name: 'nope', path: uniq() } });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: '403 Forbidden' });
  });

  it('lets a user who may not create top-level groups create subgroups where allowed', async () => {
    const owner = await makeUser(app);
    const parent = await makeGroup(app, owner);
    const { user, token } = await makeUserWithToken(app, { can_create_group: false });
    await addMember(app, { type: 'group', id: parent.id }, user, 40);
    const res = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'sub', path: 'sub-group', parent_id: parent.id },
    });
    expect(res.status).toBe(201);
    expect(res.body.full_path).toBe(`${parent.full_path}/sub-group`);
  });

  it('creates subgroups by role: Maintainer and up by default', async () => {
    const owner = await makeUser(app);
    const parent = await makeGroup(app, owner, { visibility: 'private' });
    const personas = await makePersonas(app, { type: 'group', id: parent.id });
    const expected: Record<string, number> = {
      anonymous: 401,
      'non-member': 404,
      guest: 403,
      reporter: 403,
      developer: 403,
      maintainer: 201,
      owner: 201,
      admin: 201,
    };
    for (const p of personas) {
      const path = `${p.name.replace(/[^a-z]/g, '')}-${uniq()}`;
      const res = await app.request('/groups', {
        method: 'POST',
        token: p.token,
        body: { name: path, path, parent_id: parent.id },
      });
      expect(res.status, p.name).toBe(expected[p.name]);
      if (res.status === 404) expect(res.body).toEqual({ message: '404 Group Not Found' });
      if (res.status === 403) expect(res.body).toEqual({ message: '403 Forbidden' });
      if (res.status === 201) {
        expect(res.body.parent_id).toBe(parent.id);
        expect(res.body.full_path).toBe(`${parent.full_path}/${path}`);
        const member = await app.deps.db
          .selectFrom('members')
          .select(['user_id', 'access_level'])
          .where('source_type', '=', 'group')
          .where('source_id', '=', res.body.id)
          .execute();
        expect(member).toEqual([{ user_id: p.user?.id, access_level: 50 }]);
      }
    }
  });

  it('lets only owners create subgroups when subgroup_creation_level is owner', async () => {
    const { user: owner, token: ownerToken } = await makeUserWithToken(app);
    const parent = await makeGroup(app, owner, { visibility: 'public' });
    await app.request(`/groups/${parent.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { subgroup_creation_level: 'owner' },
    });
    const maintainer = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: parent.id }, maintainer.user, 40);
    const body = { name: 'x', path: uniq(), parent_id: parent.id };
    expect((await app.request('/groups', { method: 'POST', token: maintainer.token, body })).status).toBe(403);
    // A non-member can see the public parent, so the answer is 403 rather than 404.
    const outsider = await makeUserWithToken(app);
    expect((await app.request('/groups', { method: 'POST', token: outsider.token, body })).status).toBe(403);
    expect((await app.request('/groups', { method: 'POST', token: ownerToken, body })).status).toBe(201);
  });

  it('answers 404 for a parent that does not exist', async () => {
    const { token } = await makeUserWithToken(app);
    for (const parentId of [2147483647, 99999999999]) {
      const res = await app.request('/groups', {
        method: 'POST',
        token,
        body: { name: 'x', path: uniq(), parent_id: parentId },
      });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: '404 Group Not Found' });
    }
    const bad = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'x', path: 'xyz', parent_id: 'abc' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'parent_id is invalid' });
  });

  it('gives subgroups the default (private) visibility, not the parent’s', async () => {
    const { user, token } = await makeUserWithToken(app);
    const parent = await makeGroup(app, user, { visibility: 'public' });
    const res = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'sub', path: 'defaults', parent_id: parent.id },
    });
    expect(res.status).toBe(201);
    expect(res.body.visibility).toBe('private');
  });

  it('refuses a subgroup more visible than its parent', async () => {
    const { user, token } = await makeUserWithToken(app);
    const parent = await makeGroup(app, user, { visibility: 'internal' });
    const res = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'sub', path: 'loud', parent_id: parent.id, visibility: 'public' },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      message:
        'Failed to save group {:visibility_level=>["public is not allowed since the parent group has a internal visibility."]}',
    });
  });

  it('refuses a path already taken by a group, a user or a project', async () => {
    const { user, token } = await makeUserWithToken(app);
    const existing = await makeGroup(app, user);
    const project = await makeProject(app, user, { namespace: existing, path: 'taken-project' });
    const taken = 'Failed to save group {:path=>["has already been taken"]}';
    for (const [path, parentId] of [
      [existing.path, undefined],
      [existing.path.toUpperCase(), undefined],
      [user.username, undefined],
      [project.path, existing.id],
    ] as const) {
      const res = await app.request('/groups', {
        method: 'POST',
        token,
        body: { name: 'Duplicate', path, parent_id: parentId },
      });
      expect(res.status, path).toBe(400);
      expect(res.body, path).toEqual({ message: taken });
    }
  });

  it('refuses a subgroup name already used in the same parent', async () => {
    const { user, token } = await makeUserWithToken(app);
    const parent = await makeGroup(app, user);
    const first = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'Same Name', path: 'first-sub', parent_id: parent.id },
    });
    expect(first.status).toBe(201);
    const second = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'Same Name', path: 'second-sub', parent_id: parent.id },
    });
    expect(second.status).toBe(400);
    expect(second.body).toEqual({ message: 'Failed to save group {:name=>["has already been taken"]}' });
    // Top-level groups may share names.
    const tag = uniq();
    for (const path of [`${tag}-one`, `${tag}-two`]) {
      expect((await app.request('/groups', { method: 'POST', token, body: { name: tag, path } })).status).toBe(201);
    }
  });

  it('validates paths and names as GitLab does', async () => {
    const { token } = await makeUserWithToken(app);
    const oci =
      "can only include non-accented letters, digits, '_', '-' and '.'. It must not start with '-', '_', or '.', nor end with '-', '_', '.', '.git', or '.atom'.";
    const format =
      "can contain only letters, digits, '_', '-' and '.'. Cannot start with '-' or end in '.', '.git' or '.atom'.";
    const cases: [string, string[]][] = [
      ['bad path', [oci, format]],
      ['-dash', [oci, format]],
      ['trailing-', [oci]],
      ['double--dash', [oci]],
      ['_under', [oci]],
      ['ends.git', [format]],
      ['x', ['is too short (minimum is 2 characters)']],
      ['admin', ['admin is a reserved name']],
      ['p'.repeat(256), ['is too long (maximum is 255 characters)']],
      ['p'.repeat(300), ['is too long (maximum is 255 characters)', format]],
    ];
    for (const [path, messages] of cases) {
      const res = await app.request('/groups', { method: 'POST', token, body: { name: 'Valid', path } });
      expect(res.status, path).toBe(400);
      const inspected = messages.map((m) => JSON.stringify(m)).join(', ');
      expect(res.body, path).toEqual({ message: `Failed to save group {:path=>[${inspected}]}` });
    }
    const script = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: "<SCRIPT>alert('ATTACKED!')</SCRIPT>", path: uniq() },
    });
    expect(script.status).toBe(400);
    expect(script.body.message).toMatch(/^Failed to save group \{:name=>\[/);
    const long = await app.request('/groups', { method: 'POST', token, body: { name: 'é'.repeat(256), path: uniq() } });
    expect(long.body).toEqual({ message: 'Failed to save group {:name=>["is too long (maximum is 255 characters)"]}' });
    const unicode = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'Équipe ünïcode (東京) 😀', path: uniq() },
    });
    expect(unicode.status).toBe(201);
    expect(unicode.body.name).toBe('Équipe ünïcode (東京) 😀');
    const description = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'd', path: uniq(), description: 'd'.repeat(256) },
    });
    expect(description.body).toEqual({
      message: 'Failed to save group {:description=>["is too long (maximum is 255 characters)"]}',
    });
    const nul = await app.request('/groups', { method: 'POST', token, body: { name: 'n', path: 'a\u0000b' } });
    expect(nul.status).toBe(400);
  });

  it('lets reserved words be subgroup paths', async () => {
    const { user, token } = await makeUserWithToken(app);
    const parent = await makeGroup(app, user);
    const res = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'admin', path: 'admin', parent_id: parent.id },
    });
    expect(res.status).toBe(201);
  });

  it('answers missing parameters in Grape’s shape', async () => {
    const { token } = await makeUserWithToken(app);
    const none = await app.request('/groups', { method: 'POST', token, body: {} });
    expect(none.status).toBe(400);
    expect(none.body).toEqual({ error: 'name is missing, path is missing' });
    const noPath = await app.request('/groups', { method: 'POST', token, body: { name: 'n' } });
    expect(noPath.body).toEqual({ error: 'path is missing' });
    const badVisibility = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'n', path: 'np', visibility: 'secret' },
    });
    expect(badVisibility.body).toEqual({ error: 'visibility does not have a valid value' });
  });

  it('refuses nesting deeper than twenty ancestors', async () => {
    const { user, token } = await makeUserWithToken(app);
    let parent = await makeGroup(app, user);
    for (let depth = 2; depth <= 20; depth++) parent = await makeGroup(app, user, { parent, path: `level${depth}` });
    const deepest = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'deepest', path: 'level21', parent_id: parent.id },
    });
    expect(deepest.status).toBe(201);
    const res = await app.request('/groups', {
      method: 'POST',
      token,
      body: { name: 'deep', path: 'level22', parent_id: deepest.body.id },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: 'Failed to save group {:parent_id=>["has too deep level of nesting"]}' });
  });
});

describe('PUT /groups/:id', () => {
  it('lets only owners and administrators update', async () => {
    const owner = await makeUser(app);
    for (const visibility of ['private', 'public'] as const) {
      const group = await makeGroup(app, owner, { visibility });
      const personas = await makePersonas(app, { type: 'group', id: group.id });
      const expected: Record<string, number> = {
        anonymous: 401,
        'non-member': visibility === 'private' ? 404 : 403,
        guest: 403,
        reporter: 403,
        developer: 403,
        maintainer: 403,
        owner: 200,
        admin: 200,
      };
      for (const p of personas) {
        const res = await app.request(`/groups/${group.id}`, {
          method: 'PUT',
          token: p.token,
          body: { description: `by ${p.name}` },
        });
        expect(res.status, `${visibility} ${p.name}`).toBe(expected[p.name]);
        if (res.status === 200) expect(res.body.description).toBe(`by ${p.name}`);
        if (res.status === 403) expect(res.body).toEqual({ message: '403 Forbidden' });
      }
    }
  });

  it('answers GroupDetail with the visible projects', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user, { visibility: 'public' });
    const project = await makeProject(app, user, { namespace: group });
    const res = await app.request(`/groups/${enc(group.full_path)}`, {
      method: 'PUT',
      token,
      body: { name: 'Renamed Group', emails_disabled: true, lfs_enabled: false, mentions_disabled: true },
    });
    expect(res.status).toBe(200);
    // An owner's answer carries the group's runner registration token, as GitLab's GroupDetail does.
    expect(Object.keys(res.body)).toEqual([
      ...GROUP_KEYS,
      'shared_with_groups',
      'runners_token',
      'prevent_sharing_groups_outside_hierarchy',
      'projects',
      'shared_projects',
    ]);
    expect(res.body).toMatchObject({
      name: 'Renamed Group',
      full_name: 'Renamed Group',
      emails_disabled: true,
      emails_enabled: false,
      lfs_enabled: false,
      mentions_disabled: true,
    });
    expect(res.body.projects.map((p: { id: number }) => p.id)).toEqual([project.id]);
    const again = await app.request(`/groups/${group.id}`, { token });
    expect(again.body.name).toBe('Renamed Group');
  });

  it('moves the full paths of subgroups and projects when the path changes', async () => {
    const { user, token } = await makeUserWithToken(app);
    const { tag, root, child, grandchild } = await tree(user);
    const rootProject = await makeProject(app, user, { namespace: root, path: 'top-project' });
    const deepProject = await makeProject(app, user, { namespace: grandchild, path: 'deep-project' });
    const res = await app.request(`/groups/${root.id}`, { method: 'PUT', token, body: { path: `${tag}-moved` } });
    expect(res.status).toBe(200);
    expect(res.body.full_path).toBe(`${tag}-moved`);
    expect(res.body.web_url).toBe(`${app.baseUrl}/groups/${tag}-moved`);
    expect(res.body.projects[0].path_with_namespace).toBe(`${tag}-moved/top-project`);

    const newDeep = `${tag}-moved/${child.path}/${grandchild.path}/deep-project`;
    const moved = await app.request(`/projects/${enc(newDeep)}`, { token });
    expect(moved.status).toBe(200);
    expect(moved.body.id).toBe(deepProject.id);
    expect(moved.body.namespace.full_path).toBe(`${tag}-moved/${child.path}/${grandchild.path}`);
    // The old path sends GET on to the project (its redirect route, test/api/redirect-routes.test.ts).
    const old = await app.request(`/projects/${enc(deepProject.full_path)}`, { token });
    expect(old.status).toBe(301);
    expect(old.headers.get('location')).toBe(`${app.baseUrl}/api/v4/projects/${deepProject.id}`);
    expect((await app.request(`/projects/${enc(`${tag}-moved/top-project`)}`, { token })).body.id).toBe(rootProject.id);
    const sub = await app.request(`/groups/${enc(`${tag}-moved/${child.path}`)}`, { token });
    expect(sub.status).toBe(200);
    expect(sub.body.id).toBe(child.id);
    expect((await app.request(`/groups/${enc(child.full_path)}`, { token })).status).toBe(404);
    // The repository stays where it is: its location depends on the id only.
    const repo = app.deps.storages.repositoryPath(deepProject.repository_storage, deepProject.id);
    expect((await fs.stat(repo)).isDirectory()).toBe(true);
  });

  it('renames a subgroup within its parent', async () => {
    const { user, token } = await makeUserWithToken(app);
    const { root, child, grandchild } = await tree(user);
    const res = await app.request(`/groups/${child.id}`, { method: 'PUT', token, body: { path: 'renamed-child' } });
    expect(res.status).toBe(200);
    expect(res.body.full_path).toBe(`${root.path}/renamed-child`);
    const deep = await app.request(`/groups/${grandchild.id}`, { token });
    expect(deep.body.full_path).toBe(`${root.path}/renamed-child/${grandchild.path}`);
  });

  it('refuses a path taken by another group, user or project', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user);
    const other = await makeGroup(app, user);
    const sub = await makeGroup(app, user, { parent: other });
    await makeProject(app, user, { namespace: other, path: 'a-project' });
    const taken = { message: { path: ['has already been taken'] } };
    for (const path of [other.path, user.username]) {
      const res = await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { path } });
      expect(res.status, path).toBe(400);
      expect(res.body, path).toEqual(taken);
    }
    const clash = await app.request(`/groups/${sub.id}`, { method: 'PUT', token, body: { path: 'a-project' } });
    expect(clash.body).toEqual(taken);
    // Keeping one's own path, or changing only its case, is fine.
    expect(
      (await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { path: group.path } })).status,
    ).toBe(200);
    const upper = await app.request(`/groups/${group.id}`, {
      method: 'PUT',
      token,
      body: { path: group.path.toUpperCase() },
    });
    expect(upper.status).toBe(200);
    expect(upper.body.full_path).toBe(group.path.toUpperCase());
  });

  it('validates fields with the model error hash', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user);
    const blank = await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { name: '' } });
    expect(blank.status).toBe(400);
    expect(blank.body).toEqual({
      message: {
        name: [
          "can't be blank",
          "can contain only letters, digits, emoji, '_', '.', dash, space, parenthesis. It must start with letter, digit, emoji or '_'.",
        ],
      },
    });
    const path = await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { path: 'no way' } });
    expect(path.status).toBe(400);
    expect(Object.keys(path.body.message)).toEqual(['path']);
    const level = await app.request(`/groups/${group.id}`, {
      method: 'PUT',
      token,
      body: { project_creation_level: 'everyone' },
    });
    expect(level.body).toEqual({ error: 'project_creation_level does not have a valid value' });
    const grace = await app.request(`/groups/${group.id}`, {
      method: 'PUT',
      token,
      body: { two_factor_grace_period: -1 },
    });
    expect(grace.body).toEqual({ message: { two_factor_grace_period: ['must be greater than or equal to 0'] } });
    const huge = await app.request(`/groups/${group.id}`, {
      method: 'PUT',
      token,
      body: { two_factor_grace_period: 2147483648 },
    });
    expect(huge.status).toBe(400);
    expect(huge.body).toEqual({ message: { two_factor_grace_period: ['must be less than or equal to 2147483647'] } });
    const nul = await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { description: 'a\u0000' } });
    expect(nul.status).toBe(400);
    expect(nul.body).toEqual({ message: '400 Bad request' });
  });

  it('keeps a group at least as visible as its projects and subgroups, and within its parent', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user, { visibility: 'public' });
    const project = await makeProject(app, user, { namespace: group, visibility: 'internal' });
    const withProject = await app.request(`/groups/${group.id}`, {
      method: 'PUT',
      token,
      body: { visibility: 'private' },
    });
    expect(withProject.status).toBe(400);
    expect(withProject.body).toEqual({
      message: {
        visibility_level: ['private is not allowed since this group contains projects with higher visibility.'],
      },
    });
    expect(
      (await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { visibility: 'internal' } })).status,
    ).toBe(200);
    await app.deps.db.updateTable('projects').set({ visibility: 'private' }).where('id', '=', project.id).execute();

    const sub = await makeGroup(app, user, { visibility: 'internal', parent: group });
    const withSub = await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { visibility: 'private' } });
    expect(withSub.body).toEqual({
      message: { visibility_level: ['private is not allowed since there are sub-groups with higher visibility.'] },
    });
    const aboveParent = await app.request(`/groups/${sub.id}`, {
      method: 'PUT',
      token,
      body: { visibility: 'public' },
    });
    expect(aboveParent.body).toEqual({
      message: { visibility_level: ['public is not allowed since the parent group has a internal visibility.'] },
    });
    // Unrelated changes do not trip over the visibility rules.
    expect((await app.request(`/groups/${sub.id}`, { method: 'PUT', token, body: { description: 'ok' } })).status).toBe(
      200,
    );
    expect(
      (await app.request(`/groups/${sub.id}`, { method: 'PUT', token, body: { visibility: 'private' } })).status,
    ).toBe(200);
    const fine = await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { visibility: 'private' } });
    expect(fine.status).toBe(200);
    expect(fine.body.visibility).toBe('private');
  });

  it('treats a null emails_disabled as enabled and an empty default_branch as none', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user);
    await app.request(`/groups/${group.id}`, {
      method: 'PUT',
      token,
      body: { emails_disabled: true, default_branch: 'develop' },
    });
    const res = await app.request(`/groups/${group.id}`, {
      method: 'PUT',
      token,
      body: { emails_disabled: null, default_branch: '' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ emails_enabled: true, emails_disabled: false, default_branch: null });
  });

  it('refuses renaming a subgroup to a sibling’s name', async () => {
    const { user, token } = await makeUserWithToken(app);
    const parent = await makeGroup(app, user);
    const first = await makeGroup(app, user, { parent, path: 'first-one' });
    const second = await makeGroup(app, user, { parent, path: 'second-one' });
    const res = await app.request(`/groups/${second.id}`, { method: 'PUT', token, body: { name: first.name } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: { name: ['has already been taken'] } });
    const same = await app.request(`/groups/${second.id}`, { method: 'PUT', token, body: { name: second.name } });
    expect(same.status).toBe(200);
  });

  it('lets the owner of the root update a grand-child', async () => {
    const owner = await makeUser(app);
    const { root, grandchild } = await tree(owner);
    const rootOwner = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: root.id }, rootOwner.user, 50);
    const res = await app.request(`/groups/${grandchild.id}`, {
      method: 'PUT',
      token: rootOwner.token,
      body: { description: 'from the top' },
    });
    expect(res.status).toBe(200);
    expect(res.body.description).toBe('from the top');
    const rootMaintainer = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: root.id }, rootMaintainer.user, 40);
    const denied = await app.request(`/groups/${grandchild.id}`, {
      method: 'PUT',
      token: rootMaintainer.token,
      body: { description: 'no' },
    });
    expect(denied.status).toBe(403);
  });

  it('answers 404 for an unknown group', async () => {
    const { token } = await makeUserWithToken(app);
    const res = await app.request('/groups/2147483647', { method: 'PUT', token, body: { name: 'x' } });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: '404 Group Not Found' });
  });
});

describe('DELETE /groups/:id', () => {
  it('lets only owners and administrators delete', async () => {
    const owner = await makeUser(app);
    for (const visibility of ['private', 'public'] as const) {
      const groups: Record<string, Namespace> = {};
      const expected: Record<string, number> = {
        anonymous: 401,
        'non-member': visibility === 'private' ? 404 : 403,
        guest: 403,
        reporter: 403,
        developer: 403,
        maintainer: 403,
        owner: 202,
        admin: 202,
      };
      // One group per persona, so each deletion starts from an existing group.
      const personas: Persona[] = [];
      for (const name of Object.keys(expected)) {
        const group = await makeGroup(app, owner, { visibility });
        groups[name] = group;
        const roles = name in ROLES ? [name as Role] : [];
        personas.push(
          persona(await makePersonas(app, { type: 'group', id: group.id }, roles), name as Persona['name']),
        );
      }
      for (const p of personas) {
        const group = groups[p.name] as Namespace;
        const res = await app.request(`/groups/${group.id}`, { method: 'DELETE', token: p.token });
        expect(res.status, `${visibility} ${p.name}`).toBe(expected[p.name]);
        if (res.status === 202) expect(res.body).toEqual({ message: '202 Accepted' });
        const still = await app.deps.db.selectFrom('namespaces').select('id').where('id', '=', group.id).execute();
        expect(still.length, p.name).toBe(res.status === 202 ? 0 : 1);
      }
    }
  });

  it('removes subgroups, projects, memberships and repositories', async () => {
    const { user, token } = await makeUserWithToken(app);
    const { root, child, grandchild } = await tree(user);
    const other = await makeGroup(app, user);
    const projects = [
      await makeProject(app, user, { namespace: root, initializeWithReadme: true }),
      await makeProject(app, user, { namespace: grandchild }),
    ];
    const keep = await makeProject(app, user, { namespace: other });
    const member = await makeUser(app);
    await addMember(app, { type: 'group', id: child.id }, member, 30);
    await addMember(app, { type: 'project', id: projects[1]?.id as number }, member, 30);
    const repos = projects.map((p) => app.deps.storages.repositoryPath(p.repository_storage, p.id));
    for (const repo of repos) expect((await fs.stat(repo)).isDirectory()).toBe(true);

    const res = await app.request(`/groups/${enc(root.full_path)}`, { method: 'DELETE', token });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ message: '202 Accepted' });

    for (const group of [root, child, grandchild]) {
      expect((await app.request(`/groups/${group.id}`, { token })).status).toBe(404);
    }
    for (const project of projects) {
      expect((await app.request(`/projects/${project.id}`, { token })).status).toBe(404);
    }
    for (const repo of repos) await expect(fs.stat(repo)).rejects.toThrow();
    const left = await app.deps.db
      .selectFrom('members')
      .select('id')
      .where((eb) =>
        eb.or([
          eb.and([eb('source_type', '=', 'group'), eb('source_id', 'in', [root.id, child.id, grandchild.id])]),
          eb.and([
            eb('source_type', '=', 'project'),
            eb(
              'source_id',
              'in',
              projects.map((p) => p.id),
            ),
          ]),
        ]),
      )
      .execute();
    expect(left).toEqual([]);
    expect((await app.request(`/projects/${keep.id}`, { token })).status).toBe(200);
    expect((await app.request(`/groups/${other.id}`, { token })).status).toBe(200);
  });

  it('deletes a subgroup and leaves its parent', async () => {
    const { user, token } = await makeUserWithToken(app);
    const { root, child, grandchild } = await tree(user);
    expect((await app.request(`/groups/${child.id}`, { method: 'DELETE', token })).status).toBe(202);
    expect((await app.request(`/groups/${grandchild.id}`, { token })).status).toBe(404);
    expect((await app.request(`/groups/${root.id}`, { token })).status).toBe(200);
  });

  it('honours If-Unmodified-Since', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user);
    const before = new Date(group.updated_at.getTime() - 60_000).toUTCString();
    const stale = await app.request(`/groups/${group.id}`, {
      method: 'DELETE',
      token,
      headers: { 'If-Unmodified-Since': before },
    });
    expect(stale.status).toBe(412);
    expect(stale.body).toEqual({ message: '412 Precondition Failed' });
    const after = new Date(group.updated_at.getTime() + 60_000).toUTCString();
    const ok = await app.request(`/groups/${group.id}`, {
      method: 'DELETE',
      token,
      headers: { 'If-Unmodified-Since': after },
    });
    expect(ok.status).toBe(202);
  });

  it('answers 404 for unknown and invisible groups', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const { token } = await makeUserWithToken(app);
    for (const id of [String(group.id), '2147483647', 'nothing-here']) {
      const res = await app.request(`/groups/${id}`, { method: 'DELETE', token });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: '404 Group Not Found' });
    }
  });
});

describe('GET /groups/:id/subgroups and /descendant_groups', () => {
  async function world() {
    const owner = await makeUser(app);
    const tag = uniq();
    const parent = await makeGroup(app, owner, { visibility: 'public', path: `${tag}-parent` });
    const pubSub = await makeGroup(app, owner, { visibility: 'public', parent, path: `${tag}-pub` });
    const privSub = await makeGroup(app, owner, { visibility: 'private', parent, path: `${tag}-priv` });
    const deep = await makeGroup(app, owner, { visibility: 'public', parent: pubSub, path: `${tag}-deep` });
    return { owner, parent, pubSub, privSub, deep };
  }

  it('shows anonymous callers the public subgroups', async () => {
    const { parent, pubSub, deep } = await world();
    const res = await app.request(`/groups/${parent.id}/subgroups`);
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([pubSub.id]);
    expect(res.body[0].parent_id).toBe(parent.id);
    expect(Object.keys(res.body[0])).toEqual(GROUP_KEYS);
    expect(res.headers.get('x-total')).toBe('1');
    const descendants = await app.request(`/groups/${parent.id}/descendant_groups`);
    expect(ids(descendants).sort()).toEqual([pubSub.id, deep.id].sort());
  });

  it('shows a non-member nothing unless all_available, and members the private ones', async () => {
    const { parent, pubSub, privSub, deep } = await world();
    const outsider = await makeUserWithToken(app);
    expect(ids(await app.request(`/groups/${parent.id}/subgroups`, { token: outsider.token }))).toEqual([]);
    expect(
      ids(
        await app.request(`/groups/${parent.id}/subgroups`, { token: outsider.token, query: { all_available: true } }),
      ),
    ).toEqual([pubSub.id]);
    const member = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: parent.id }, member.user, 10);
    const mine = await app.request(`/groups/${parent.id}/subgroups`, {
      token: member.token,
      query: { order_by: 'id' },
    });
    expect(ids(mine)).toEqual([pubSub.id, privSub.id]);
    const descendants = await app.request(`/groups/${parent.id}/descendant_groups`, {
      token: member.token,
      query: { order_by: 'id' },
    });
    expect(ids(descendants)).toEqual([pubSub.id, privSub.id, deep.id]);
    const { token: adminToken } = await makeUserWithToken(app, { admin: true });
    expect(ids(await app.request(`/groups/${parent.id}/subgroups`, { token: adminToken })).sort()).toEqual(
      [pubSub.id, privSub.id].sort(),
    );
  });

  it('searches subgroups by their own name and path only', async () => {
    const { owner, parent } = await world();
    const named = await makeGroup(app, owner, { visibility: 'public', parent, path: `${parent.path}-sub` });
    await makeGroup(app, owner, { visibility: 'public', parent, path: 'not-matching' });
    const res = await app.request(`/groups/${parent.id}/subgroups`, { query: { search: parent.path } });
    expect(ids(res)).toEqual([named.id]);
  });

  it('answers 404 for a private group the caller cannot see', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const { token } = await makeUserWithToken(app);
    for (const route of ['subgroups', 'descendant_groups', 'projects']) {
      const res = await app.request(`/groups/${group.id}/${route}`, { token });
      expect(res.status, route).toBe(404);
      expect(res.body).toEqual({ message: '404 Group Not Found' });
    }
  });
});

describe('GET /groups/:id/projects', () => {
  it('lists the visible projects, newest first', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const pub = await makeProject(app, owner, { namespace: group, visibility: 'public' });
    const priv = await makeProject(app, owner, { namespace: group, visibility: 'private' });
    const int = await makeProject(app, owner, { namespace: group, visibility: 'internal' });
    const anonymous = await app.request(`/groups/${group.id}/projects`);
    expect(anonymous.status).toBe(200);
    expect(ids(anonymous)).toEqual([pub.id]);
    const { token } = await makeUserWithToken(app);
    expect(ids(await app.request(`/groups/${group.id}/projects`, { token }))).toEqual([int.id, pub.id]);
    const member = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, member.user, 10);
    const all = await app.request(`/groups/${group.id}/projects`, { token: member.token });
    expect(ids(all)).toEqual([int.id, priv.id, pub.id]);
    expect(all.headers.get('x-total')).toBe('3');
    expect(all.body[0]).not.toHaveProperty('permissions');
    expect(
      ids(await app.request(`/groups/${group.id}/projects`, { token: member.token, query: { sort: 'asc' } })),
    ).toEqual([pub.id, priv.id, int.id]);
  });

  it('gives the basic entity with simple=true', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const project = await makeProject(app, owner, { namespace: group, visibility: 'public' });
    const res = await app.request(`/groups/${group.id}/projects`, { query: { simple: true } });
    expect(res.status).toBe(200);
    expect(res.body[0].id).toBe(project.id);
    expect(res.body[0]).not.toHaveProperty('_links');
    expect(res.body[0]).toHaveProperty('path_with_namespace', project.full_path);
    const full = await app.request(`/groups/${group.id}/projects`);
    expect(full.body[0]).toHaveProperty('_links');
  });

  it('includes subgroups’ and ancestors’ projects when asked', async () => {
    const { user, token } = await makeUserWithToken(app);
    const { root, child, grandchild } = await tree(user);
    const inRoot = await makeProject(app, user, { namespace: root });
    const inChild = await makeProject(app, user, { namespace: child });
    const inGrand = await makeProject(app, user, { namespace: grandchild });
    expect(ids(await app.request(`/groups/${root.id}/projects`, { token }))).toEqual([inRoot.id]);
    expect(
      ids(await app.request(`/groups/${root.id}/projects`, { token, query: { include_subgroups: true } })),
    ).toEqual([inGrand.id, inChild.id, inRoot.id]);
    expect(
      ids(await app.request(`/groups/${grandchild.id}/projects`, { token, query: { include_ancestor_groups: true } })),
    ).toEqual([inGrand.id, inChild.id, inRoot.id]);
  });

  it('filters by search, visibility, archived, active and min_access_level', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const alpha = await makeProject(app, owner, { namespace: group, visibility: 'public', path: 'alpha-project' });
    const beta = await makeProject(app, owner, { namespace: group, visibility: 'private', path: 'beta-project' });
    const old = await makeProject(app, owner, { namespace: group, visibility: 'public', path: 'old' });
    await app.deps.db.updateTable('projects').set({ archived: true }).where('id', '=', old.id).execute();
    const { user, token } = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, user, 10);
    await addMember(app, { type: 'project', id: beta.id }, user, 30);
    const q = (query: Record<string, string | number | boolean>) =>
      app.request(`/groups/${group.id}/projects`, { token, query });
    expect(ids(await q({ search: 'alpha' }))).toEqual([alpha.id]);
    expect(ids(await q({ visibility: 'private' }))).toEqual([beta.id]);
    expect(ids(await q({ archived: true }))).toEqual([old.id]);
    expect(ids(await q({ archived: false }))).toEqual([beta.id, alpha.id]);
    expect(ids(await q({ active: true }))).toEqual([beta.id, alpha.id]);
    expect(ids(await q({ active: false }))).toEqual([old.id]);
    expect(ids(await q({ min_access_level: 30 }))).toEqual([beta.id]);
    expect(ids(await q({ starred: true }))).toEqual([]);
    expect(ids(await q({ order_by: 'name', sort: 'asc' }))).toEqual([alpha.id, beta.id, old.id]);
    expect(ids(await q({ order_by: 'similarity' }))).toEqual([alpha.id, beta.id, old.id]);
    const bad = await q({ order_by: 'storage_size' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'order_by does not have a valid value' });
    const badLevel = await q({ min_access_level: 35 });
    expect(badLevel.body).toEqual({ error: 'min_access_level does not have a valid value' });
  });
});

describe('membership expiry', () => {
  it('grants nothing from a membership that expires today or earlier', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const sub = await makeGroup(app, owner, { parent: group });
    const todayMember = await makeUserWithToken(app);
    const pastMember = await makeUserWithToken(app);
    const futureMember = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, todayMember.user, 50, today());
    await addMember(app, { type: 'group', id: group.id }, pastMember.user, 50, addDays(today(), -3));
    await addMember(app, { type: 'group', id: group.id }, futureMember.user, 50, addDays(today(), 1));
    for (const expired of [todayMember, pastMember]) {
      expect((await app.request(`/groups/${group.id}`, { token: expired.token })).status).toBe(404);
      expect((await app.request(`/groups/${sub.id}`, { token: expired.token })).status).toBe(404);
      expect(ids(await app.request('/groups', { token: expired.token, query: { search: group.path } }))).toEqual([]);
      const put = await app.request(`/groups/${group.id}`, {
        method: 'PUT',
        token: expired.token,
        body: { name: 'x' },
      });
      expect(put.status).toBe(404);
    }
    expect((await app.request(`/groups/${sub.id}`, { token: futureMember.token })).status).toBe(200);
    const put = await app.request(`/groups/${sub.id}`, {
      method: 'PUT',
      token: futureMember.token,
      body: { description: 'still owner' },
    });
    expect(put.status).toBe(200);
    // The next day the membership has run out.
    app.clock.advance(24 * 60 * 60 * 1000);
    try {
      expect((await app.request(`/groups/${group.id}`, { token: futureMember.token })).status).toBe(404);
    } finally {
      app.clock.advance(-24 * 60 * 60 * 1000);
    }
  });

  it('ignores expired memberships of a public group too', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const expired = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, expired.user, 50, today());
    const put = await app.request(`/groups/${group.id}`, { method: 'PUT', token: expired.token, body: { name: 'x' } });
    expect(put.status).toBe(403);
    const del = await app.request(`/groups/${group.id}`, { method: 'DELETE', token: expired.token });
    expect(del.status).toBe(403);
  });
});

describe('tokens and scopes', () => {
  it('lets read_api tokens read but not write', async () => {
    const user = await makeUser(app);
    const group = await makeGroup(app, user);
    const token = await makeToken(app, user, ['read_api']);
    expect((await app.request(`/groups/${group.id}`, { token })).status).toBe(200);
    const res = await app.request(`/groups/${group.id}`, { method: 'PUT', token, body: { name: 'x' } });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('insufficient_scope');
  });
});
