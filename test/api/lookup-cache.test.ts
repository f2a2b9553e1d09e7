import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOKEN_EXPIRED, TOKEN_REVOKED } from '../../src/http/errors.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeProjectMember, makeSampleProject, makeToken, makeUserWithToken } from '../support/factories.js';

/**
 * Two server processes of one instance (the same database and storage, each with its own pool
 * and lookup cache), and a third writer outside Depot: what one changes takes effect at once on
 * the process that changed it and within a second on the other.
 */
let a: TestApp;
let b: TestApp;
let outsider: pg.Client;
beforeAll(async () => {
  a = await startTestApp();
  b = await startTestApp({ peer: a });
  outsider = new pg.Client({ connectionString: a.database.url });
  await outsider.connect();
});
afterAll(async () => {
  await outsider?.end();
  await b?.close();
  await a?.close();
});

/** Polls `probe` until it answers `status`; returns how long that took (ms). */
async function within(probe: () => Promise<{ status: number }>, status: number, limitMs = 1_000): Promise<number> {
  const started = performance.now();
  for (;;) {
    const res = await probe();
    const elapsed = performance.now() - started;
    if (res.status === status) return elapsed;
    if (elapsed > limitMs) throw new Error(`still ${res.status} after ${Math.round(elapsed)} ms (wanted ${status})`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const tree = (app: TestApp, projectId: number, token?: string) =>
  app.request(`/projects/${projectId}/repository/tree`, token ? { token } : {});

describe('lookups kept in process', () => {
  it('answer a repeated authenticated tree request without asking the database', async () => {
    const admin = await makeAdmin(a);
    const { project } = await makeSampleProject(a, admin, { visibility: 'private' });
    const { token } = await makeProjectMember(a, project, 'developer');
    // The first use records the token's last_used_at (at most every 10 minutes, as GitLab),
    // a change that the next request reads again.
    for (let i = 0; i < 2; i++) expect((await tree(a, project.id, token)).status).toBe(200);
    const before = a.database.queries();
    const again = await tree(a, project.id, token);
    expect(again.status).toBe(200);
    expect(again.body.length).toBeGreaterThan(0);
    expect(a.database.queries() - before).toBe(0);
    // The project itself: its namespaces, owner and the caller's memberships are kept too.
    const first = await a.request(`/projects/${project.id}`, { token });
    expect(first.status).toBe(200);
    const afterFirst = a.database.queries();
    const second = await a.request(`/projects/${project.id}`, { token });
    expect(second.body).toEqual(first.body);
    expect(second.body.permissions.project_access.access_level).toBe(30);
    expect(a.database.queries() - afterFirst).toBe(0);
    // Anonymous reads of a public project ask nothing either.
    const { project: open } = await makeSampleProject(a, admin, { visibility: 'public' });
    expect((await tree(a, open.id)).status).toBe(200);
    const anonymous = a.database.queries();
    expect((await tree(a, open.id)).status).toBe(200);
    expect(a.database.queries() - anonymous).toBe(0);
  });

  it('refuse a revoked token at once where it was revoked, and within a second elsewhere', async () => {
    const { user, token } = await makeUserWithToken(a);
    expect((await a.request('/user', { token })).status).toBe(200);
    expect((await b.request('/user', { token })).status).toBe(200);
    const self = await a.request('/personal_access_tokens/self', { token });
    expect(self.status).toBe(200);
    expect((await a.request(`/personal_access_tokens/${self.body.id}`, { method: 'DELETE', token })).status).toBe(204);
    const refused = await a.request('/user', { token });
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({ error: 'invalid_token', error_description: TOKEN_REVOKED });
    await within(() => b.request('/user', { token }), 401);
    // A second token of the same user still works on both.
    const other = await makeToken(a, user);
    expect((await b.request('/user', { token: other })).status).toBe(200);
  });

  it('refuse an expired token the day it expires, though its row is kept', async () => {
    const { user } = await makeUserWithToken(a);
    const tomorrow = new Date(a.clock.now().getTime() + 86_400_000).toISOString().slice(0, 10);
    const token = await makeToken(a, user, ['api'], { expiresAt: tomorrow });
    expect((await a.request('/user', { token })).status).toBe(200);
    const saved = a.clock.now();
    a.clock.set(new Date(`${tomorrow}T00:00:01Z`));
    try {
      const res = await a.request('/user', { token });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: 'invalid_token', error_description: TOKEN_EXPIRED });
    } finally {
      a.clock.set(saved);
    }
  });

  it('refuse a user blocked outside Depot within a second on every process', async () => {
    const { user, token } = await makeUserWithToken(a);
    expect((await a.request('/user', { token })).status).toBe(200);
    expect((await b.request('/user', { token })).status).toBe(200);
    await outsider.query(`UPDATE users SET state = 'blocked' WHERE id = $1`, [user.id]);
    for (const app of [a, b]) await within(() => app.request('/user', { token }), 403);
    await outsider.query(`UPDATE users SET state = 'active' WHERE id = $1`, [user.id]);
    for (const app of [a, b]) await within(() => app.request('/user', { token }), 200);
  });

  it('drop a removed member at once where it was removed, and within a second elsewhere', async () => {
    const admin = await makeAdmin(a);
    const adminToken = await makeToken(a, admin);
    const { project } = await makeSampleProject(a, admin, { visibility: 'private' });
    const { user, token } = await makeProjectMember(a, project, 'developer');
    expect((await tree(a, project.id, token)).status).toBe(200);
    expect((await tree(b, project.id, token)).status).toBe(200);
    const removed = await a.request(`/projects/${project.id}/members/${user.id}`, {
      method: 'DELETE',
      token: adminToken,
    });
    expect(removed.status).toBe(204);
    expect((await tree(a, project.id, token)).status).toBe(404);
    await within(() => tree(b, project.id, token), 404);
  });

  it('hide a project made private at once where it changed, and within a second elsewhere', async () => {
    const admin = await makeAdmin(a);
    const adminToken = await makeToken(a, admin);
    const { project } = await makeSampleProject(a, admin, { visibility: 'public' });
    expect((await tree(a, project.id)).status).toBe(200);
    expect((await tree(b, project.id)).status).toBe(200);
    const changed = await a.request(`/projects/${project.id}`, {
      method: 'PUT',
      token: adminToken,
      body: { visibility: 'private' },
    });
    expect(changed.status).toBe(200);
    expect((await tree(a, project.id)).status).toBe(404);
    await within(() => tree(b, project.id), 404);
    // A change inside a transaction that rolls back changes nothing anywhere.
    await outsider.query('BEGIN');
    await outsider.query(`UPDATE projects SET visibility = 'public' WHERE id = $1`, [project.id]);
    await outsider.query('ROLLBACK');
    expect((await tree(a, project.id)).status).toBe(404);
    expect((await tree(b, project.id)).status).toBe(404);
  });
});
