import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Gitlab } from '@gitbeaker/rest';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { eventsPurgeJob, eventsRetentionJob } from '../../src/jobs/events.js';
import { enqueueJob } from '../../src/jobs/queue.js';
import { Worker } from '../../src/jobs/worker.js';
import { recordEvent } from '../../src/services/events.js';
import { removeExpiredMembers } from '../../src/services/member-expiry.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  addMember,
  makeGroup,
  makeProject,
  makeProjectMember,
  makeSampleProject,
  makeToken,
  makeUser,
  makeUserWithToken,
} from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

let app: TestApp;
let scratch: string;
let counter = 0;

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const git = (args: string[], cwd = scratch) => runGitClient(args, cwd);
const client = (token: string) => new Gitlab({ host: app.baseUrl, token });

/** GitLab's UserBasic as an event's `author`. */
function authorOf(user: User) {
  return {
    id: user.id,
    username: user.username,
    name: user.name,
    state: 'active',
    locked: false,
    avatar_url: expect.any(String),
    web_url: `${app.baseUrl}/${user.username}`,
  };
}

/** A working clone of a project, as `user` with a token, ready to commit and push. */
async function workClone(project: Project, user: User) {
  const token = await makeToken(app, user, ['api']);
  const dir = path.join(scratch, `work-${++counter}`);
  const cloned = await git([
    'clone',
    '--quiet',
    remoteUrl(app.baseUrl, project, { login: user.username, password: token }),
    dir,
  ]);
  expect(cloned.code, cloned.stderr).toBe(0);
  await git(['config', 'user.email', 'dev@example.com'], dir);
  await git(['config', 'user.name', 'Dev'], dir);
  return dir;
}

async function commitIn(dir: string, file: string, message: string) {
  await fs.writeFile(path.join(dir, file), `${message}\n`);
  await git(['add', file], dir);
  await git(['commit', '--quiet', '-m', message], dir);
  return (await git(['rev-parse', 'HEAD'], dir)).stdout.trim();
}

/** Adds a member through the API, as a person would (a `joined` event). */
async function join(projectId: number, ownerToken: string, user: User, accessLevel = 30) {
  const res = await app.request(`/projects/${projectId}/members`, {
    method: 'POST',
    token: ownerToken,
    body: { user_id: user.id, access_level: accessLevel },
  });
  expect(res.status, res.text).toBe(201);
}

async function push(dir: string, ...refspecs: string[]) {
  const result = await git(['push', '--quiet', 'origin', ...refspecs], dir);
  expect(result.code, result.stderr).toBe(0);
}

beforeAll(async () => {
  app = await startTestApp();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-events-'));
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('recorded actions, read through the three feeds with @gitbeaker/rest', () => {
  it('shows a new project, a membership and pushes over HTTP with GitLab’s fields', async () => {
    const { user: owner, token: ownerToken } = await makeUserWithToken(app);
    const owned = client(ownerToken);
    const created = await owned.Projects.create({ name: 'Feed', path: `feed${++counter}`, visibility: 'private' });
    const { project } = { project: { id: created.id as number, full_path: created.path_with_namespace as string } };
    const dev = await makeUser(app);
    await join(project.id, ownerToken, dev);
    // The default branch is protected: the developer works on a branch.
    const dir = await workClone(project as Project, owner);
    const first = await commitIn(dir, 'a.txt', 'First commit on main');
    await push(dir, 'HEAD:refs/heads/main');
    const devDir = await workClone(project as Project, dev);
    await git(['checkout', '--quiet', '-b', 'topic'], devDir);
    const topic = await commitIn(devDir, 'b.txt', 'Topic work');
    await push(devDir, 'topic');

    const events = await owned.Events.all({ projectId: project.id });
    expect(events.map((e) => e.action_name)).toEqual(['pushed new', 'pushed new', 'joined', 'created']);
    const [devPush, mainPush, joined, createdEvent] = events as Record<string, unknown>[];
    expect(devPush).toEqual({
      id: expect.any(Number),
      title: null,
      project_id: project.id,
      action_name: 'pushed new',
      target_id: null,
      target_iid: null,
      target_type: null,
      author_id: dev.id,
      target_title: null,
      created_at: expect.stringMatching(ISO_MS),
      author: authorOf(dev),
      imported: false,
      imported_from: 'none',
      push_data: {
        commit_count: 1,
        action: 'created',
        ref_type: 'branch',
        commit_from: null,
        commit_to: topic,
        ref: 'topic',
        commit_title: 'Topic work',
        ref_count: null,
      },
      data: null,
      author_username: dev.username,
    });
    // GitLab's key order.
    expect(Object.keys(devPush as object)).toEqual([
      'id',
      'title',
      'project_id',
      'action_name',
      'target_id',
      'target_iid',
      'target_type',
      'author_id',
      'target_title',
      'created_at',
      'author',
      'imported',
      'imported_from',
      'push_data',
      'data',
      'author_username',
    ]);
    expect(mainPush?.push_data).toEqual({
      commit_count: 1,
      action: 'created',
      ref_type: 'branch',
      commit_from: null,
      commit_to: first,
      ref: 'main',
      commit_title: 'First commit on main',
      ref_count: null,
    });
    expect(joined).toMatchObject({ action_name: 'joined', author_id: dev.id, target_type: null, data: null });
    expect(joined).not.toHaveProperty('push_data');
    expect(createdEvent).toMatchObject({
      action_name: 'created',
      author_id: owner.id,
      author_username: owner.username,
      target_id: null,
      target_type: null,
    });

    // The developer's own feeds: /events and /users/:id/events (by id and by username).
    const devClient = client(await makeToken(app, dev, ['api']));
    const mine = await devClient.Events.all();
    expect(mine.map((e) => e.action_name)).toEqual(['pushed new', 'joined']);
    expect(mine[0]).not.toHaveProperty('data');
    const byId = await owned.Users.allEvents(dev.id);
    expect(byId.map((e) => e.id)).toEqual(mine.map((e) => e.id));
    const byName = await app.request(`/users/${dev.username}/events`, { token: ownerToken });
    expect(byName.body.map((e: { id: number }) => e.id)).toEqual(mine.map((e) => e.id));
    // scope=all: every event of the developer's projects, the owner's too.
    const all = await devClient.Events.all({ scope: 'all' });
    expect(all.map((e) => e.id)).toEqual(events.map((e) => e.id));

    // Leaving is recorded with the member as author.
    const left = await app.request(`/projects/${project.id}/members/${dev.id}`, {
      method: 'DELETE',
      token: ownerToken,
    });
    expect(left.status).toBe(204);
    const afterLeave = await owned.Events.all({ projectId: project.id, action: 'left' });
    expect(afterLeave).toEqual([expect.objectContaining({ action_name: 'left', author_id: dev.id })]);
  });

  it('records tags, updates, deletions, long titles and bulk pushes as GitLab does', async () => {
    const owner = await makeUser(app);
    const { project } = await makeSampleProject(app, owner, { path: `refs${++counter}`, visibility: 'private' });
    const { user: maintainer, token } = await makeProjectMember(app, project, 'maintainer');
    const dir = await workClone(project, maintainer);
    const long = `Fix ${'the quick brown fox jumps over the lazy dog '.repeat(3)}`.trim();
    const tip = await commitIn(dir, 'long.txt', `${long}\n\nbody text`);
    const before = (await git(['rev-parse', 'HEAD~1'], dir)).stdout.trim();
    await push(dir, 'HEAD:refs/heads/main');
    await git(['tag', '-a', 'v9.0', '-m', 'release nine'], dir);
    await push(dir, 'refs/tags/v9.0');
    await push(dir, 'HEAD:refs/heads/same-commit');
    await push(dir, ':refs/heads/same-commit');
    // Four tags in one push: above GitLab's limit of three, one bulk event.
    for (const name of ['b1', 'b2', 'b3', 'b4']) await git(['tag', name], dir);
    await push(dir, 'refs/tags/b1', 'refs/tags/b2', 'refs/tags/b3', 'refs/tags/b4');
    // Three branches in one push: one event each.
    await push(dir, 'HEAD:refs/heads/x1', 'HEAD:refs/heads/x2', 'HEAD:refs/heads/x3');

    const events = await client(token).Events.all({ projectId: project.id, action: 'pushed', sort: 'asc' });
    const data = events.map((e) => [e.action_name, e.push_data]);
    expect(data.slice(0, 5)).toEqual([
      [
        'pushed to',
        {
          commit_count: 1,
          action: 'pushed',
          ref_type: 'branch',
          commit_from: before,
          commit_to: tip,
          ref: 'main',
          // Ruby's truncate(70): 67 characters and "...".
          commit_title: `${long.slice(0, 67)}...`,
          ref_count: null,
        },
      ],
      [
        'pushed new',
        {
          commit_count: 1,
          action: 'created',
          ref_type: 'tag',
          commit_from: null,
          commit_to: (await git(['rev-parse', 'refs/tags/v9.0'], dir)).stdout.trim(),
          ref: 'v9.0',
          commit_title: `${long.slice(0, 67)}...`,
          ref_count: null,
        },
      ],
      [
        'pushed new',
        {
          commit_count: 0,
          action: 'created',
          ref_type: 'branch',
          commit_from: null,
          commit_to: tip,
          ref: 'same-commit',
          commit_title: null,
          ref_count: null,
        },
      ],
      [
        'deleted',
        {
          commit_count: 0,
          action: 'removed',
          ref_type: 'branch',
          commit_from: tip,
          commit_to: null,
          ref: 'same-commit',
          commit_title: null,
          ref_count: null,
        },
      ],
      [
        'pushed new',
        {
          commit_count: 0,
          action: 'created',
          ref_type: 'tag',
          commit_from: null,
          commit_to: null,
          ref: null,
          commit_title: null,
          ref_count: 4,
        },
      ],
    ]);
    expect(data.slice(5).map(([, d]) => (d as { ref: string }).ref)).toEqual(['x1', 'x2', 'x3']);
    expect(data).toHaveLength(8);
  });

  it('records `expired` when the expiry job removes a membership', async () => {
    const owner = await makeUser(app);
    const project = await makeProject(app, owner, { visibility: 'public' });
    const leaving = await makeUser(app);
    await addMember(app, { type: 'project', id: project.id }, leaving, 30, '2000-01-01');
    expect(await removeExpiredMembers(app.deps)).toBeGreaterThanOrEqual(1);
    const res = await app.request(`/projects/${project.id}/events`, { query: { action: 'expired' } });
    expect(res.body).toEqual([
      expect.objectContaining({
        action_name: 'removed due to membership expiration from',
        author_id: leaving.id,
        project_id: project.id,
      }),
    ]);
  });
});

describe('filters, sorting and pagination', () => {
  it('filters by action, target type and dates (exclusive), sorts and pages', async () => {
    const owner = await makeUser(app);
    const token = await makeToken(app, owner);
    const project = await makeProject(app, owner);
    const at = (iso: string) => new Date(iso);
    // Another module's event (a merge request), recorded through the shared helper.
    await recordEvent(app.deps.db, {
      action: 'merged',
      authorId: owner.id,
      projectId: project.id,
      target: { type: 'MergeRequest', id: 9001, iid: 3, title: 'Add feeds' },
      at: at('2026-01-10T12:00:00.000Z'),
    });
    await recordEvent(app.deps.db, {
      action: 'created',
      authorId: owner.id,
      projectId: project.id,
      target: { type: 'Issue', id: 9002, iid: 7, title: 'Bug' },
      at: at('2026-01-11T00:00:00.000Z'),
    });
    const feed = (query: Record<string, string | number>) =>
      app.request(`/projects/${project.id}/events`, { token, query });
    const titles = async (query: Record<string, string | number>) => {
      const res = await feed(query);
      expect(res.status, res.text).toBe(200);
      return res.body.map((e: { target_title: string | null; action_name: string }) => e.target_title ?? e.action_name);
    };

    expect(await titles({})).toEqual(['Bug', 'Add feeds', 'created']);
    expect(await titles({ sort: 'asc' })).toEqual(['created', 'Add feeds', 'Bug']);
    expect(await titles({ action: 'merged' })).toEqual(['Add feeds']);
    expect(await titles({ target_type: 'merge_request' })).toEqual(['Add feeds']);
    expect(await titles({ target_type: 'issue' })).toEqual(['Bug']);
    expect(await titles({ target_type: 'milestone' })).toEqual([]);
    // after=D: after the end of day D; before=D: before the start of day D (UTC).
    expect(await titles({ after: '2026-01-10', target_type: 'issue' })).toEqual(['Bug']);
    expect(await titles({ after: '2026-01-10', action: 'merged' })).toEqual([]);
    expect(await titles({ after: '2026-01-09', action: 'merged' })).toEqual(['Add feeds']);
    expect(await titles({ before: '2026-01-10', action: 'merged' })).toEqual([]);
    expect(await titles({ before: '2026-01-11' })).toEqual(['Add feeds']);

    const merged = (await feed({ action: 'merged' })).body[0];
    expect(merged).toMatchObject({
      action_name: 'accepted',
      target_type: 'MergeRequest',
      target_id: 9001,
      target_iid: 3,
      target_title: 'Add feeds',
      created_at: '2026-01-10T12:00:00.000Z',
    });
    expect((await feed({ target_type: 'issue' })).body[0]).toMatchObject({ action_name: 'opened', target_iid: 7 });

    const page = await feed({ per_page: 1, page: 2 });
    expect(page.body).toHaveLength(1);
    expect(page.body[0].target_title).toBe('Add feeds');
    expect(page.headers.get('x-total')).toBe('3');
    expect(page.headers.get('x-total-pages')).toBe('3');
    expect(page.headers.get('x-next-page')).toBe('3');
    expect(page.headers.get('x-prev-page')).toBe('1');
    expect(page.headers.get('link')).toContain('rel="next"');
    expect((await feed({ per_page: 500 })).headers.get('x-per-page')).toBe('100');
  });

  it('counts a busy feed up to 10,001 events, as GitLab’s EventsFinder does', async () => {
    const { user, token } = await makeUserWithToken(app);
    const project = await makeProject(app, user, { visibility: 'public' });
    await sql`INSERT INTO events (action, author_id, project_id, push_data, created_at)
      SELECT 'joined', ${user.id}, ${project.id}, 'null'::jsonb, now() FROM generate_series(1, 10050)`.execute(
      app.deps.db,
    );
    const res = await app.request(`/projects/${project.id}/events`, { token, query: { page: 3 } });
    expect(res.body).toHaveLength(20);
    expect([res.headers.get('x-total'), res.headers.get('x-total-pages'), res.headers.get('x-next-page')]).toEqual([
      '10001',
      '501',
      '4',
    ]);
    expect(res.headers.get('link')).toContain('page=501');
  });

  it('answers GitLab’s 400 for bad filters and unknown users, never a 500', async () => {
    const { user, token } = await makeUserWithToken(app);
    const project = await makeProject(app, user);
    const cases: [Record<string, string>, string][] = [
      [{ target_type: 'Issue' }, 'target_type does not have a valid value'],
      [{ target_type: 'wiki_page' }, 'target_type does not have a valid value'],
      [{ action: 'opened' }, 'action does not have a valid value'],
      [{ before: '2026-13-01' }, 'before is invalid'],
      [{ after: 'yesterday' }, 'after is invalid'],
      [{ sort: 'newest' }, 'sort does not have a valid value'],
      [{ page: '0' }, 'page does not have a valid value'],
    ];
    for (const path of ['/events', `/users/${user.id}/events`, `/projects/${project.id}/events`]) {
      for (const [query, error] of cases) {
        const res = await app.request(path, { token, query });
        expect({ path, query, status: res.status, body: res.body }).toEqual({
          path,
          query,
          status: 400,
          body: { error },
        });
      }
    }
    const unknown = await app.request('/users/no-such-user-here/events', { token });
    expect([unknown.status, unknown.body]).toEqual([404, { message: '404 User Not Found' }]);
    const missing = await app.request('/users/2147483000/events', { token });
    expect([missing.status, missing.body]).toEqual([404, { message: '404 User Not Found' }]);
    const noProject = await app.request('/projects/2147483000/events', { token });
    expect([noProject.status, noProject.body]).toEqual([404, { message: '404 Project Not Found' }]);
  });
});

describe('who sees which events', () => {
  it('shows a private project’s events to members only, and pushes to those who may read the code', async () => {
    const { user: owner, token: ownerToken } = await makeUserWithToken(app);
    const { project } = await makeSampleProject(app, owner, { path: `hidden${++counter}`, visibility: 'private' });
    const dev = await makeUser(app);
    await join(project.id, ownerToken, dev);
    const dir = await workClone(project, dev);
    await git(['checkout', '--quiet', '-b', 'secret-work'], dir);
    await commitIn(dir, 's.txt', 'Secret work');
    await push(dir, 'secret-work');
    const { token: guestToken } = await makeProjectMember(app, project, 'guest');
    const { token: reporterToken } = await makeProjectMember(app, project, 'reporter');
    const { token: outsiderToken } = await makeUserWithToken(app);
    const { token: adminToken } = await makeUserWithToken(app, { admin: true });

    const actions = async (path: string, token?: string) => {
      const res = await app.request(path, { token });
      return res.status === 200 ? res.body.map((e: { action_name: string }) => e.action_name) : res.status;
    };
    const projectFeed = `/projects/${project.id}/events`;
    expect(await actions(projectFeed)).toBe(404);
    expect(await actions(projectFeed, outsiderToken)).toBe(404);
    // Guests may not read a private project's code: the push is dropped, the rest stays.
    expect(await actions(projectFeed, guestToken)).toEqual(['joined', 'created']);
    const full = ['pushed new', 'joined', 'created'];
    expect(await actions(projectFeed, reporterToken)).toEqual(full);
    expect(await actions(projectFeed, adminToken)).toEqual(full);
    for (const role of ['developer', 'maintainer'] as const) {
      const { token } = await makeProjectMember(app, project, role);
      expect(await actions(projectFeed, token), role).toEqual(full);
    }
    expect(await actions(projectFeed, ownerToken)).toEqual(full);

    // The developer's profile feed follows the caller's access to each project.
    const devFeed = `/users/${dev.id}/events`;
    expect(await actions(devFeed)).toEqual([]);
    expect(await actions(devFeed, outsiderToken)).toEqual([]);
    expect(await actions(devFeed, guestToken)).toEqual(['joined']);
    expect(await actions(devFeed, reporterToken)).toEqual(['pushed new', 'joined']);
    expect(await actions(devFeed, adminToken)).toEqual(['pushed new', 'joined']);
    // scope=all covers only the caller's own projects.
    expect(await actions('/events?scope=all', outsiderToken)).toEqual([]);
    expect(await actions('/events?scope=all', reporterToken)).toEqual(full);
  });

  it('shows a public project’s events to everyone, pushes only where the repository is open', async () => {
    const { user: owner, token: ownerToken } = await makeUserWithToken(app);
    const { project } = await makeSampleProject(app, owner, { path: `open${++counter}` });
    const dev = await makeUser(app);
    await join(project.id, ownerToken, dev);
    const dir = await workClone(project, dev);
    await git(['checkout', '--quiet', '-b', 'open-work'], dir);
    await commitIn(dir, 'o.txt', 'Open work');
    await push(dir, 'open-work');
    const { token: outsiderToken } = await makeUserWithToken(app);
    const actions = async (path: string, token?: string) =>
      (await app.request(path, { token })).body.map((e: { action_name: string }) => e.action_name);

    expect(await actions(`/projects/${project.id}/events`)).toEqual(['pushed new', 'joined', 'created']);
    expect(await actions(`/users/${dev.id}/events`)).toEqual(['pushed new', 'joined']);
    expect(await actions(`/users/${dev.username}/events`, outsiderToken)).toEqual(['pushed new', 'joined']);

    // Repository for members only: outsiders no longer see the push.
    const changed = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { repository_access_level: 'private' },
    });
    expect(changed.status, changed.text).toBe(200);
    expect(await actions(`/projects/${project.id}/events`, outsiderToken)).toEqual(['joined', 'created']);
    expect(await actions(`/users/${dev.id}/events`)).toEqual(['joined']);
  });

  it('shows a group project’s events to the group’s members, in scope=all too', async () => {
    const { user: owner, token: ownerToken } = await makeUserWithToken(app);
    const group = await makeGroup(app, owner);
    const { user: reporter, token: reporterToken } = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: group.id }, reporter, 20);
    const { project } = await makeSampleProject(app, owner, {
      namespace: group,
      path: `grouped${++counter}`,
      visibility: 'private',
    });
    const branch = await app.request(`/projects/${project.id}/repository/branches`, {
      method: 'POST',
      token: ownerToken,
      body: { branch: 'api-made', ref: 'main' },
    });
    expect(branch.status, branch.text).toBe(201);
    const events = await client(reporterToken).Events.all({ scope: 'all' });
    expect(events.map((e) => [e.project_id, e.action_name, e.push_data])).toEqual([
      [
        project.id,
        'pushed new',
        {
          commit_count: 0,
          action: 'created',
          ref_type: 'branch',
          commit_from: null,
          commit_to: branch.body.commit.id,
          ref: 'api-made',
          commit_title: null,
          ref_count: null,
        },
      ],
      [project.id, 'created', undefined],
    ]);
    // Their own feed holds only what they did.
    expect(await client(reporterToken).Events.all()).toEqual([]);
    const outsider = await makeUserWithToken(app);
    expect(await client(outsider.token).Events.all({ scope: 'all' })).toEqual([]);
    const hidden = await app.request(`/projects/${project.id}/events`, { token: outsider.token });
    expect([hidden.status, hidden.body]).toEqual([404, { message: '404 Project Not Found' }]);
    // The owner's profile feed, seen by the outsider: nothing of the private group's project.
    expect((await app.request(`/users/${owner.id}/events`, { token: outsider.token })).body).toEqual([]);
    expect((await app.request(`/users/${owner.id}/events`, { token: reporterToken })).body).toHaveLength(2);
  });

  it('hides a private profile’s activity from others, not from its owner or administrators', async () => {
    const owner = await makeUser(app);
    const project = await makeProject(app, owner, { visibility: 'public' });
    const { user: shy, token: shyToken } = await makeUserWithToken(app, { private_profile: true });
    await addMember(app, { type: 'project', id: project.id }, shy, 30);
    await recordEvent(app.deps.db, { action: 'joined', authorId: shy.id, projectId: project.id, at: new Date() });
    const { token: otherToken } = await makeUserWithToken(app);
    const { token: adminToken } = await makeUserWithToken(app, { admin: true });
    const feed = `/users/${shy.id}/events`;
    const other = await app.request(feed, { token: otherToken });
    expect([other.status, other.body, other.headers.get('x-total')]).toEqual([200, [], '0']);
    expect((await app.request(feed)).body).toEqual([]);
    expect((await app.request(feed, { token: shyToken })).body).toHaveLength(1);
    expect((await app.request(feed, { token: adminToken })).body).toHaveLength(1);
  });

  it('needs a signed-in caller for /events and the read_user or api scope for the user feeds', async () => {
    const owner = await makeUser(app);
    const project = await makeProject(app, owner, { visibility: 'public' });
    const anonymous = await app.request('/events');
    expect([anonymous.status, anonymous.body]).toEqual([401, { message: '401 Unauthorized' }]);
    const status = async (scopes: string[]) => {
      const token = await makeToken(app, owner, scopes);
      return Promise.all(
        ['/events', `/users/${owner.id}/events`, `/projects/${project.id}/events`].map(
          async (p) => (await app.request(p, { token })).status,
        ),
      );
    };
    expect(await status(['api'])).toEqual([200, 200, 200]);
    expect(await status(['read_api'])).toEqual([200, 200, 200]);
    expect(await status(['read_user'])).toEqual([200, 200, 403]);
    expect(await status(['read_repository'])).toEqual([403, 403, 403]);
  });
});

describe('retention and clean-up', () => {
  it('removes events older than three years in the recurring job, and nothing newer', async () => {
    const owner = await makeUser(app);
    const project = await makeProject(app, owner, { visibility: 'public' });
    const now = app.clock.now();
    const yearsAgo = (years: number, ms: number) => {
      const d = new Date(now.getTime());
      d.setUTCFullYear(d.getUTCFullYear() - years);
      return new Date(d.getTime() + ms);
    };
    const day = 24 * 3600 * 1000;
    for (const [i, at] of [
      yearsAgo(3, -day),
      yearsAgo(3, -60_000),
      yearsAgo(5, 0),
      yearsAgo(3, day),
      yearsAgo(1, 0),
    ].entries()) {
      await recordEvent(app.deps.db, {
        action: 'created',
        authorId: owner.id,
        projectId: project.id,
        target: { type: 'Issue', id: 100 + i, title: `event ${i}` },
        at,
      });
    }
    await enqueueJob(app.deps.db, eventsRetentionJob.kind, { recurring: true });
    expect(await new Worker(app.deps, [eventsRetentionJob]).drain()).toBe(1);
    const left = await app.request(`/projects/${project.id}/events`, { query: { target_type: 'issue', sort: 'asc' } });
    expect(left.body.map((e: { target_title: string }) => e.target_title)).toEqual(['event 3', 'event 4']);
    // The run queued the next one.
    const next = await app.deps.db
      .selectFrom('jobs')
      .select('state')
      .where('kind', '=', eventsRetentionJob.kind)
      .where('state', '=', 'queued')
      .execute();
    expect(next).toHaveLength(1);
  });

  it('removes a deleted project’s events in a background job', async () => {
    const { user: owner, token } = await makeUserWithToken(app);
    const project = await makeProject(app, owner, { visibility: 'public' });
    const keep = await makeProject(app, owner, { visibility: 'public' });
    for (let i = 0; i < 3; i++) {
      await recordEvent(app.deps.db, { action: 'joined', authorId: owner.id, projectId: project.id, at: new Date() });
    }
    const deleted = await app.request(`/projects/${project.id}`, { method: 'DELETE', token });
    expect(deleted.status, deleted.text).toBe(202);
    await new Worker(app.deps, [eventsPurgeJob]).drain();
    const count = async (id: number) =>
      (await app.deps.db.selectFrom('events').select('id').where('project_id', '=', id).execute()).length;
    expect(await count(project.id)).toBe(0);
    expect(await count(keep.id)).toBe(1);
  });
});
