import { AccessLevel, Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncDirectory } from '../../src/services/ldap.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeGroup, makeProject, makeToken, makeUser } from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const client = async (user: Parameters<typeof makeToken>[1]) =>
  new Gitlab({ host: app.baseUrl, token: await makeToken(app, user) });

describe('a GitLab client library (@gitbeaker/rest) manages memberships against Depot', () => {
  it('GroupMembers and ProjectMembers: add, list, show, edit, remove', async () => {
    const owner = await makeUser(app);
    const api = await client(owner);
    const root = await makeGroup(app, owner);
    const sub = await makeGroup(app, owner, { parent: root });
    const project = await makeProject(app, owner, { namespace: sub });
    const [ada, bob, carl] = [await makeUser(app), await makeUser(app), await makeUser(app)];

    const added = await api.GroupMembers.add(root.id, AccessLevel.DEVELOPER, {
      userId: ada.id,
      expiresAt: '2099-01-01',
    });
    expect(added).toMatchObject({ id: ada.id, username: ada.username, access_level: 30, expires_at: '2099-01-01' });
    await api.GroupMembers.add(root.full_path, AccessLevel.REPORTER, { username: bob.username });
    await api.GroupMembers.add(sub.id, AccessLevel.MAINTAINER, { userId: bob.id });
    const direct = await api.GroupMembers.all(root.id);
    expect(direct.map((m) => m.id).sort()).toEqual([owner.id, ada.id, bob.id].sort());
    const inherited = await api.GroupMembers.all(sub.id, { includeInherited: true });
    expect(Object.fromEntries(inherited.map((m) => [m.id, m.access_level]))).toEqual({
      [owner.id]: 50,
      [ada.id]: 30,
      [bob.id]: 40,
    });
    const filtered = await api.GroupMembers.all(root.id, { query: ada.username });
    expect(filtered.map((m) => m.id)).toEqual([ada.id]);
    const shown = await api.GroupMembers.show(sub.id, ada.id, { includeInherited: true });
    expect(shown.access_level).toBe(30);
    await expect(api.GroupMembers.show(sub.id, ada.id)).rejects.toMatchObject({ cause: { response: { status: 404 } } });
    const edited = await api.GroupMembers.edit(root.id, ada.id, AccessLevel.MAINTAINER, { expiresAt: '2099-06-30' });
    expect(edited).toMatchObject({ access_level: 40, expires_at: '2099-06-30' });
    await api.GroupMembers.remove(root.id, bob.id);
    expect((await api.GroupMembers.all(root.id)).map((m) => m.id)).not.toContain(bob.id);
    // Removing from the root also removed Bob's subgroup membership.
    expect((await api.GroupMembers.all(sub.id)).map((m) => m.id)).not.toContain(bob.id);
    await expect(api.GroupMembers.add(root.id, AccessLevel.DEVELOPER, { userId: ada.id })).rejects.toMatchObject({
      cause: { response: { status: 409 }, description: 'Member already exists' },
    });

    const pm = await api.ProjectMembers.add(project.id, AccessLevel.GUEST, { userId: carl.id });
    expect(pm).toMatchObject({ id: carl.id, access_level: 10 });
    const projectAll = await api.ProjectMembers.all(project.id, { includeInherited: true });
    expect(projectAll.map((m) => m.id).sort()).toEqual([owner.id, ada.id, carl.id].sort());
    expect((await api.ProjectMembers.edit(project.id, carl.id, AccessLevel.REPORTER)).access_level).toBe(20);
    await expect(api.ProjectMembers.add(project.id, AccessLevel.OWNER, { userId: bob.id })).rejects.toMatchObject({
      cause: { response: { status: 400 } },
    });
    await api.ProjectMembers.remove(project.id, carl.id);
    expect((await api.ProjectMembers.all(project.id)).map((m) => m.id)).toEqual([]);
  });

  it('GroupAccessRequests and ProjectAccessRequests: request, list, approve, deny', async () => {
    const owner = await makeUser(app);
    const api = await client(owner);
    const group = await makeGroup(app, owner, { visibility: 'internal' });
    const project = await makeProject(app, owner, { namespace: group, visibility: 'internal' });
    const [ada, bob] = [await makeUser(app), await makeUser(app)];
    const asAda = await client(ada);
    const asBob = await client(bob);

    const request = await asAda.GroupAccessRequests.request(group.id);
    expect(request).toMatchObject({ id: ada.id, username: ada.username });
    expect(typeof request.requested_at).toBe('string');
    await asBob.GroupAccessRequests.request(group.full_path);
    expect((await api.GroupAccessRequests.all(group.id)).map((r) => r.id)).toEqual([ada.id, bob.id]);
    const approved = await api.GroupAccessRequests.approve(group.id, ada.id, { accessLevel: AccessLevel.REPORTER });
    expect(approved).toMatchObject({ id: ada.id, access_level: 20 });
    await api.GroupAccessRequests.deny(group.id, bob.id);
    expect(await api.GroupAccessRequests.all(group.id)).toEqual([]);
    expect((await api.GroupMembers.show(group.id, ada.id)).access_level).toBe(20);

    await asBob.ProjectAccessRequests.request(project.id);
    const projectApproved = await api.ProjectAccessRequests.approve(project.id, bob.id);
    expect(projectApproved.access_level).toBe(30);
    expect((await api.ProjectMembers.show(project.id, bob.id)).access_level).toBe(30);
    await expect(asAda.ProjectAccessRequests.request(project.id)).rejects.toMatchObject({
      cause: { response: { status: 403 } },
    });
  });

  it('GroupMembers: billable members, their memberships, removal and LDAP overrides', async () => {
    const owner = await makeUser(app);
    const api = await client(owner);
    const root = await makeGroup(app, owner);
    const sub = await makeGroup(app, owner, { parent: root });
    const ada = await makeUser(app);
    await api.GroupMembers.add(sub.id, AccessLevel.DEVELOPER, { userId: ada.id });
    const billable = await api.GroupMembers.allBillable(root.id);
    expect(billable.map((m) => m.id).sort()).toEqual([owner.id, ada.id].sort());
    const memberships = await api.GroupMembers.allBillableMemberships(root.id, ada.id);
    expect(memberships).toMatchObject([{ source_id: sub.id, access_level: { integer_value: 30 } }]);
    await api.GroupMembers.removeBillable(root.id, ada.id);
    expect(await api.GroupMembers.all(sub.id)).toHaveLength(1);

    const ldapUser = await makeUser(app);
    await syncDirectory(app.deps, { groups: [{ group: root.full_path, members: { [ldapUser.username]: 30 } }] });
    const overridden = await api.GroupMembers.setOverrideFlag(root.id, ldapUser.id);
    expect(overridden).toMatchObject({ id: ldapUser.id, override: true });
    expect((await api.GroupMembers.edit(root.id, ldapUser.id, AccessLevel.MAINTAINER)).access_level).toBe(40);
    const cleared = await api.GroupMembers.removeOverrideFlag(root.id, ldapUser.id);
    expect(cleared).toMatchObject({ id: ldapUser.id, override: false });
  });
});
