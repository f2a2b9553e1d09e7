import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LookupCache, writtenTables } from '../../src/db/lookup-cache.js';
import type { Namespace, Project } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeGroup, makeProject, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const enc = encodeURIComponent;

/**
 * Every project request starts with the project lookup, which each server process keeps in
 * memory: whatever changes the rows, through the API or not, must show in the next request.
 */
describe('project lookups', () => {
  it('see changes made straight in the database at once, by id and by path', async () => {
    const { user } = await makeUserWithToken(app);
    const group = await makeGroup(app, user, { visibility: 'public' });
    const project = await makeProject(app, user, { namespace: group, visibility: 'public' });
    for (let round = 0; round < 3; round++) {
      expect((await app.request(`/projects/${project.id}`)).status).toBe(200);
      expect((await app.request(`/projects/${enc(project.full_path)}`)).status).toBe(200);
      await app.deps.db.updateTable('projects').set({ visibility: 'private' }).where('id', '=', project.id).execute();
      expect((await app.request(`/projects/${project.id}`)).status).toBe(404);
      expect((await app.request(`/projects/${enc(project.full_path)}`)).status).toBe(404);
      await sql`UPDATE projects SET visibility = 'public' WHERE id = ${project.id}`.execute(app.deps.db);
    }
    // The group turns private: its public project is no longer visible either.
    await app.deps.db.updateTable('namespaces').set({ visibility: 'private' }).where('id', '=', group.id).execute();
    await app.deps.db.updateTable('projects').set({ visibility: 'private' }).where('id', '=', project.id).execute();
    expect((await app.request(`/projects/${project.id}`)).status).toBe(404);
  });

  it('see a rename through the API: the new path serves, the old one redirects', async () => {
    const { user, token } = await makeUserWithToken(app);
    const project = await makeProject(app, user, { visibility: 'public' });
    expect((await app.request(`/projects/${enc(project.full_path)}`)).status).toBe(200);
    const renamed = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token,
      body: { path: `${project.path}-renamed` },
    });
    expect(renamed.status).toBe(200);
    expect((await app.request(`/projects/${enc(project.full_path)}`)).status).toBe(301);
    const fresh = await app.request(`/projects/${enc(`${project.full_path}-renamed`)}`);
    expect(fresh.status).toBe(200);
    expect(fresh.body.id).toBe(project.id);
  });

  it('see a project deleted straight in the database', async () => {
    const { user } = await makeUserWithToken(app);
    const project = await makeProject(app, user, { visibility: 'public' });
    expect((await app.request(`/projects/${project.id}`)).status).toBe(200);
    await app.deps.db.deleteFrom('projects').where('id', '=', project.id).execute();
    expect((await app.request(`/projects/${project.id}`)).status).toBe(404);
    expect((await app.request(`/projects/${enc(project.full_path)}`)).status).toBe(404);
  });
});

describe('the lookup cache', () => {
  const row = (id: number, visibility: 'public' | 'private') => ({
    project: { id, full_path: `g/p${id}`, visibility } as Project,
    namespace: { id: 1, traversal_ids: [1] } as unknown as Namespace,
  });

  it('does not keep a row read before a change that landed while it was read', async () => {
    const cache = new LookupCache();
    let release!: () => void;
    const slow = cache.lookup('project', '#7', async () => {
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return row(7, 'public');
    });
    cache.invalidate('projects');
    release();
    expect((await slow)?.project.visibility).toBe('public');
    // The next lookup reads again and gets the current row, which is kept.
    expect((await cache.lookup('project', '#7', async () => row(7, 'private')))?.project.visibility).toBe('private');
    const kept = await cache.lookup<ReturnType<typeof row>>('project', '#7', async () => undefined);
    expect(kept?.project.visibility).toBe('private');
  });

  it('hands out rows nobody can change', async () => {
    const cache = new LookupCache();
    const found = (await cache.lookup('project', '#8', async () => row(8, 'public'))) as ReturnType<typeof row>;
    expect(() => {
      (found.project as { visibility: string }).visibility = 'private';
    }).toThrow(TypeError);
    expect(() => {
      (found.namespace.traversal_ids as number[]).push(2);
    }).toThrow(TypeError);
  });

  it('forgets only what depends on the changed table, and keeps nothing while notices may be missed', async () => {
    const cache = new LookupCache();
    await cache.lookup('user', '#1', async () => ({ id: 1 }));
    await cache.lookup('projectLevel', '1:2', async () => 30);
    cache.invalidate('members');
    expect(await cache.lookup('user', '#1', async () => undefined)).toEqual({ id: 1 });
    expect(await cache.lookup('projectLevel', '1:2', async () => undefined)).toBeUndefined();
    cache.setLive(false);
    expect(await cache.lookup('user', '#1', async () => ({ id: 2 }))).toEqual({ id: 2 });
    expect(await cache.lookup('user', '#1', async () => ({ id: 3 }))).toEqual({ id: 3 });
    cache.setLive(true);
    await cache.lookup('user', '#1', async () => ({ id: 4 }));
    expect(await cache.lookup('user', '#1', async () => undefined)).toEqual({ id: 4 });
  });

  it('reads the watched tables a statement writes off its SQL', () => {
    expect(writtenTables('update "personal_access_tokens" set "last_used_at" = $1 where "id" = $2')).toEqual([
      'personal_access_tokens',
    ]);
    expect(writtenTables('insert into "members" ("user_id") values ($1) on conflict do update set x = 1')).toEqual([
      'members',
    ]);
    expect(writtenTables('WITH RECURSIVE up AS (SELECT 1) UPDATE personal_access_tokens SET revoked = TRUE')).toEqual([
      'personal_access_tokens',
    ]);
    expect(writtenTables('delete from "projects" where "id" = $1')).toEqual(['projects']);
    expect(writtenTables('TRUNCATE TABLE users')).toEqual(['users']);
    expect(writtenTables('select * from "jobs" for update skip locked')).toEqual([]);
    expect(writtenTables('update "jobs" set "state" = $1')).toEqual([]);
  });
});
