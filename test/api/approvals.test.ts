import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { syncCodeOwnerRules } from '../../src/services/code-owners.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  addMember,
  makeGroup,
  makePersonas,
  makeProjectMember,
  makeSampleProject,
  makeToken,
  makeUser,
  makeUserWithToken,
  ROLES,
} from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

const exec = promisify(execFile);
let app: TestApp;
let owner: User;
let adminToken: string;

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout.trim();
const client = (token: string) => new Gitlab({ host: app.baseUrl, token });

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

/** A private project with a merge request `feature` → main by a developer, and its members. */
async function world(path: string) {
  const { project, gitDir } = await makeSampleProject(app, owner, { path, visibility: 'private' });
  const head = await commit(project, 'topic', `${path}.txt`, 'x\n', 'main');
  const author = await makeProjectMember(app, project, 'developer');
  const dev = await makeProjectMember(app, project, 'developer');
  const maintainer = await makeProjectMember(app, project, 'maintainer');
  const reporter = await makeProjectMember(app, project, 'reporter');
  const mr = await client(author.token).MergeRequests.create(project.id, 'topic', 'main', 'Feature');
  return { project, gitDir, head, author, dev, maintainer, reporter, mr };
}

const req = (path: string, method: string, token: string | undefined, body?: Record<string, unknown>) =>
  app.request(path, { method, token, ...(body ? { body } : {}) });

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  const admin = await makeUser(app, { admin: true });
  adminToken = await makeToken(app, admin);
});
afterAll(async () => {
  await app?.close();
});

describe('project approval configuration', () => {
  it('has GitLab defaults; maintainers change it, others may not', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'appr-config', visibility: 'private' });
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const byName = Object.fromEntries(personas.map((p) => [p.name, p]));
    const maintainer = byName.maintainer?.token as string;
    const config = await client(maintainer).MergeRequestApprovals.showConfiguration(project.id);
    expect(config).toMatchObject({
      approvals_before_merge: 0,
      reset_approvals_on_push: true,
      disable_overriding_approvers_per_merge_request: false,
      merge_requests_author_approval: false,
      merge_requests_disable_committers_approval: false,
      require_password_to_approve: false,
    });
    const expected: Record<string, [number, number]> = {
      anonymous: [401, 401],
      'non-member': [404, 404],
      guest: [200, 403],
      reporter: [200, 403],
      developer: [200, 403],
      maintainer: [200, 201],
      admin: [200, 201],
    };
    for (const persona of personas) {
      const get = await req(`/projects/${project.id}/approvals`, 'GET', persona.token);
      const post = await req(`/projects/${project.id}/approvals`, 'POST', persona.token, {
        reset_approvals_on_push: false,
      });
      expect([get.status, post.status], persona.name).toEqual(expected[persona.name]);
    }
    const changed = await client(maintainer).MergeRequestApprovals.editConfiguration(project.id, {
      mergeRequestsAuthorApproval: true,
      requirePasswordToApprove: true,
    });
    expect(changed).toMatchObject({
      reset_approvals_on_push: false,
      merge_requests_author_approval: true,
      require_password_to_approve: true,
    });
    expect(
      await req(`/projects/${project.id}/approvals`, 'POST', maintainer, { approvals_before_merge: -1 }),
    ).toMatchObject({
      status: 400,
    });
    expect(
      await req(`/projects/${project.id}/approvals`, 'POST', maintainer, { reset_approvals_on_push: 'maybe' }),
    ).toMatchObject({
      status: 400,
      body: { error: 'reset_approvals_on_push is invalid' },
    });
  });
});

describe('project approval rules', () => {
  it('creates, lists, changes and deletes rules with users and groups; refuses bad input', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'appr-rules', visibility: 'private' });
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    const dev = await makeProjectMember(app, project, 'developer');
    const approver = await makeProjectMember(app, project, 'developer');
    const group = await makeGroup(app, owner, { path: 'appr-group' });
    const groupie = await makeUser(app);
    await addMember(app, { type: 'group', id: group.id }, groupie, ROLES.developer);
    const api = client(maintainer.token).MergeRequestApprovals;
    const rule = await api.createApprovalRule(project.id, 'Security', 2, {
      userIds: [approver.user.id],
      groupIds: [group.id],
    });
    expect(rule).toMatchObject({
      name: 'Security',
      rule_type: 'regular',
      approvals_required: 2,
      users: [{ id: approver.user.id }],
      groups: [{ id: group.id, full_path: group.full_path }],
      protected_branches: [],
      contains_hidden_groups: false,
    });
    // The group's members: the one added and its creator (an owner).
    const eligible = (rule.eligible_approvers ?? []).map((u: { id: number }) => u.id);
    expect(eligible.sort((a: number, b: number) => a - b)).toEqual(
      [approver.user.id, groupie.id, owner.id].sort((a, b) => a - b),
    );
    const listed = await api.allApprovalRules(project.id);
    expect(listed.map((r) => r.id)).toEqual([rule.id]);
    expect(await api.showApprovalRule(project.id, rule.id)).toMatchObject({ id: rule.id, name: 'Security' });

    const base = `/projects/${project.id}/approval_rules`;
    const before = await req(base, 'GET', maintainer.token);
    const bad: [Record<string, unknown>, number][] = [
      [{ name: 'x', approvals_required: -1 }, 400],
      [{ name: 'x', approvals_required: 1, user_ids: [99999999] }, 400],
      [{ name: 'x', approvals_required: 1, group_ids: [99999999] }, 400],
      [{ name: 'x', approvals_required: 1, protected_branch_ids: [424242] }, 400],
      [{ approvals_required: 1 }, 400],
      [{ name: 'x' }, 400],
      [{ name: 'x', approvals_required: 'two' }, 400],
      [{ name: 'Security', approvals_required: 1 }, 400],
      [{ name: 'x', approvals_required: 1, user_ids: [2147483648] }, 400],
      [{ name: 'x', approvals_required: 99999999999 }, 400],
      [{ name: 'x', approvals_required: 1, group_ids: 'a,b' }, 400],
    ];
    for (const [body, status] of bad) {
      const res = await req(base, 'POST', maintainer.token, body);
      expect(res.status, JSON.stringify(body) + res.text).toBe(status);
    }
    expect((await req(base, 'POST', maintainer.token, { name: 'x', approvals_required: -1 })).body).toEqual({
      message: { approvals_required: ['must be greater than or equal to 0'] },
    });
    expect((await req(base, 'GET', maintainer.token)).body).toEqual(before.body);
    expect((await req(base, 'POST', dev.token, { name: 'y', approvals_required: 1 })).status).toBe(403);

    const named = await api.createApprovalRule(project.id, 'By name', 1, { usernames: [dev.user.username] });
    expect(named.users).toMatchObject([{ id: dev.user.id }]);
    expect(
      (await req(base, 'POST', maintainer.token, { name: 'z', approvals_required: 1, usernames: ['nobody-here'] }))
        .status,
    ).toBe(400);
    expect((await req(`${base}/${named.id}`, 'DELETE', maintainer.token)).status).toBe(204);

    const edited = await api.editApprovalRule(project.id, rule.id, 'Security', 1, { userIds: [] });
    expect(edited).toMatchObject({ approvals_required: 1, users: [], groups: [{ id: group.id }] });
    expect((await req(`${base}/${rule.id}`, 'PUT', dev.token, { name: 'S', approvals_required: 3 })).status).toBe(403);
    // The spec requires both on update.
    expect(await req(`${base}/${rule.id}`, 'PUT', maintainer.token, { approvals_required: 3 })).toMatchObject({
      status: 400,
      body: { error: 'name is missing' },
    });
    expect((await req(`${base}/${rule.id}`, 'DELETE', dev.token)).status).toBe(403);
    expect((await req(`${base}/${rule.id}`, 'DELETE', maintainer.token)).status).toBe(204);
    expect((await req(`${base}/${rule.id}`, 'GET', maintainer.token)).status).toBe(404);
  });
});

describe('approving and merging', () => {
  it('blocks the merge until the rule is met, then merges; author and sha rules hold', async () => {
    const { project, gitDir, head, author, dev, maintainer, reporter } = await world('appr-flow');
    const approver = await makeProjectMember(app, project, 'developer');
    await client(maintainer.token).MergeRequestApprovals.createApprovalRule(project.id, 'Reviewers', 1, {
      userIds: [approver.user.id, author.user.id],
    });
    const approvals = await client(dev.token).MergeRequestApprovals.showConfiguration(project.id, {
      mergerequestIId: 1,
    });
    expect(approvals).toMatchObject({
      iid: 1,
      approvals_required: 1,
      approvals_left: 1,
      approved: false,
      approved_by: [],
      user_has_approved: false,
    });
    const shown = await client(dev.token).MergeRequests.show(project.id, 1);
    expect(shown.detailed_merge_status).toBe('not_approved');
    const merge = () => req(`/projects/${project.id}/merge_requests/1/merge`, 'PUT', maintainer.token);
    expect(await merge()).toMatchObject({ status: 405, body: { message: '405 Method Not Allowed' } });

    const approve = (token: string, body: Record<string, unknown> = {}) =>
      req(`/projects/${project.id}/merge_requests/1/approve`, 'POST', token, body);
    // The author is eligible by the rule but may not approve their own merge request.
    expect(await approve(author.token)).toMatchObject({ status: 401 });
    expect(await approve(reporter.token)).toMatchObject({ status: 403 });
    expect(await approve(approver.token, { sha: 'deadbeef' })).toMatchObject({
      status: 409,
      body: { message: `SHA does not match HEAD of source branch: ${head}` },
    });
    // A developer outside the rule may approve, but it does not count for the rule.
    const byDev = await approve(dev.token);
    expect(byDev.status).toBe(201);
    expect(byDev.body).toMatchObject({ approvals_left: 1, approved_by: [{ user: { id: dev.user.id } }] });
    expect(await approve(dev.token)).toMatchObject({ status: 401 });

    const approved = await client(approver.token).MergeRequestApprovals.approve(project.id, 1, { sha: head });
    expect(approved).toMatchObject({ approvals_left: 0, approved: true, user_has_approved: true });
    const state = await client(dev.token).MergeRequestApprovals.showApprovalState(project.id, 1);
    expect(state).toMatchObject({
      approval_rules_overwritten: false,
      rules: [{ name: 'Reviewers', approved: true, approved_by: [{ id: approver.user.id }] }],
    });
    const events = await app.deps.db
      .selectFrom('events')
      .select(['action', 'author_id'])
      .where('project_id', '=', project.id)
      .where('action', '=', 'approved')
      .orderBy('id')
      .execute();
    expect(events).toEqual([
      { action: 'approved', author_id: dev.user.id },
      { action: 'approved', author_id: approver.user.id },
    ]);

    const merged = await merge();
    expect(merged.status, merged.text).toBe(200);
    expect(merged.body.state).toBe('merged');
    expect(await git(gitDir, 'rev-parse', 'main^2')).toBe(head);
  });

  it('counts concurrent approvals once per user', async () => {
    const { project, dev, maintainer } = await world('appr-race');
    const others = [
      await makeProjectMember(app, project, 'developer'),
      await makeProjectMember(app, project, 'developer'),
    ];
    const approve = (token: string) => req(`/projects/${project.id}/merge_requests/1/approve`, 'POST', token);
    const results = await Promise.all([
      ...Array.from({ length: 6 }, () => approve(dev.token)),
      ...others.map((o) => approve(o.token)),
      approve(maintainer.token),
    ]);
    expect(
      results
        .slice(0, 6)
        .map((r) => r.status)
        .sort(),
    ).toEqual([201, 401, 401, 401, 401, 401]);
    expect(results.slice(6).map((r) => r.status)).toEqual([201, 201, 201]);
    const answer = await req(`/projects/${project.id}/merge_requests/1/approvals`, 'GET', dev.token);
    const approvers = answer.body.approved_by.map((a: { user: { id: number } }) => a.user.id);
    expect(approvers.sort((a: number, b: number) => a - b)).toEqual(
      [dev.user.id, ...others.map((o) => o.user.id), maintainer.user.id].sort((a, b) => a - b),
    );
  });

  it('checks the approval password, unapproves, and resets approvals on push', async () => {
    const { project, dev, maintainer, author } = await world('appr-password');
    const passwordUser = await makeUserWithToken(app, { password: 'correct-horse-battery' });
    await addMember(app, { type: 'project', id: project.id }, passwordUser.user, ROLES.developer);
    await client(maintainer.token).MergeRequestApprovals.editConfiguration(project.id, {
      requirePasswordToApprove: true,
    });
    const approve = (token: string, body: Record<string, unknown> = {}) =>
      req(`/projects/${project.id}/merge_requests/1/approve`, 'POST', token, body);
    expect((await approve(passwordUser.token)).status).toBe(401);
    expect((await approve(passwordUser.token, { approval_password: 'wrong' })).status).toBe(401);
    expect((await approve(passwordUser.token, { approval_password: 'correct-horse-battery' })).status).toBe(201);

    const unapprove = (token: string) => req(`/projects/${project.id}/merge_requests/1/unapprove`, 'POST', token);
    expect((await unapprove(passwordUser.token)).status).toBe(201);
    expect((await unapprove(passwordUser.token)).status).toBe(404);
    expect((await unapprove(dev.token)).status).toBe(404);

    await client(maintainer.token).MergeRequestApprovals.editConfiguration(project.id, {
      requirePasswordToApprove: false,
    });
    expect((await approve(dev.token)).status).toBe(201);
    await commit(project, 'topic', 'more.txt', 'more\n');
    const after = await client(author.token).MergeRequestApprovals.showConfiguration(project.id, {
      mergerequestIId: 1,
    });
    expect(after.approved_by).toEqual([]);

    // Without reset_approvals_on_push the approval stays.
    await client(maintainer.token).MergeRequestApprovals.editConfiguration(project.id, { resetApprovalsOnPush: false });
    expect((await approve(dev.token)).status).toBe(201);
    await commit(project, 'topic', 'more2.txt', 'more\n');
    const kept = await client(author.token).MergeRequestApprovals.showConfiguration(project.id, { mergerequestIId: 1 });
    expect(kept.approved_by).toMatchObject([{ user: { id: dev.user.id } }]);
  });

  it('refuses committers when the project says so, and lets authors approve when allowed', async () => {
    const { project, maintainer, author } = await world('appr-committers');
    // The admin user wrote the commits through the API: it is the committer.
    const admin = await app.deps.db
      .selectFrom('users')
      .selectAll()
      .where('admin', '=', true)
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow();
    await client(maintainer.token).MergeRequestApprovals.editConfiguration(project.id, {
      mergeRequestsDisableCommittersApproval: true,
      mergeRequestsAuthorApproval: true,
    });
    const approve = (token: string) => req(`/projects/${project.id}/merge_requests/1/approve`, 'POST', token);
    expect((await approve(adminToken)).status, admin.username).toBe(401);
    expect((await approve(author.token)).status).toBe(201);
  });
});

describe('merge request approval rules', () => {
  it('creates rules of its own, copies project rules, and protects code owner rules', async () => {
    const { project, author, dev, maintainer, reporter } = await world('appr-mr-rules');
    const approver = await makeProjectMember(app, project, 'developer');
    const projectRule = await client(maintainer.token).MergeRequestApprovals.createApprovalRule(project.id, 'Base', 2, {
      userIds: [approver.user.id],
    });
    const api = client(author.token).MergeRequestApprovals;
    // gitbeaker's types lack approval_project_rule_id; it sends what it is given.
    const copyOptions = { mergerequestIId: 1, approvalProjectRuleId: projectRule.id } as { mergerequestIId: number };
    const copied = await api.createApprovalRule(project.id, 'ignored', 1, copyOptions);
    expect(copied).toMatchObject({
      name: 'Base',
      approvals_required: 1,
      users: [{ id: approver.user.id }],
      source_rule: { approvals_required: 2 },
      overridden: true,
    });
    const own = await api.createApprovalRule(project.id, 'Own', 1, { mergerequestIId: 1, userIds: [dev.user.id] });
    const state = await api.showApprovalState(project.id, 1);
    expect(state.approval_rules_overwritten).toBe(true);
    expect(state.rules.map((r: { name: string }) => r.name)).toEqual(['Base', 'Own']);
    const approvals = await api.showConfiguration(project.id, { mergerequestIId: 1 });
    expect(approvals).toMatchObject({ approvals_required: 2, approvals_left: 2 });

    const base = `/projects/${project.id}/merge_requests/1/approval_rules`;
    expect((await req(base, 'POST', reporter.token, { name: 'r', approvals_required: 1 })).status).toBe(403);
    expect((await req(base, 'POST', author.token, { name: 'r', approvals_required: -2 })).status).toBe(400);
    expect(
      (await req(base, 'POST', author.token, { name: 'r', approvals_required: 1, user_ids: [987654321] })).status,
    ).toBe(400);
    const edited = await api.editApprovalRule(project.id, own.id, 'Own', 0, { mergerequestIId: 1 });
    expect(edited).toMatchObject({ approvals_required: 0, users: [{ id: dev.user.id }] });

    const now = new Date();
    const codeOwner = await app.deps.db
      .insertInto('approval_merge_request_rules')
      .values({
        merge_request_id: (await api.showConfiguration(project.id, { mergerequestIId: 1 })).id as number,
        name: '*.md',
        rule_type: 'code_owner',
        approvals_required: 1,
        section: 'codeowners',
        created_at: now,
        updated_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    expect(
      (await req(`${base}/${codeOwner.id}`, 'PUT', author.token, { name: '*.md', approvals_required: 0 })).status,
    ).toBe(403);
    expect((await req(`${base}/${codeOwner.id}`, 'DELETE', author.token)).status).toBe(403);
    expect((await req(`${base}/${own.id}`, 'DELETE', author.token)).status).toBe(204);
    expect((await req(`${base}/${own.id}`, 'DELETE', author.token)).status).toBe(404);

    await client(maintainer.token).MergeRequestApprovals.editConfiguration(project.id, {
      disableOverridingApproversPerMergeRequest: true,
    });
    expect((await req(base, 'POST', author.token, { name: 'late', approvals_required: 1 })).status).toBe(403);

    const listed = await req(base, 'GET', dev.token);
    expect(listed.body.map((r: { name: string }) => r.name)).toEqual(['Base', '*.md']);
    expect((await req(base, 'GET', undefined)).status).toBe(401);
  });

  it('sets approvals_required through the deprecated POST …/approvals', async () => {
    const { project, author, dev } = await world('appr-deprecated');
    const res = await req(`/projects/${project.id}/merge_requests/1/approvals`, 'POST', author.token, {
      approvals_required: 2,
    });
    expect(res).toMatchObject({ status: 201, body: { approvals_required: 2, approvals_left: 2 } });
    expect(
      (
        await req(`/projects/${project.id}/merge_requests/1/approvals`, 'POST', author.token, {
          approvals_required: -1,
        })
      ).status,
    ).toBe(400);
    await req(`/projects/${project.id}/merge_requests/1/approve`, 'POST', dev.token);
    const after = await req(`/projects/${project.id}/merge_requests/1/approvals`, 'GET', author.token);
    expect(after.body).toMatchObject({ approvals_required: 2, approvals_left: 1 });
  });
});

describe('code owners', () => {
  it('makes code_owner rules from CODEOWNERS for the files changed, and they gate the merge', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'appr-owners', visibility: 'private' });
    const docsOwner = await makeProjectMember(app, project, 'developer');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    const author = await makeProjectMember(app, project, 'developer');
    const group = await makeGroup(app, owner, { path: 'owners-group' });
    const codeowners = [
      `*.md @${docsOwner.user.username}`,
      `/src/ @${group.full_path}`,
      '^[Optional]',
      `*.md @${maintainer.user.username}`,
    ].join('\n');
    await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token: adminToken,
      body: {
        branch: 'main',
        commit_message: 'Add code owners',
        actions: [{ action: 'create', file_path: '.gitlab/CODEOWNERS', content: `${codeowners}\n` }],
      },
    });
    await commit(project, 'docs-change', 'guide.md', 'guide\n', 'main');
    const created = await client(author.token).MergeRequests.create(project.id, 'docs-change', 'main', 'Docs');
    const mr = await app.deps.db
      .selectFrom('merge_requests')
      .selectAll()
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    // The target branch requires code-owner approval (what protected branches will decide).
    await syncCodeOwnerRules(app.deps, project, mr, gitDir, true);

    const state = await client(author.token).MergeRequestApprovals.showApprovalState(project.id, created.iid);
    expect(state.rules).toMatchObject([
      {
        name: '*.md',
        rule_type: 'code_owner',
        code_owner: true,
        section: 'codeowners',
        approvals_required: 1,
        approved: false,
        users: [{ id: docsOwner.user.id }],
      },
      { name: '*.md', rule_type: 'code_owner', section: 'Optional', approvals_required: 0, approved: true },
    ]);
    const merge = () => req(`/projects/${project.id}/merge_requests/${created.iid}/merge`, 'PUT', maintainer.token);
    expect((await merge()).status).toBe(405);
    const approved = await client(docsOwner.token).MergeRequestApprovals.approve(project.id, created.iid);
    expect(approved).toMatchObject({ approvals_left: 0 });
    expect((await merge()).status).toBe(200);
  });
});

describe('approve: who may', () => {
  it('answers each role as GitLab does', async () => {
    const { project } = await world('appr-roles');
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<string, number> = {
      anonymous: 401,
      'non-member': 404,
      guest: 403,
      reporter: 403,
      developer: 201,
      maintainer: 201,
      owner: 201,
      admin: 201,
    };
    for (const persona of personas) {
      const res = await req(`/projects/${project.id}/merge_requests/1/approve`, 'POST', persona.token);
      expect(res.status, `${persona.name}: ${res.text}`).toBe(expected[persona.name]);
    }
    const answer = await req(`/projects/${project.id}/merge_requests/1/approvals`, 'GET', adminToken);
    expect(answer.body.approved_by).toHaveLength(3);
  });
});

describe('git push to the source branch', () => {
  it('moves the merge request head and drops its approvals', async () => {
    const { project, gitDir, dev, author } = await world('appr-git-push');
    expect((await req(`/projects/${project.id}/merge_requests/1/approve`, 'POST', dev.token)).status).toBe(201);
    const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-mr-push-'));
    try {
      const remote = remoteUrl(app.baseUrl, project, { login: author.user.username, password: author.token });
      const clone = path.join(scratch, 'work');
      expect((await runGitClient(['clone', '--quiet', '--branch', 'topic', remote, clone], scratch)).code).toBe(0);
      await fs.writeFile(path.join(clone, 'pushed.txt'), 'pushed\n');
      expect((await runGitClient(['add', 'pushed.txt'], clone)).code).toBe(0);
      expect((await runGitClient(['commit', '--quiet', '-m', 'Pushed over HTTP'], clone)).code).toBe(0);
      const pushed = await runGitClient(['push', '--quiet', 'origin', 'topic'], clone);
      expect(pushed.code, pushed.stderr).toBe(0);
      const tip = await git(gitDir, 'rev-parse', 'refs/heads/topic');
      expect(await git(gitDir, 'rev-parse', 'refs/merge-requests/1/head')).toBe(tip);
      const mr = await client(author.token).MergeRequests.show(project.id, 1);
      expect(mr.sha).toBe(tip);
      const approvals = await req(`/projects/${project.id}/merge_requests/1/approvals`, 'GET', author.token);
      expect(approvals.body.approved_by).toEqual([]);
    } finally {
      await fs.rm(scratch, { recursive: true, force: true });
    }
  });
});
