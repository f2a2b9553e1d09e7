import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { Namespace, User } from '../../src/db/schema.js';
import { openRuntime } from '../../src/runtime.js';
import { createGroup } from '../../src/services/groups.js';
import { parseDirectory, syncDirectory } from '../../src/services/ldap.js';
import { createUser } from '../../src/services/users.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import { addMember, makeGroup, makeMembers, makeUser, makeUserWithToken } from '../support/factories.js';
import { tempStorageDir } from '../support/server-process.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

function expectStatus(res: TestResponse, status: number, what: string) {
  expect(res.status, `${what}: ${res.text}`).toBe(status);
}

async function levelOf(group: Namespace, user: User) {
  const row = await app.deps.db
    .selectFrom('members')
    .select(['access_level', 'ldap', 'override'])
    .where('source_type', '=', 'group')
    .where('source_id', '=', group.id)
    .where('user_id', '=', user.id)
    .executeTakeFirst();
  return row ?? null;
}

/** A group owned by a local (non-LDAP) Owner with a token, synchronised with `members`. */
async function syncedGroup(members: Record<string, number>) {
  const { user: owner, token } = await makeUserWithToken(app);
  const group = await makeGroup(app, owner);
  const results = await syncDirectory(app.deps, { groups: [{ group: group.full_path, cn: 'devs', members }] });
  return { owner, token, group, result: results[0] };
}

describe('directory synchronisation', () => {
  it('adds directory members as LDAP members, resets levels without override and removes those who left', async () => {
    const [ada, bob, carl, local] = await Promise.all([makeUser(app), makeUser(app), makeUser(app), makeUser(app)]);
    const { group, result, owner } = await syncedGroup({ [ada.username]: 30, [bob.username]: 20, ghost: 10 });
    expect(result).toMatchObject({ added: [ada.username, bob.username], unknown: ['ghost'] });
    await addMember(app, { type: 'group', id: group.id }, local, 40);
    expect(await levelOf(group, ada)).toEqual({ access_level: 30, ldap: true, override: false });

    // Someone changes Ada's level by hand in the database; the next sync puts it back.
    await app.deps.db.updateTable('members').set({ access_level: 40 }).where('user_id', '=', ada.id).execute();
    const second = await syncDirectory(app.deps, {
      groups: [{ group: group.full_path, members: { [ada.username]: 30, [carl.username]: 10 } }],
    });
    expect(second[0]).toMatchObject({ added: [carl.username], updated: [ada.username], removed: [bob.username] });
    expect(await levelOf(group, ada)).toEqual({ access_level: 30, ldap: true, override: false });
    expect(await levelOf(group, bob)).toBeNull();
    expect(await levelOf(group, local)).toEqual({ access_level: 40, ldap: false, override: false });
    expect(await levelOf(group, owner)).toEqual({ access_level: 50, ldap: false, override: false });
    const link = await app.deps.db
      .selectFrom('ldap_group_links')
      .select('cn')
      .where('group_id', '=', group.id)
      .executeTakeFirstOrThrow();
    expect(link.cn).toBe(group.full_path);
  });

  it('reads YAML and JSON exports and rejects bad ones with the place of the problem', () => {
    const yaml = parseDirectory('groups:\n  - group: a/b\n    cn: devs\n    members:\n      ada: 30\n');
    expect(yaml).toEqual({ groups: [{ group: 'a/b', cn: 'devs', members: { ada: 30 } }] });
    expect(parseDirectory('{"groups":[{"group":"a","members":{}}]}')).toEqual({
      groups: [{ group: 'a', members: {} }],
    });
    expect(() => parseDirectory('groups:\n  - group: a\n    members:\n      ada: 35\n')).toThrow(
      'groups.0.members.ada: is not a group access level',
    );
    expect(() => parseDirectory('groups: [')).toThrow(/not YAML or JSON/);
  });
});

describe('LDAP override endpoints', () => {
  it('lets an Owner override an LDAP member, change the level, and hand it back to synchronisation', async () => {
    const ada = await makeUser(app);
    const { group, token } = await syncedGroup({ [ada.username]: 30 });
    const url = `/groups/${group.id}/members/${ada.id}`;
    const shown = await app.request(url, { token });
    expect(shown.body).toMatchObject({ id: ada.id, access_level: 30, override: false });
    expect((await app.request(url, { token, method: 'PUT', body: { access_level: 40 } })).body).toEqual({
      message: '403 Forbidden',
    });
    const set = await app.request(`${url}/override`, { token, method: 'POST' });
    expect([set.status, set.body.override, set.body.access_level]).toEqual([201, true, 30]);
    const put = await app.request(url, { token, method: 'PUT', body: { access_level: 40 } });
    expect([put.status, put.body.access_level, put.body.override]).toEqual([200, 40, true]);
    await syncDirectory(app.deps, { groups: [{ group: group.full_path, members: { [ada.username]: 30 } }] });
    expect(await levelOf(group, ada)).toEqual({ access_level: 40, ldap: true, override: true });
    const cleared = await app.request(`${url}/override`, { token, method: 'DELETE' });
    expect([cleared.status, cleared.body.override]).toEqual([200, false]);
    await syncDirectory(app.deps, { groups: [{ group: group.full_path, members: { [ada.username]: 30 } }] });
    expect(await levelOf(group, ada)).toEqual({ access_level: 30, ldap: true, override: false });
  });

  it('keeps members of a synchronised group under the directory: no adding or removing by hand', async () => {
    const ada = await makeUser(app);
    const { group, token, owner } = await syncedGroup({ [ada.username]: 30 });
    const stranger = await makeUser(app);
    expectStatus(
      await app.request(`/groups/${group.id}/members`, {
        token,
        method: 'POST',
        body: { user_id: stranger.id, access_level: 30 },
      }),
      403,
      'add',
    );
    expectStatus(
      await app.request(`/groups/${group.id}/members/${ada.id}`, { token, method: 'DELETE' }),
      403,
      'remove',
    );
    // A non-LDAP member's level may still change.
    const local = await makeUser(app);
    await addMember(app, { type: 'group', id: group.id }, local, 20);
    expectStatus(
      await app.request(`/groups/${group.id}/members/${local.id}`, {
        token,
        method: 'PUT',
        body: { access_level: 30 },
      }),
      200,
      'update a local member',
    );
    const localShown = await app.request(`/groups/${group.id}/members/${local.id}`, { token });
    expect(localShown.body).not.toHaveProperty('override');
    expectStatus(await app.request(`/groups/${group.id}/access_requests`, { token }), 403, 'list access requests');
    const requester = await makeUserWithToken(app);
    await app.deps.db.updateTable('namespaces').set({ visibility: 'internal' }).where('id', '=', group.id).execute();
    expectStatus(
      await app.request(`/groups/${group.id}/access_requests`, { token: requester.token, method: 'POST' }),
      403,
      'request access',
    );
    expect(owner.id).toBeGreaterThan(0);
  });

  it('allows overrides only to Owners and administrators, only for LDAP members of synchronised groups', async () => {
    const ada = await makeUser(app);
    const { group, token } = await syncedGroup({ [ada.username]: 30 });
    const maintainer = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, maintainer.user, 40);
    const admin = await makeUserWithToken(app, { admin: true });
    const outsider = await makeUserWithToken(app);
    const url = `/groups/${group.id}/members/${ada.id}/override`;
    expectStatus(await app.request(url, { method: 'POST' }), 401, 'anonymous');
    expectStatus(await app.request(url, { method: 'DELETE' }), 401, 'anonymous clears');
    const below = await makeMembers(app, { type: 'group', id: group.id }, ['guest', 'reporter', 'developer']);
    for (const method of ['POST', 'DELETE']) {
      expectStatus(await app.request(url, { token: outsider.token, method }), 404, `outsider ${method}`);
      expectStatus(await app.request(url, { token: maintainer.token, method }), 403, `maintainer ${method}`);
      for (const p of below)
        expectStatus(await app.request(url, { token: p.token, method }), 403, `${p.name} ${method}`);
    }
    expectStatus(await app.request(url, { token: admin.token, method: 'POST' }), 201, 'admin');
    expectStatus(await app.request(url, { token: admin.token, method: 'DELETE' }), 200, 'admin clears');
    expectStatus(await app.request(url, { token, method: 'POST' }), 201, 'owner');
    expectStatus(await app.request(url, { token, method: 'DELETE' }), 200, 'owner clears');
    expectStatus(
      await app.request(`/groups/${group.id}/members/${maintainer.user.id}/override`, { token, method: 'POST' }),
      403,
      'a non-LDAP member',
    );
    const missing = await app.request(`/groups/${group.id}/members/2147483647/override`, { token, method: 'POST' });
    expect([missing.status, missing.body]).toEqual([404, { message: '404 Not found' }]);
    expect((await app.request(`/groups/${group.id}/members/x/override`, { token, method: 'POST' })).body).toEqual({
      error: 'user_id is invalid',
    });
    const plain = await makeGroup(app, maintainer.user);
    const plainMember = await makeUser(app);
    await addMember(app, { type: 'group', id: plain.id }, plainMember, 30);
    expectStatus(
      await app.request(`/groups/${plain.id}/members/${plainMember.id}/override`, {
        token: maintainer.token,
        method: 'POST',
      }),
      403,
      'a group that is not synchronised',
    );
  });
});

describe('admin CLI: ldap sync', () => {
  it('synchronises a group from a directory file', { timeout: 120_000 }, async () => {
    const storageDir = tempStorageDir('depot-cli-ldap-');
    try {
      const env: Record<string, string> = {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? '/tmp',
        STORAGE_DIR: storageDir,
        LOG_LEVEL: 'warn',
      };
      const config = loadConfig(env);
      let runtime = await openRuntime(config);
      const owner = await createUser(
        runtime.deps,
        { username: 'cli-owner', email: 'cli-owner@example.com', name: 'Owner', randomPassword: true },
        null,
      );
      await createUser(
        runtime.deps,
        { username: 'cli-ada', email: 'cli-ada@example.com', name: 'Ada', randomPassword: true },
        null,
      );
      await createGroup(runtime.deps, owner, { name: 'Team', path: 'team', visibility: 'private' }, null);
      await runtime.close();

      const file = path.join(storageDir, 'directory.yml');
      fs.writeFileSync(
        file,
        'groups:\n  - group: team\n    cn: team-devs\n    members:\n      cli-ada: 40\n      nobody: 10\n',
      );
      const root = path.resolve(import.meta.dirname, '..', '..');
      const tsx = path.join(root, 'node_modules', '.bin', 'tsx');
      const run = spawnSync(tsx, ['src/cli.ts', 'ldap', 'sync', file], { cwd: root, env, encoding: 'utf8' });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout).toBe('team: 1 added, 0 updated, 0 removed, 0 overridden\n  no such users: nobody\n');
      const bad = spawnSync(tsx, ['src/cli.ts', 'ldap', 'sync', path.join(storageDir, 'missing.yml')], {
        cwd: root,
        env,
        encoding: 'utf8',
      });
      expect(bad.status).toBe(1);
      expect(bad.stderr).toContain('missing.yml');

      runtime = await openRuntime(config);
      try {
        const rows = await runtime.deps.db
          .selectFrom('members')
          .innerJoin('users', 'users.id', 'members.user_id')
          .select(['users.username', 'members.access_level', 'members.ldap'])
          .orderBy('users.username')
          .execute();
        expect(rows).toEqual([
          { username: 'cli-ada', access_level: 40, ldap: true },
          { username: 'cli-owner', access_level: 50, ldap: false },
        ]);
      } finally {
        await runtime.close();
      }
    } finally {
      fs.rmSync(storageDir, { recursive: true, force: true });
    }
  });
});
