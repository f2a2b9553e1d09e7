import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectCache, type ProjectWithNamespace } from '../../src/db/project-cache.js';
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
 * Every project request starts with the project lookup, which the embedded database keeps in
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

  it('see a rename through the API under the new path only', async () => {
    const { user, token } = await makeUserWithToken(app);
    const project = await makeProject(app, user, { visibility: 'public' });
    expect((await app.request(`/projects/${enc(project.full_path)}`)).status).toBe(200);
    const renamed = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token,
      body: { path: `${project.path}-renamed` },
    });
    expect(renamed.status).toBe(200);
    expect((await app.request(`/projects/${enc(project.full_path)}`)).status).toBe(404);
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

describe('the project cache', () => {
  const row = (id: number, visibility: 'public' | 'private'): ProjectWithNamespace => ({
    project: { id, full_path: `g/p${id}`, visibility } as Project,
    namespace: { id: 1, traversal_ids: [1] } as unknown as Namespace,
  });

  it('does not keep a row read before a change that landed while it was read', async () => {
    const cache = new ProjectCache();
    let release!: () => void;
    const slow = cache.lookup({ id: 7 }, async () => {
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return row(7, 'public');
    });
    cache.invalidate();
    release();
    expect((await slow)?.project.visibility).toBe('public');
    // The next lookup reads again and gets the current row.
    expect((await cache.lookup({ id: 7 }, async () => row(7, 'private')))?.project.visibility).toBe('private');
    expect((await cache.lookup({ fullPath: 'G/P7' }, async () => undefined))?.project.visibility).toBe('private');
  });

  it('hands out rows nobody can change', async () => {
    const cache = new ProjectCache();
    const found = (await cache.lookup({ id: 8 }, async () => row(8, 'public'))) as ProjectWithNamespace;
    expect(() => {
      (found.project as { visibility: string }).visibility = 'private';
    }).toThrow(TypeError);
    expect(() => {
      (found.namespace.traversal_ids as number[]).push(2);
    }).toThrow(TypeError);
  });
});
