import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { acquireWriteLease } from '../../src/services/write-leases.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  makePersonas,
  makeProjectMember,
  makeSampleProject,
  makeToken,
  makeUser,
  type Persona,
} from '../support/factories.js';

const exec = promisify(execFile);
let app: TestApp;
let owner: User;
let adminToken: string;

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout.trim();

/** A commit on `branch` (created from `from` when new) through the commits API. */
async function commit(project: Project, branch: string, path: string, content: string, from?: string) {
  const res = await app.request(`/projects/${project.id}/repository/commits`, {
    method: 'POST',
    token: adminToken,
    body: {
      branch,
      ...(from ? { start_branch: from } : {}),
      commit_message: `Change ${path}`,
      actions: [{ action: 'create', file_path: path, content }],
    },
  });
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
}

const client = (token: string) => new Gitlab({ host: app.baseUrl, token });

async function mrEvents(project: Project) {
  return app.deps.db
    .selectFrom('events')
    .selectAll()
    .where('project_id', '=', project.id)
    .where('target_type', '=', 'MergeRequest')
    .orderBy('id')
    .execute();
}

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  const admin = await makeUser(app, { admin: true });
  adminToken = await makeToken(app, admin);
});
afterAll(async () => {
  await app?.close();
});

describe('creating merge requests', () => {
  it('creates one with GitLab fields, its head ref and a created event', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'mr-create', visibility: 'private' });
    const head = await commit(project, 'feature-a', 'a.txt', 'a\n', 'main');
    const dev = await makeProjectMember(app, project, 'developer');
    const assignee = await makeProjectMember(app, project, 'reporter');
    const mr = await client(dev.token).MergeRequests.create(project.id, 'feature-a', 'main', 'Add a', {
      description: 'Adds a.txt',
      assigneeIds: [assignee.user.id],
      reviewerIds: [assignee.user.id, 999999],
      removeSourceBranch: true,
    });
    expect(mr).toMatchObject({
      iid: 1,
      project_id: project.id,
      title: 'Add a',
      description: 'Adds a.txt',
      state: 'opened',
      source_branch: 'feature-a',
      target_branch: 'main',
      sha: head,
      merge_commit_sha: null,
      merge_status: 'can_be_merged',
      detailed_merge_status: 'mergeable',
      changes_count: '1',
      user_notes_count: 0,
      force_remove_source_branch: true,
      author: { id: dev.user.id, username: dev.user.username },
      assignees: [{ id: assignee.user.id }],
      reviewers: [{ id: assignee.user.id }],
      references: { short: '!1', full: `${project.full_path}!1` },
      web_url: `${app.baseUrl}/${project.full_path}/-/merge_requests/1`,
      diff_refs: { head_sha: head, start_sha: await git(gitDir, 'rev-parse', 'main') },
    });
    expect(mr.reviewers).toHaveLength(1);
    expect(await git(gitDir, 'rev-parse', 'refs/merge-requests/1/head')).toBe(head);
    const events = await mrEvents(project);
    expect(events).toMatchObject([
      {
        action: 'created',
        author_id: dev.user.id,
        target_type: 'MergeRequest',
        target_id: mr.id,
        target_title: 'Add a',
      },
    ]);
    const second = await client(dev.token).MergeRequests.create(project.id, 'stable', 'main', 'Second');
    expect(second.iid).toBe(2);
  });

  it('refuses bad branches with GitLab statuses, and changes nothing', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'mr-bad', visibility: 'private' });
    await commit(project, 'feature-b', 'b.txt', 'b\n', 'main');
    const dev = await makeProjectMember(app, project, 'developer');
    const post = (body: Record<string, unknown>) =>
      app.request(`/projects/${project.id}/merge_requests`, { method: 'POST', token: dev.token, body });
    expect(await post({ source_branch: 'feature-b', target_branch: 'main' })).toMatchObject({
      status: 400,
      body: { error: 'title is missing' },
    });
    expect(await post({ source_branch: 'main', target_branch: 'main', title: 'x' })).toMatchObject({
      status: 422,
      body: { message: ["You can't use same project/branch for source and target"] },
    });
    expect(await post({ source_branch: 'nope', target_branch: 'main', title: 'x' })).toMatchObject({
      status: 422,
      body: { message: ['Source branch "nope" does not exist'] },
    });
    expect(await post({ source_branch: 'feature-b', target_branch: '-x', title: 'x' })).toMatchObject({ status: 422 });
    expect(await post({ source_branch: 'feature-b', target_branch: 'main', title: 'x'.repeat(256) })).toMatchObject({
      status: 400,
      body: { message: { title: ['is too long (maximum is 255 characters)'] } },
    });
    expect((await post({ source_branch: 'feature-b', target_branch: 'main', title: 'x' })).status).toBe(201);
    expect(await post({ source_branch: 'feature-b', target_branch: 'main', title: 'again' })).toMatchObject({
      status: 409,
      body: { message: ['Another open merge request already exists for this source branch: !1'] },
    });
    expect((await app.request(`/projects/${project.id}/merge_requests`, { token: dev.token })).body).toHaveLength(1);
    const huge = await post({ source_branch: 'feature-b', target_branch: 'main', title: 'x', assignee_ids: [2 ** 40] });
    expect(huge).toMatchObject({ status: 400, body: { error: 'assignee_ids[0] does not have a valid value' } });
    const hugeIid = await app.request(`/projects/${project.id}/merge_requests/${2 ** 40}`, { token: dev.token });
    expect(hugeIid.status).toBe(400);
    const bad = await app.request(`/projects/${project.id}/merge_requests/abc`, { token: dev.token });
    expect(bad.status).toBe(400);
    const missing = await app.request(`/projects/${project.id}/merge_requests/77`, { token: dev.token });
    expect(missing).toMatchObject({ status: 404, body: { message: '404 Merge Request Not Found' } });
  });

  it('answers 403 where the merge requests feature is off', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'mr-feature-off', visibility: 'private' });
    await commit(project, 'feature-off', 'o.txt', 'o\n', 'main');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    const off = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token: maintainer.token,
      body: { merge_requests_access_level: 'disabled' },
    });
    expect(off.status, off.text).toBe(200);
    const list = await app.request(`/projects/${project.id}/merge_requests`, { token: maintainer.token });
    expect(list.status).toBe(403);
    const create = await app.request(`/projects/${project.id}/merge_requests`, {
      method: 'POST',
      token: maintainer.token,
      body: { source_branch: 'feature-off', target_branch: 'main', title: 'x' },
    });
    expect(create.status).toBe(403);
  });

  it('lets developers and up create, and hides private projects', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'mr-roles', visibility: 'private' });
    await commit(project, 'feature-r', 'r.txt', 'r\n', 'main');
    const personas: Persona[] = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<string, number> = {
      anonymous: 401,
      'non-member': 404,
      guest: 403,
      reporter: 403,
      developer: 201,
      maintainer: 409,
      admin: 409,
    };
    for (const persona of personas) {
      const res = await app.request(`/projects/${project.id}/merge_requests`, {
        method: 'POST',
        token: persona.token,
        body: { source_branch: 'feature-r', target_branch: 'main', title: `by ${persona.name}` },
      });
      expect(res.status, `${persona.name}: ${res.text}`).toBe(expected[persona.name]);
      const list = await app.request(`/projects/${project.id}/merge_requests`, { token: persona.token });
      const canRead = ['reporter', 'developer', 'maintainer', 'admin'].includes(persona.name);
      const listStatus = persona.name === 'guest' ? 403 : canRead ? 200 : 404;
      expect(list.status, `${persona.name} list`).toBe(listStatus);
    }
  });
});

describe('public projects', () => {
  it('show merge requests to anyone; approvals still need a sign-in', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'mr-public', visibility: 'public' });
    await commit(project, 'open-work', 'open.txt', 'open\n', 'main');
    const dev = await makeProjectMember(app, project, 'developer');
    await client(dev.token).MergeRequests.create(project.id, 'open-work', 'main', 'In the open');
    const list = await app.request(`/projects/${project.id}/merge_requests`);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject([{ iid: 1, title: 'In the open' }]);
    const one = await app.request(`/projects/${project.id}/merge_requests/1`);
    expect(one.body).toMatchObject({ iid: 1, user: { can_merge: false } });
    expect((await app.request(`/projects/${project.id}/merge_requests/1/approvals`)).status).toBe(401);
    const stranger = await makeUser(app);
    const token = await makeToken(app, stranger);
    expect((await app.request(`/projects/${project.id}/merge_requests/1/approvals`, { token })).status).toBe(200);
    expect(
      (await app.request(`/projects/${project.id}/merge_requests/1/approve`, { method: 'POST', token })).status,
    ).toBe(403);
    expect(
      (
        await app.request(`/projects/${project.id}/merge_requests/1`, {
          method: 'PUT',
          token,
          body: { title: 'mine now' },
        })
      ).status,
    ).toBe(403);
  });
});

describe('listing, reading and updating', () => {
  it('filters by state, branches, author and search; updates, closes and reopens with events', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'mr-update', visibility: 'private' });
    await commit(project, 'feature-u', 'u.txt', 'u\n', 'main');
    const dev = await makeProjectMember(app, project, 'developer');
    const reporter = await makeProjectMember(app, project, 'reporter');
    const api = client(dev.token);
    const first = await api.MergeRequests.create(project.id, 'feature-u', 'main', 'Update things');
    await api.MergeRequests.create(project.id, 'stable', 'main', 'Stable work', { description: 'needle here' });

    const list = (query: Record<string, string>) =>
      app.request(`/projects/${project.id}/merge_requests`, { token: dev.token, query });
    expect((await list({ source_branch: 'feature-u' })).body.map((m: { iid: number }) => m.iid)).toEqual([1]);
    expect((await list({ search: 'needle' })).body.map((m: { iid: number }) => m.iid)).toEqual([2]);
    expect((await list({ order_by: 'title', sort: 'asc' })).body.map((m: { iid: number }) => m.iid)).toEqual([2, 1]);
    expect((await list({ author_id: String(reporter.user.id) })).body).toEqual([]);
    expect((await list({ scope: 'created_by_me' })).body.map((m: { iid: number }) => m.iid).sort()).toEqual([1, 2]);
    const reporterMine = await app.request(`/projects/${project.id}/merge_requests`, {
      token: reporter.token,
      query: { scope: 'created_by_me' },
    });
    expect(reporterMine.body).toEqual([]);
    expect((await list({ state: 'bogus' })).status).toBe(400);
    const all = await api.MergeRequests.all({ projectId: project.id });
    expect(all.map((m) => m.iid).sort()).toEqual([1, 2]);

    expect(
      (await app.request(`/projects/${project.id}/merge_requests/1`, { method: 'PUT', token: dev.token, body: {} }))
        .status,
    ).toBe(400);
    expect(
      (
        await app.request(`/projects/${project.id}/merge_requests/1`, {
          method: 'PUT',
          token: reporter.token,
          body: { title: 'no' },
        })
      ).status,
    ).toBe(403);
    const edited = await api.MergeRequests.edit(project.id, 1, { title: 'Renamed', description: 'new' });
    expect(edited).toMatchObject({ title: 'Renamed', description: 'new', state: 'opened' });
    const closed = await api.MergeRequests.edit(project.id, 1, { stateEvent: 'close' });
    expect(closed).toMatchObject({
      state: 'closed',
      closed_by: { id: dev.user.id },
      detailed_merge_status: 'not_open',
    });
    expect(closed.closed_at).not.toBeNull();
    expect((await list({ state: 'closed' })).body.map((m: { iid: number }) => m.iid)).toEqual([1]);
    const reopened = await api.MergeRequests.edit(project.id, 1, { stateEvent: 'reopen' });
    expect(reopened).toMatchObject({ state: 'opened', closed_by: null });
    expect((await mrEvents(project)).map((e) => e.action)).toEqual(['created', 'created', 'closed', 'reopened']);

    const commits = await api.MergeRequests.allCommits(project.id, first.iid);
    expect(commits.map((c) => c.id)).toEqual([await git(gitDir, 'rev-parse', 'feature-u')]);
    const changes = await api.MergeRequests.showChanges(project.id, first.iid);
    expect(changes.changes).toMatchObject([{ new_path: 'u.txt', new_file: true, diff: '@@ -0,0 +1 @@\n+u\n' }]);
    const diffs = await app.request(`/projects/${project.id}/merge_requests/1/diffs`, { token: dev.token });
    expect(diffs.body).toMatchObject([{ new_path: 'u.txt' }]);
  });

  it('takes new source commits as its head, its head ref and unchecked mergeability', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'mr-push', visibility: 'private' });
    await commit(project, 'feature-p', 'p.txt', 'p\n', 'main');
    const dev = await makeProjectMember(app, project, 'developer');
    await client(dev.token).MergeRequests.create(project.id, 'feature-p', 'main', 'Push');
    const next = await commit(project, 'feature-p', 'p2.txt', 'p2\n');
    const row = await app.deps.db
      .selectFrom('merge_requests')
      .selectAll()
      .where('target_project_id', '=', project.id)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ sha: next, merge_status: 'unchecked' });
    expect(await git(gitDir, 'rev-parse', 'refs/merge-requests/1/head')).toBe(next);
    const shown = await client(dev.token).MergeRequests.show(project.id, 1);
    expect(shown).toMatchObject({ sha: next, merge_status: 'can_be_merged', changes_count: '2' });
  });
});

describe('merging', () => {
  it('merges with a merge commit for a maintainer; refuses others with GitLab statuses', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'mr-merge', visibility: 'private' });
    const head = await commit(project, 'feature-m', 'm.txt', 'm\n', 'main');
    const dev = await makeProjectMember(app, project, 'developer');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    const reporter = await makeProjectMember(app, project, 'reporter');
    await client(dev.token).MergeRequests.create(project.id, 'feature-m', 'main', 'Merge me', {
      removeSourceBranch: true,
    });
    const mainBefore = await git(gitDir, 'rev-parse', 'main');
    const merge = (token: string | undefined, body: Record<string, unknown> = {}) =>
      app.request(`/projects/${project.id}/merge_requests/1/merge`, { method: 'PUT', token, body });
    expect((await merge(undefined)).status).toBe(401);
    // The default branch is fully protected: developers may not merge into it.
    expect(await merge(dev.token)).toMatchObject({ status: 401, body: { message: '401 Unauthorized' } });
    expect(await merge(reporter.token)).toMatchObject({ status: 401 });
    expect(await merge(maintainer.token, { sha: mainBefore })).toMatchObject({
      status: 409,
      body: { message: `SHA does not match HEAD of source branch: ${head}` },
    });
    expect(await git(gitDir, 'rev-parse', 'main')).toBe(mainBefore);

    const merged = await client(maintainer.token).MergeRequests.accept(project.id, 1, { sha: head });
    expect(merged).toMatchObject({ state: 'merged', merged_by: { id: maintainer.user.id }, sha: head });
    const tip = await git(gitDir, 'rev-parse', 'main');
    expect(merged.merge_commit_sha).toBe(tip);
    expect(await git(gitDir, 'rev-parse', `${tip}^1`)).toBe(mainBefore);
    expect(await git(gitDir, 'rev-parse', `${tip}^2`)).toBe(head);
    expect(await git(gitDir, 'log', '-1', '--format=%B', tip)).toBe(
      `Merge branch 'feature-m' into 'main'\n\nMerge me\n\nSee merge request ${project.full_path}!1`,
    );
    expect(await git(gitDir, 'show', 'main:m.txt')).toBe('m');
    // remove_source_branch was asked for at creation.
    await expect(git(gitDir, 'rev-parse', '--verify', 'refs/heads/feature-m')).rejects.toThrow();
    expect((await mrEvents(project)).map((e) => e.action)).toEqual(['created', 'merged']);
    expect(await merge(maintainer.token)).toMatchObject({ status: 405, body: { message: '405 Method Not Allowed' } });
  });

  it('answers 406 for conflicts and fast-forwards in ff projects', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'mr-ff', visibility: 'private' });
    await commit(project, 'left', 'same.txt', 'left\n', 'main');
    await commit(project, 'right', 'same.txt', 'right\n', 'main');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    const api = client(maintainer.token);
    await api.MergeRequests.create(project.id, 'left', 'main', 'Left');
    const right = await api.MergeRequests.create(project.id, 'right', 'main', 'Right');
    expect(right.merge_status).toBe('can_be_merged');
    await api.MergeRequests.accept(project.id, 1);
    const conflicted = await api.MergeRequests.show(project.id, right.iid);
    expect(conflicted).toMatchObject({
      merge_status: 'cannot_be_merged',
      detailed_merge_status: 'conflict',
      has_conflicts: true,
    });
    const res = await app.request(`/projects/${project.id}/merge_requests/2/merge`, {
      method: 'PUT',
      token: maintainer.token,
    });
    expect(res).toMatchObject({ status: 406, body: { message: 'Branch cannot be merged' } });

    const put = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token: maintainer.token,
      body: { merge_method: 'ff' },
    });
    expect(put.status, put.text).toBe(200);
    const head = await commit(project, 'ff-branch', 'ff.txt', 'ff\n', 'main');
    await api.MergeRequests.create(project.id, 'ff-branch', 'main', 'Fast');
    const merged = await api.MergeRequests.accept(project.id, 3);
    expect(merged.state).toBe('merged');
    expect(await git(gitDir, 'rev-parse', 'main')).toBe(head);
    await commit(project, 'behind', 'behind.txt', 'b\n', 'stable');
    await api.MergeRequests.create(project.id, 'behind', 'main', 'Needs rebase');
    const behind = await api.MergeRequests.show(project.id, 4);
    expect(behind.detailed_merge_status).toBe('need_rebase');
    expect(
      (await app.request(`/projects/${project.id}/merge_requests/4/merge`, { method: 'PUT', token: maintainer.token }))
        .status,
    ).toBe(406);
  });
});

describe('concurrent merges', () => {
  it('merge once: one answer is 200, the other a refusal, and main has one merge commit', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'mr-race', visibility: 'private' });
    const head = await commit(project, 'racing', 'race.txt', 'race\n', 'main');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    await client(maintainer.token).MergeRequests.create(project.id, 'racing', 'main', 'Race');
    const before = await git(gitDir, 'rev-parse', 'main');
    const results = await Promise.all(
      [1, 2, 3].map(() =>
        app.request(`/projects/${project.id}/merge_requests/1/merge`, { method: 'PUT', token: maintainer.token }),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    for (const status of statuses.filter((s) => s !== 200)) expect([405, 409]).toContain(status);
    expect(await git(gitDir, 'rev-list', '--count', `${before}..main`)).toBe('2');
    expect(await git(gitDir, 'rev-parse', 'main^2')).toBe(head);
    const events = await mrEvents(project);
    expect(events.filter((e) => e.action === 'merged')).toHaveLength(1);
  });
});

describe('squash', () => {
  it('squashes the commits into one on the merge base, then merges it', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'mr-squash', visibility: 'private' });
    await commit(project, 'squashed', 's1.txt', '1\n', 'main');
    const head = await commit(project, 'squashed', 's2.txt', '2\n');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    const base = await git(gitDir, 'rev-parse', 'main');
    await client(maintainer.token).MergeRequests.create(project.id, 'squashed', 'main', 'Squash me');
    const merged = await client(maintainer.token).MergeRequests.accept(project.id, 1, {
      squash: true,
      squashCommitMessage: 'One commit',
      shouldRemoveSourceBranch: false,
    });
    expect(merged).toMatchObject({ state: 'merged', squash: true });
    const squash = merged.squash_commit_sha as string;
    expect(squash).toMatch(/^[0-9a-f]{40}$/);
    expect(await git(gitDir, 'rev-parse', 'main^2')).toBe(squash);
    expect(await git(gitDir, 'rev-parse', `${squash}^`)).toBe(base);
    expect(await git(gitDir, 'log', '-1', '--format=%s', squash)).toBe('One commit');
    expect(await git(gitDir, 'rev-parse', `${squash}^{tree}`)).toBe(await git(gitDir, 'rev-parse', `${head}^{tree}`));
    // The source branch stays when asked.
    expect(await git(gitDir, 'rev-parse', 'refs/heads/squashed')).toBe(head);
  });
});

describe('merge locks', () => {
  it('refuses a merge request another merge holds, and takes over a lock left by a dead merge', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'mr-lock', visibility: 'private' });
    await commit(project, 'locked-branch', 'l.txt', 'l\n', 'main');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    const created = await client(maintainer.token).MergeRequests.create(project.id, 'locked-branch', 'main', 'Lock');
    const lock = (updatedAt: Date) =>
      app.deps.db
        .updateTable('merge_requests')
        .set({ state: 'locked', updated_at: updatedAt })
        .where('id', '=', created.id)
        .execute();
    const merge = () =>
      app.request(`/projects/${project.id}/merge_requests/1/merge`, { method: 'PUT', token: maintainer.token });
    // Another merge under way holds the lock and a write lease on the repository.
    const lease = await acquireWriteLease(app.deps, project, 'merge');
    await lock(app.clock.now());
    expect((await merge()).status).toBe(405);
    // Even then, a lock older than any merge is taken over.
    await lock(new Date(app.clock.now().getTime() - 60 * 60 * 1000));
    expect((await merge()).status).toBe(200);
    await lease?.release();
  });

  it('takes over at once the lock of a merge whose process died (no merge lease left)', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'mr-dead-lock', visibility: 'private' });
    await commit(project, 'dead-branch', 'd.txt', 'd\n', 'main');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    const created = await client(maintainer.token).MergeRequests.create(project.id, 'dead-branch', 'main', 'Dead');
    await app.deps.db
      .updateTable('merge_requests')
      .set({ state: 'locked', updated_at: app.clock.now() })
      .where('id', '=', created.id)
      .execute();
    // Another write (repository maintenance, a push) under way is no merge holding the lock.
    const other = await acquireWriteLease(app.deps, project, 'maintenance');
    const merged = await app.request(`/projects/${project.id}/merge_requests/1/merge`, {
      method: 'PUT',
      token: maintainer.token,
    });
    await other?.release();
    expect(merged.status, merged.text).toBe(200);
    expect(merged.body.state).toBe('merged');
  });
});

describe('changelog entries', () => {
  it('carry the merge request that brought a commit, by merge commit and by its commits', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'mr-changelog', visibility: 'private' });
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    const start = await git(gitDir, 'rev-parse', 'main');
    const res = await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token: adminToken,
      body: {
        branch: 'with-entry',
        start_branch: 'main',
        commit_message: 'Add the widget\n\nChangelog: added',
        actions: [{ action: 'create', file_path: 'widget.txt', content: 'w\n' }],
      },
    });
    expect(res.status).toBe(201);
    // A commit straight on main with a trailer has no merge request.
    await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token: adminToken,
      body: {
        branch: 'main',
        commit_message: 'Fix the gadget\n\nChangelog: fixed',
        actions: [{ action: 'create', file_path: 'gadget.txt', content: 'g\n' }],
      },
    });
    const api = client(maintainer.token);
    await api.MergeRequests.create(project.id, 'with-entry', 'main', 'Widget');
    await api.MergeRequests.accept(project.id, 1);
    const changelog = await app.request(`/projects/${project.id}/repository/changelog`, {
      token: maintainer.token,
      query: { version: '9.9.9', from: start, to: 'main' },
    });
    expect(changelog.status, changelog.text).toBe(200);
    const notes: string = changelog.body.notes;
    const mrUrl = `${app.baseUrl}/${project.full_path}/-/merge_requests/1`;
    expect(notes).toMatch(
      new RegExp(`Add the widget\\]\\([^)]*\\) \\(\\[merge request\\]\\(${mrUrl.replace(/[.]/g, '\\.')}\\)\\)`),
    );
    expect(notes).toMatch(/Fix the gadget\]\([^)]*\)\n/);
  });
});
