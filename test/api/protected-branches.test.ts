import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { branchMatches } from '../../src/policies/branch-protection.js';
import { canMerge, protectedBranchRules } from '../../src/services/protected-branches.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  addMember,
  makeAdmin,
  makeGroup,
  makePersonas,
  makeProjectMember,
  makeSampleProject,
  makeToken,
  makeUser,
} from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';

/**
 * Protected branches (lib/api/protected_branches.rb with EE's parameters): the API through
 * @gitbeaker/rest and raw requests, and the rules enforced on every way a branch moves.
 */
let app: TestApp;
let admin: User;
let adminToken: string;
let gitlab: InstanceType<typeof Gitlab>;
let scratch: string;
let counter = 0;

beforeAll(async () => {
  app = await startTestApp();
  admin = await makeAdmin(app);
  adminToken = await makeToken(app, admin);
  gitlab = new Gitlab({ host: app.baseUrl, token: adminToken });
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-protected-'));
});
afterAll(async () => {
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

const MAINTAINERS = (id: number) => ({
  id,
  access_level: 40,
  access_level_description: 'Maintainers',
  user_id: null,
  group_id: null,
});

const protect = (project: Project, token: string | undefined, body: Record<string, unknown>) =>
  app.request(`/projects/${project.id}/protected_branches`, { method: 'POST', body, ...(token ? { token } : {}) });

const list = async (project: Project) =>
  (await app.request(`/projects/${project.id}/protected_branches`, { token: adminToken })).body;

const commitTo = (project: Project, token: string, branch: string, extra: Record<string, unknown> = {}) =>
  app.request(`/projects/${project.id}/repository/commits`, {
    method: 'POST',
    token,
    body: {
      branch,
      commit_message: `to ${branch}`,
      actions: [{ action: 'create', file_path: `file-${++counter}.txt`, content: 'x\n' }],
      ...extra,
    },
  });

const branch = async (project: Project, name: string) =>
  (await app.request(`/projects/${project.id}/repository/branches/${encodeURIComponent(name)}`, { token: adminToken }))
    .body;

/** A clone of the project by `login`, in a fresh directory. */
async function clone(project: Project, login: string, token: string): Promise<string> {
  const dir = path.join(scratch, `clone-${++counter}`);
  const remote = remoteUrl(app.baseUrl, project, { login, password: token });
  const cloned = await runGitClient(['clone', '--quiet', remote, dir], scratch);
  expect(cloned.code, cloned.stderr).toBe(0);
  return dir;
}

async function commitIn(dir: string, amend = false): Promise<void> {
  await fs.writeFile(path.join(dir, `pushed-${++counter}.txt`), 'y\n');
  await runGitClient(['add', '.'], dir);
  expect((await runGitClient(['commit', '--quiet', ...(amend ? ['--amend'] : []), '-m', 'pushed'], dir)).code).toBe(0);
}

const tipOf = async (project: Project, name: string) => (await branch(project, name))?.commit?.id as string | undefined;

describe('the protected branches API', () => {
  it('protects, shows, lists, edits and unprotects through @gitbeaker/rest, in GitLab’s shapes', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    // A new project's default branch is protected as default_branch_protection (2) says.
    const [main] = await gitlab.ProtectedBranches.all(project.id);
    expect(main).toEqual({
      id: expect.any(Number),
      name: 'main',
      push_access_levels: [{ ...MAINTAINERS(expect.any(Number)), deploy_key_id: null }],
      merge_access_levels: [MAINTAINERS(expect.any(Number))],
      allow_force_push: false,
      unprotect_access_levels: [],
      code_owner_approval_required: false,
    });

    const created = await gitlab.ProtectedBranches.protect(project.id, 'release/*', {
      pushAccessLevel: 30,
      mergeAccessLevel: 30,
      allowForcePush: true,
    });
    expect(created).toMatchObject({
      name: 'release/*',
      push_access_levels: [{ access_level: 30, access_level_description: 'Developers + Maintainers' }],
      merge_access_levels: [{ access_level: 30, access_level_description: 'Developers + Maintainers' }],
      unprotect_access_levels: [{ access_level: 40 }],
      allow_force_push: true,
      code_owner_approval_required: false,
    });
    expect(await gitlab.ProtectedBranches.show(project.id, 'release/*')).toEqual(created);
    expect((await gitlab.ProtectedBranches.all(project.id)).map((b) => b.name)).toEqual(['main', 'release/*']);
    expect((await gitlab.ProtectedBranches.all(project.id, { search: 'REL' })).map((b) => b.name)).toEqual([
      'release/*',
    ]);

    const edited = await gitlab.ProtectedBranches.edit(project.id, 'release/*', {
      allowForcePush: false,
      codeOwnerApprovalRequired: true,
    } as never);
    expect(edited).toMatchObject({ allow_force_push: false, code_owner_approval_required: true });
    expect(edited.push_access_levels).toEqual(created.push_access_levels);

    await gitlab.ProtectedBranches.unprotect(project.id, 'release/*');
    const gone = await app.request(`/projects/${project.id}/protected_branches/release%2F*`, { token: adminToken });
    expect(gone).toMatchObject({ status: 404, body: { message: '404 Not found' } });
    expect((await list(project)).map((b: { name: string }) => b.name)).toEqual(['main']);
  });

  it('answers 409 for a name already protected, and pages the list', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const again = await protect(project, adminToken, { name: 'main' });
    expect(again).toMatchObject({ status: 409, body: { message: "Protected branch 'main' already exists" } });
    // Concurrent creators of one name: exactly one wins, the others are told it exists.
    const racing = await Promise.all([1, 2, 3, 4].map(() => protect(project, adminToken, { name: 'a' })));
    expect(racing.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
    for (const name of ['b', 'c']) expect((await protect(project, adminToken, { name })).status).toBe(201);
    const page = await app.request(`/projects/${project.id}/protected_branches`, {
      token: adminToken,
      query: { per_page: 2, page: 2 },
    });
    expect(page.body.map((b: { name: string }) => b.name)).toEqual(['b', 'c']);
    expect(page.headers.get('x-total')).toBe('4');
  });

  it('grants users and groups, and changes or removes access rows by id', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const chosen = await makeProjectMember(app, project, 'developer');
    const other = await makeProjectMember(app, project, 'developer');
    const group = await makeGroup(app, admin, { path: `team${++counter}` });
    const teammate = await makeProjectMember(app, project, 'developer');
    await addMember(app, { type: 'group', id: group.id }, teammate.user, 10);

    const created = await protect(project, adminToken, {
      name: 'stable',
      push_access_level: 0,
      allowed_to_push: [{ user_id: chosen.user.id }, { group_id: group.id }],
    });
    expect(created.status).toBe(201);
    expect(created.body.push_access_levels).toEqual([
      expect.objectContaining({ access_level: 0, access_level_description: 'No one', user_id: null }),
      expect.objectContaining({
        access_level: null,
        access_level_description: chosen.user.name,
        user_id: chosen.user.id,
      }),
      expect.objectContaining({ access_level: null, access_level_description: group.name, group_id: group.id }),
    ]);
    expect((await commitTo(project, chosen.token, 'stable')).status).toBe(201);
    expect((await commitTo(project, teammate.token, 'stable')).status).toBe(201);
    expect(await commitTo(project, other.token, 'stable')).toMatchObject({
      status: 403,
      body: { message: '403 Forbidden - You are not allowed to push into this branch' },
    });
    expect(await branch(project, 'stable')).toMatchObject({ protected: true, developers_can_push: false });

    // Remove the user's row and turn "No one" into Developers.
    const [noOne, userRow] = created.body.push_access_levels;
    const edited = await app.request(`/projects/${project.id}/protected_branches/stable`, {
      method: 'PATCH',
      token: adminToken,
      body: {
        allowed_to_push: [
          { id: userRow.id, _destroy: true },
          { id: noOne.id, access_level: 30 },
        ],
      },
    });
    expect(edited.status).toBe(200);
    expect(edited.body.push_access_levels.map((r: { access_level: number | null }) => r.access_level)).toEqual([
      30,
      null,
    ]);
    expect((await commitTo(project, other.token, 'stable')).status).toBe(201);
    expect(await branch(project, 'stable')).toMatchObject({ protected: true, developers_can_push: true });

    // A duplicate row is GitLab's 422, and changes nothing.
    const duplicate = await app.request(`/projects/${project.id}/protected_branches/stable`, {
      method: 'PATCH',
      token: adminToken,
      body: { allowed_to_push: [{ access_level: 30 }] },
    });
    expect(duplicate).toMatchObject({
      status: 422,
      body: { message: ['Push access levels access level has already been taken'] },
    });
    expect((await list(project)).find((b: { name: string }) => b.name === 'stable').push_access_levels).toHaveLength(2);
    // Concurrent additions of one row: exactly one lands.
    const racing = await Promise.all(
      [1, 2, 3].map(() =>
        app.request(`/projects/${project.id}/protected_branches/stable`, {
          method: 'PATCH',
          token: adminToken,
          body: { allowed_to_merge: [{ access_level: 30 }] },
        }),
      ),
    );
    expect(racing.map((r) => r.status).sort()).toEqual([200, 422, 422]);
    for (const refused of racing.filter((r) => r.status === 422)) {
      expect(refused.body).toEqual({ message: ['Merge access levels access level has already been taken'] });
    }
    const merge = (await list(project)).find((b: { name: string }) => b.name === 'stable').merge_access_levels;
    expect(merge.map((r: { access_level: number }) => r.access_level)).toEqual([40, 30]);
  });

  it('refuses bad input with GitLab’s 400 and changes nothing', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const before = await list(project);
    const cases: [Record<string, unknown>, string][] = [
      [{}, 'name is missing'],
      [{ name: 'x', push_access_level: 35 }, 'push_access_level does not have a valid value'],
      [{ name: 'x', merge_access_level: 'maintainer' }, 'merge_access_level is invalid'],
      [{ name: 'x', unprotect_access_level: 0 }, 'unprotect_access_level does not have a valid value'],
      [{ name: 'x', allow_force_push: 'maybe' }, 'allow_force_push is invalid'],
      [{ name: 'x', allowed_to_push: [{ user_id: 999999 }] }, 'allowed_to_push is invalid'],
      [{ name: 'x', allowed_to_merge: [{ group_id: 999999 }] }, 'allowed_to_merge is invalid'],
      [{ name: 'x', allowed_to_push: [{ user_id: admin.id, access_level: 30 }] }, 'allowed_to_push is invalid'],
      [{ name: 'x', allowed_to_push: [{}] }, 'allowed_to_push is invalid'],
      [{ name: 'x', allowed_to_push: 'everyone' }, 'allowed_to_push is invalid'],
      [
        { name: 'x', allowed_to_push: [{ user_id: 99999999999 }] },
        'allowed_to_push[0][user_id] does not have a valid value',
      ],
    ];
    for (const [body, error] of cases) {
      const res = await protect(project, adminToken, body);
      expect({ body, status: res.status, answer: res.body }).toEqual({ body, status: 400, answer: { error } });
    }
    expect(await protect(project, adminToken, { name: 'a\u0000b' })).toMatchObject({
      status: 400,
      body: { message: '400 Bad request' },
    });
    const blank = await protect(project, adminToken, { name: '' });
    expect(blank).toMatchObject({ status: 422, body: { message: ["Name can't be blank"] } });
    const patch = await app.request(`/projects/${project.id}/protected_branches/main`, {
      method: 'PATCH',
      token: adminToken,
      body: { allowed_to_push: [{ id: 999999, _destroy: true }] },
    });
    expect(patch).toMatchObject({ status: 400, body: { error: 'allowed_to_push is invalid' } });
    const blankFlag = await app.request(`/projects/${project.id}/protected_branches/main`, {
      method: 'PATCH',
      token: adminToken,
      body: { allow_force_push: '' },
    });
    expect(blankFlag).toMatchObject({ status: 400, body: { error: 'allow_force_push is empty' } });
    const stale = await app.request(`/projects/${project.id}/protected_branches/main`, {
      method: 'DELETE',
      token: adminToken,
      headers: { 'If-Unmodified-Since': new Date(app.clock.now().getTime() - 3_600_000).toUTCString() },
    });
    expect(stale).toMatchObject({ status: 412, body: { message: '412 Precondition Failed' } });
    const missing = await app.request(`/projects/${project.id}/protected_branches/nope`, {
      method: 'PATCH',
      token: adminToken,
      body: { allow_force_push: true },
    });
    expect(missing).toMatchObject({ status: 404, body: { message: '404 Not found' } });
    expect(await list(project)).toEqual(before);
  });

  it('lets readers of the code see the rules and only maintainers change them (private project)', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<string, [number, number, number]> = {
      // GET, POST, DELETE
      anonymous: [404, 404, 404],
      'non-member': [404, 404, 404],
      guest: [403, 403, 403],
      reporter: [200, 403, 403],
      developer: [200, 403, 403],
      maintainer: [200, 201, 204],
      admin: [200, 201, 204],
    };
    for (const persona of personas) {
      const want = expected[persona.name] as [number, number, number];
      const name = `p-${persona.name}`;
      const token = persona.token;
      const got = [
        (await app.request(`/projects/${project.id}/protected_branches`, token ? { token } : {})).status,
        (await protect(project, token, { name })).status,
      ];
      if (got[1] !== 201) expect((await protect(project, adminToken, { name })).status).toBe(201);
      got.push(
        (
          await app.request(`/projects/${project.id}/protected_branches/${name}`, {
            method: 'DELETE',
            ...(token ? { token } : {}),
          })
        ).status,
      );
      expect({ persona: persona.name, got }).toEqual({ persona: persona.name, got: want });
    }
  });

  it('asks anonymous callers of a public project to sign in before changing anything', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'public' });
    expect((await app.request(`/projects/${project.id}/protected_branches`)).status).toBe(200);
    expect((await protect(project, undefined, { name: 'x' })).status).toBe(401);
    const developer = await makeProjectMember(app, project, 'developer');
    expect((await protect(project, developer.token, { name: 'x' })).status).toBe(403);
    const unprotect = await app.request(`/projects/${project.id}/protected_branches/main`, {
      method: 'DELETE',
      token: developer.token,
    });
    expect(unprotect.status).toBe(403);
    expect((await list(project)).map((b: { name: string }) => b.name)).toEqual(['main']);
  });

  it('keeps maintainers from unprotecting a branch only administrators may unprotect', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    expect((await protect(project, adminToken, { name: 'locked', unprotect_access_level: 60 })).status).toBe(201);
    const refused = await app.request(`/projects/${project.id}/protected_branches/locked`, {
      method: 'DELETE',
      token: maintainer.token,
    });
    expect(refused.status).toBe(403);
    const ok = await app.request(`/projects/${project.id}/protected_branches/locked`, {
      method: 'DELETE',
      token: adminToken,
    });
    expect(ok.status).toBe(204);
  });
});

describe('what other services call', () => {
  it('protectedBranchRules sums up every matching rule; canMerge decides per user', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const developer = await makeProjectMember(app, project, 'developer');
    const reporter = await makeProjectMember(app, project, 'reporter');
    expect(
      (await protect(project, adminToken, { name: 'release/*', push_access_level: 30, allow_force_push: true })).status,
    ).toBe(201);
    const second = await protect(project, adminToken, {
      name: 'release/1*',
      merge_access_level: 30,
      unprotect_access_level: 60,
      code_owner_approval_required: true,
    });
    expect(second.status).toBe(201);
    const rules = await protectedBranchRules(app.deps, project.id, 'release/10');
    expect(rules).toMatchObject({
      pushLevel: 30,
      mergeLevel: 30,
      unprotectLevel: 40,
      allowForcePush: true,
      codeOwnerApprovalRequired: true,
    });
    expect(rules?.rules.map((r) => r.name)).toEqual(['release/*', 'release/1*']);
    expect(await protectedBranchRules(app.deps, project.id, 'release/2')).toMatchObject({
      mergeLevel: 40,
      codeOwnerApprovalRequired: false,
    });
    expect(await protectedBranchRules(app.deps, project.id, 'main')).toMatchObject({
      pushLevel: 40,
      mergeLevel: 40,
      unprotectLevel: 40,
      allowForcePush: false,
    });
    expect(await protectedBranchRules(app.deps, project.id, 'feature')).toBeNull();

    expect(await canMerge(app.deps, project, developer.user, 'release/10')).toBe(true);
    expect(await canMerge(app.deps, project, developer.user, 'release/2')).toBe(false);
    expect(await canMerge(app.deps, project, developer.user, 'main')).toBe(false);
    expect(await canMerge(app.deps, project, developer.user, 'feature')).toBe(true);
    expect(await canMerge(app.deps, project, reporter.user, 'feature')).toBe(false);
    expect(await canMerge(app.deps, project, admin, 'main')).toBe(true);
    expect(await canMerge(app.deps, project, null, 'feature')).toBe(false);
  });
});

describe('enforcement', () => {
  it('matches wildcards as GitLab does: `*` spans slashes, the rest is literal and anchored', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const developer = await makeProjectMember(app, project, 'developer');
    expect((await protect(project, adminToken, { name: 'release/*' })).status).toBe(201);
    expect((await protect(project, adminToken, { name: '*-stable' })).status).toBe(201);
    expect((await protect(project, adminToken, { name: 'v1.x' })).status).toBe(201);
    const fromMain = { start_branch: 'main' };
    for (const name of ['release/1.0', 'release/a/b', '2-stable', 'v1.x']) {
      const res = await commitTo(project, developer.token, name, fromMain);
      expect({ name, status: res.status }).toEqual({ name, status: 403 });
    }
    for (const name of ['release-1', 'xrelease/1', 'prerelease/1', '2-stable-x', 'v1ax', 'feature/release/1']) {
      const res = await commitTo(project, developer.token, name, fromMain);
      expect({ name, status: res.status }).toEqual({ name, status: 201 });
    }
    // Maintainers push there, and the branches API says which are protected.
    expect((await commitTo(project, adminToken, 'release/2.0', fromMain)).status).toBe(201);
    expect(await branch(project, 'release/2.0')).toMatchObject({
      protected: true,
      developers_can_push: false,
      developers_can_merge: false,
    });
    expect(await branch(project, 'xrelease/1')).toMatchObject({ protected: false });
    const all = await app.request(`/projects/${project.id}/repository/branches`, {
      token: developer.token,
      query: { per_page: 100 },
    });
    const byName = new Map(all.body.map((b: { name: string }) => [b.name, b]));
    expect(byName.get('release/2.0')).toMatchObject({ protected: true, can_push: false });
    expect(byName.get('release-1')).toMatchObject({ protected: false, can_push: true });
    // Anchored at both ends; `*` may match nothing, and nothing else is special.
    expect(['release', 'release/', 'arelease/x', 'release/x'].map((b) => branchMatches('release/*', b))).toEqual([
      false,
      true,
      false,
      true,
    ]);
    expect(branchMatches('a.(b)+', 'a.(b)+')).toBe(true);
    expect(branchMatches('a.*', 'abc')).toBe(false);
    expect(branchMatches('*', 'any/thing')).toBe(true);
  });

  it('refuses developers a protected branch in the files and branches APIs', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const developer = await makeProjectMember(app, project, 'developer');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    expect((await protect(project, adminToken, { name: 'stable' })).status).toBe(201);
    const file = await app.request(`/projects/${project.id}/repository/files/new.txt`, {
      method: 'POST',
      token: developer.token,
      body: { branch: 'stable', content: 'x', commit_message: 'x' },
    });
    expect(file).toMatchObject({
      status: 403,
      body: { message: '403 Forbidden - You are not allowed to push into this branch' },
    });
    // Creating a branch a rule protects: whoever may push or merge there.
    expect((await protect(project, adminToken, { name: 'rc-*', merge_access_level: 30 })).status).toBe(201);
    const createAs = (token: string, name: string) =>
      app.request(`/projects/${project.id}/repository/branches`, {
        method: 'POST',
        token,
        body: { branch: name, ref: 'main' },
      });
    expect(await createAs(developer.token, 'stable-2')).toMatchObject({ status: 201 });
    expect(await createAs(developer.token, 'rc-1')).toMatchObject({ status: 201, body: { protected: true } });
    expect((await protect(project, adminToken, { name: 'final-*' })).status).toBe(201);
    expect(await createAs(developer.token, 'final-1')).toEqual(
      expect.objectContaining({
        status: 400,
        body: { message: 'You are not allowed to create protected branches on this project.' },
      }),
    );
    expect(await branch(project, 'final-1')).toEqual({ message: '404 Branch Not Found' });
    expect((await createAs(maintainer.token, 'final-1')).status).toBe(201);
    // Maintainers may: stable now holds a commit main has not.
    expect((await commitTo(project, maintainer.token, 'stable')).status).toBe(201);
    const tip = await tipOf(project, 'stable');
    // Deleting: maintainers only, with GitLab's pre-receive message.
    const byDeveloper = await app.request(`/projects/${project.id}/repository/branches/stable`, {
      method: 'DELETE',
      token: developer.token,
    });
    expect(byDeveloper).toMatchObject({
      status: 400,
      body: {
        message:
          'You are not allowed to delete protected branches from this project. Only a project maintainer or owner can delete a protected branch.',
      },
    });
    expect(await tipOf(project, 'stable')).toBe(tip);
    // Merged branches are cleared, but never protected ones.
    for (const name of ['kept/old', 'gone/old']) {
      const made = await app.request(`/projects/${project.id}/repository/branches`, {
        method: 'POST',
        token: maintainer.token,
        body: { branch: name, ref: 'main~1' },
      });
      expect(made.status).toBe(201);
    }
    expect((await protect(project, adminToken, { name: 'kept/*' })).status).toBe(201);
    await app.request(`/projects/${project.id}/repository/merged_branches`, {
      method: 'DELETE',
      token: maintainer.token,
    });
    expect(await tipOf(project, 'kept/old')).toMatch(/^[0-9a-f]{40}$/);
    expect(await branch(project, 'gone/old')).toEqual({ message: '404 Branch Not Found' });
    expect(await tipOf(project, 'stable')).toBe(tip);
    // The commits API's force overwrites a branch: a force push, refused unless allowed.
    const overwrite = { start_branch: 'main', force: true };
    expect(await commitTo(project, maintainer.token, 'stable', overwrite)).toMatchObject({
      status: 400,
      body: { message: 'You are not allowed to force push code to a protected branch on this project.' },
    });
    expect(await tipOf(project, 'stable')).toBe(tip);
    await gitlab.ProtectedBranches.edit(project.id, 'stable', { allowForcePush: true });
    expect((await commitTo(project, maintainer.token, 'stable', overwrite)).status).toBe(201);
    expect(await tipOf(project, 'stable')).not.toBe(tip);
    const byMaintainer = await app.request(`/projects/${project.id}/repository/branches/stable`, {
      method: 'DELETE',
      token: maintainer.token,
    });
    expect(byMaintainer.status).toBe(204);
    // Unprotecting lets developers commit to the default branch.
    expect((await commitTo(project, developer.token, 'main')).status).toBe(403);
    await gitlab.ProtectedBranches.unprotect(project.id, 'main');
    expect((await commitTo(project, developer.token, 'main')).status).toBe(201);
    expect(await branch(project, 'main')).toMatchObject({ protected: false });
  });

  it('refuses pushes over HTTP with GitLab’s messages, and honours allow_force_push', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const developer = await makeProjectMember(app, project, 'developer');
    const maintainer = await makeProjectMember(app, project, 'maintainer');
    expect((await protect(project, adminToken, { name: 'stable' })).status).toBe(201);
    expect((await protect(project, adminToken, { name: 'release/*', push_access_level: 30 })).status).toBe(201);

    const dev = await clone(project, developer.user.username, developer.token);
    await runGitClient(['checkout', '--quiet', 'stable'], dev);
    await commitIn(dev);
    const pushed = await runGitClient(['push', 'origin', 'stable'], dev);
    expect(pushed.code).not.toBe(0);
    expect(pushed.stderr).toContain('You are not allowed to push code to protected branches on this project.');

    const created = await runGitClient(
      ['push', 'origin', 'HEAD:refs/heads/stable-not/x', 'HEAD:refs/heads/stable'],
      dev,
    );
    expect(created.code).not.toBe(0);
    const creating = await runGitClient(['push', 'origin', 'HEAD:refs/heads/release/9'], dev);
    expect(creating.code, creating.stderr).toBe(0);
    // A refused ref refuses the whole push: the unprotected branch was not created either.
    expect(await branch(project, 'stable-not/x')).toMatchObject({ message: '404 Branch Not Found' });

    expect((await protect(project, adminToken, { name: 'hotfix-*' })).status).toBe(201);
    const newProtected = await runGitClient(['push', 'origin', 'HEAD:refs/heads/hotfix-1'], dev);
    expect(newProtected.code).not.toBe(0);
    expect(newProtected.stderr).toContain('You are not allowed to create protected branches on this project.');
    // Developers who may merge there create it through the API, not by pushing.
    expect((await protect(project, adminToken, { name: 'rc-*', merge_access_level: 30 })).status).toBe(201);
    const byPush = await runGitClient(['push', 'origin', 'HEAD:refs/heads/rc-1'], dev);
    expect(byPush.code).not.toBe(0);
    expect(byPush.stderr).toContain('You can only create protected branches using the web interface and API.');

    // Force pushes: refused for everyone unless the rule allows them.
    const main = await clone(project, maintainer.user.username, maintainer.token);
    await runGitClient(['checkout', '--quiet', 'stable'], main);
    await commitIn(main, true);
    const forced = await runGitClient(['push', '--force', 'origin', 'stable'], main);
    expect(forced.code).not.toBe(0);
    expect(forced.stderr).toContain('You are not allowed to force push code to a protected branch on this project.');
    await gitlab.ProtectedBranches.edit(project.id, 'stable', { allowForcePush: true });
    const allowed = await runGitClient(['push', '--force', 'origin', 'stable'], main);
    expect(allowed.code, allowed.stderr).toBe(0);

    // Deleting a protected branch over git: never (maintainers use the API).
    const deleted = await runGitClient(['push', 'origin', ':stable'], main);
    expect(deleted.code).not.toBe(0);
    expect(deleted.stderr).toContain('You can only delete protected branches using the web interface.');
    const byDeveloper = await runGitClient(['push', 'origin', ':release/9'], dev);
    expect(byDeveloper.stderr).toContain(
      'You are not allowed to delete protected branches from this project. Only a project maintainer or owner can delete a protected branch.',
    );
    expect(await tipOf(project, 'release/9')).toMatch(/^[0-9a-f]{40}$/);
  });

  it('applies a new rule to the next push at once, and asks no query for warm branch lists', async () => {
    const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
    const developer = await makeProjectMember(app, project, 'developer');
    const dev = await clone(project, developer.user.username, developer.token);
    await runGitClient(['checkout', '--quiet', 'stable'], dev);
    await commitIn(dev);
    expect((await runGitClient(['push', 'origin', 'stable'], dev)).code).toBe(0);
    expect((await protect(project, adminToken, { name: 'stable' })).status).toBe(201);
    await commitIn(dev);
    expect((await runGitClient(['push', 'origin', 'stable'], dev)).code).not.toBe(0);

    const branches = () => app.request(`/projects/${project.id}/repository/branches`, { token: developer.token });
    for (let i = 0; i < 2; i++) expect((await branches()).status).toBe(200);
    const before = app.database.queries();
    const again = await branches();
    expect(again.body.find((b: { name: string }) => b.name === 'stable')).toMatchObject({ protected: true });
    expect(app.database.queries() - before).toBe(0);
  });

  it('reaches another server process within a second', async () => {
    const peer = await startTestApp({ peer: app });
    try {
      const { project } = await makeSampleProject(app, admin, { visibility: 'private' });
      const developer = await makeProjectMember(app, project, 'developer');
      const onPeer = () =>
        peer.request(`/projects/${project.id}/repository/commits`, {
          method: 'POST',
          token: developer.token,
          body: {
            branch: 'hot',
            start_branch: 'main',
            force: true,
            commit_message: 'hot',
            actions: [{ action: 'create', file_path: `hot-${++counter}.txt`, content: 'x\n' }],
          },
        });
      expect((await onPeer()).status).toBe(201);
      expect((await protect(project, adminToken, { name: 'hot' })).status).toBe(201);
      const started = performance.now();
      let status = 0;
      while (performance.now() - started < 1_000) {
        status = (await onPeer()).status;
        if (status === 403) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(status).toBe(403);
    } finally {
      await peer.close();
    }
  });

  it('protects the branch a first push names in an empty project', async () => {
    const owner = await makeUser(app);
    const ownerToken = await makeToken(app, owner);
    const created = await app.request('/projects', {
      method: 'POST',
      token: ownerToken,
      body: { name: `empty${++counter}`, default_branch: 'trunk' },
    });
    expect(created.status).toBe(201);
    const project = created.body as Project & { path_with_namespace: string };
    const fullPath = project.path_with_namespace;
    expect((await list({ ...project, id: project.id } as Project)).map((b: { name: string }) => b.name)).toEqual([
      'trunk',
    ]);
    const dir = path.join(scratch, `fresh-${++counter}`);
    await fs.mkdir(dir);
    await runGitClient(['init', '--quiet', '--initial-branch=develop'], dir);
    await commitIn(dir);
    const remote = remoteUrl(app.baseUrl, { full_path: fullPath }, { login: owner.username, password: ownerToken });
    const pushed = await runGitClient(['push', remote, 'develop'], dir);
    expect(pushed.code, pushed.stderr).toBe(0);
    // The rule made for the default branch follows it to the branch the first push named.
    expect((await list({ id: project.id } as Project)).map((b: { name: string }) => b.name)).toEqual(['develop']);
  });
});
