import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import { addDays, utcDate } from '../../src/lib/clock.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, makeUser } from '../support/factories.js';
import { GITLAB_CLI, lacks, PYTHON_GITLAB } from '../support/programs.js';

/**
 * python-gitlab, the client most Python CI and release scripts use, as Debian ships it
 * (`python3-gitlab` 3.12, run by /usr/bin/python3, and its command line from `gitlab-cli`),
 * unpatched. Each script under python-gitlab/ drives one set of flows and prints what it saw as
 * one JSON line; the assertions are here.
 */

const SCRIPTS = path.join(import.meta.dirname, 'python-gitlab');
const SHA = /^[0-9a-f]{40}$/;

let app: TestApp;
let token: string;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program against the server, asynchronously: the server lives in this process. */
function run(command: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      {
        env: { PATH: process.env.PATH ?? '', LANG: 'C.UTF-8', HOME: os.tmpdir(), PYTHONDONTWRITEBYTECODE: '1', ...env },
        timeout: 120_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: number }).code ?? 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** The report a flow script printed; fails with its traceback when it did not end well. */
async function flow(script: string): Promise<Record<string, unknown>> {
  const result = await run('/usr/bin/python3', [path.join(SCRIPTS, script)], {
    DEPOT_URL: app.baseUrl,
    DEPOT_TOKEN: token,
  });
  expect(result.code, result.stderr).toBe(0);
  expect(result.stderr).toBe('');
  return JSON.parse(result.stdout);
}

describe.skipIf(lacks(PYTHON_GITLAB))('python-gitlab 3.12, unpatched', () => {
  beforeAll(async () => {
    app = await startTestApp();
    const admin = await makeAdmin(app, { username: 'ada', name: 'Ada Lovelace', email: 'ada@example.com' });
    token = await makeToken(app, admin, ['api']);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('groups, projects, files, commits, tree, blobs, archives, compare, refs, changelog, namespaces, deletion', async () => {
    const out = await flow('repository.py');
    const commitUrl = `${app.baseUrl}/py-tools/libs/Client/-/commit/[0-9a-f]{40}`;
    expect(out).toEqual({
      user: 'ada',
      groups: ['py-tools', 'py-tools/libs', true],
      subgroups: ['py-tools/libs'],
      // Asked for internal inside a private group: GitLab lowers it on creation.
      project: ['py-tools/libs/Client', 'main', 'Made by python-gitlab', 'private', false],
      by_path: true,
      readme: '# Client\n\nMade by python-gitlab\n',
      tag_v1: 'v1.0.0',
      guide: 'second\n',
      guide_gone: ['GitlabGetError', 404],
      commit: ['Add the client', 1, 26],
      commit_diff: ['README.md', 'data/blob.bin', 'many/file-00.txt'],
      commit_get: 'Add the client\n\nChangelog: added',
      // 25 entries, 10 a page: the iterator follows the Link headers through 3 pages.
      tree_iterator: [25, 3],
      tree_all: ['file-00.txt', 'file-08.txt', 'file-16.txt', 'file-24.txt'],
      tree_root: [
        ['README.md', 'blob'],
        ['data', 'tree'],
        ['many', 'tree'],
        ['src', 'tree'],
      ],
      blob: ['base64', '# Client\n', 9],
      raw_blob: '# Client\n',
      raw_file: true,
      tar: [32, 'README.md', '# Client\n'],
      zip: [null, true],
      branches: ['feature/faster', 'main'],
      branch_get: ['feature/faster', false],
      compare: [['Go faster'], ['src/client.py'], false],
      merge_base: true,
      contributors: [['Ada Lovelace', 5]],
      tags: ['v1.0.0', 'v1.1.0-rc1'],
      tag_message: 'Candidate',
      after_delete: [['v1.0.0'], ['main']],
      changelog_notes: expect.stringMatching(
        new RegExp(
          `^## 1\\.1\\.0 \\(2026-01-15\\)\n\n### added \\(1 change\\)\n\n- \\[Add the client\\]\\(${commitUrl}\\)\n\n` +
            `### changed \\(1 change\\)\n\n- \\[Rewrite the guide\\]\\(${commitUrl}\\)\n$`,
        ),
      ),
      // GitLab renders the handler's `status(200)` as the body.
      changelog_post: 200,
      changelog_file: true,
      search_projects: ['py-tools/libs/Client'],
      search_groups: ['py-tools/libs'],
      namespaces: ['py-tools/libs'],
      namespace: ['group', true],
      deleted: ['GitlabGetError', 404],
    });
  });

  it('the user lifecycle: block, deactivate, ban, impersonation tokens, memberships, deletion', async () => {
    const sleeper = await makeUser(app, { username: 'sleeper' });
    await app.deps.db
      .updateTable('users')
      .set({ last_activity_on: addDays(utcDate(app.clock.now()), -365) })
      .where('id', '=', sleeper.id)
      .execute();
    const out = await flow('lifecycle.py');
    const blocked = ['GitlabGetError', 403];
    expect(out).toEqual({
      before: 'linus',
      block: [true, 'blocked'],
      blocked_token: blocked,
      block_again: null,
      unblock: [true, 'active'],
      after_unblock: 'linus',
      deactivate_recent: ['GitlabDeactivateError', 403],
      deactivate: [true, 'deactivated', 'deactivated'],
      activate: [true, 'active'],
      ban: [true, 'banned'],
      banned_token: blocked,
      ban_again: ['GitlabBanError', 403],
      unban: [true, 'active'],
      impersonation: [true, true, ['api', 'read_user'], 'linus'],
      impersonation_list: ['support'],
      impersonation_get: 'support',
      impersonation_revoked: ['GitlabAuthenticationError', 401],
      impersonation_inactive: [['support', true]],
      memberships: [
        ['Namespace', 'Chemists', 20],
        ['Project', 'bonds', 30],
      ],
      memberships_projects: ['bonds'],
      deleted: ['GitlabGetError', 404],
      deleted_token: blocked,
    });
    await new Worker(app.deps, JOB_KINDS).drain();
    expect(await app.deps.db.selectFrom('users').select('id').where('username', '=', 'linus').execute()).toEqual([]);
  });

  it('users and their tokens, members of groups and projects, avatars', async () => {
    const out = await flow('people.py');
    expect(out).toEqual({
      user: ['grace', 'Grace Hopper', 'active'],
      user_get: 'grace',
      users_by_username: [true],
      users_search: ['grace'],
      user_renamed: 'Grace B. Hopper',
      token: ['release', ['api', 'read_user'], true, true],
      token_user: 'grace',
      tokens: [['release', true, false]],
      token_revoked: ['GitlabAuthenticationError', 401],
      tokens_after: [true],
      Group_added: ['grace', 30],
      Group_changed: 40,
      Group_list: [
        ['ada', 50],
        ['grace', 40],
      ],
      Group_all: ['ada', 'grace'],
      Group_removed: ['GitlabGetError', 404],
      Project_added: ['grace', 30],
      Project_changed: 40,
      // The creator of a group's project is a member through the group only.
      Project_list: [['grace', 40]],
      Project_all: ['ada', 'grace'],
      Project_removed: ['GitlabGetError', 404],
      avatar_project: 'pictured',
      avatar_saved: 'pictured',
    });
  });

  it('cherry-pick, revert, file blame, commit refs and signature, snapshot', async () => {
    const out = await flow('repository_operations.py');
    expect(out).toEqual({
      picked: [true, true, 'extra\n'],
      picked_again: ['GitlabCherryPickError', 400],
      picked_unknown_branch: ['GitlabCherryPickError', 404],
      reverted: ['Revert "Shout two"', true, 'one\ntwo\nthree\n'],
      reverted_again: ['GitlabRevertError', 400],
      blame: [
        ['Add notes', ['one']],
        ['Revert "Shout two"', ['two']],
        ['Add notes', ['three']],
      ],
      refs: [{ type: 'branch', name: 'topic' }],
      refs_main: [{ type: 'branch', name: 'main' }],
      signature: ['GitlabGetError', 404],
      snapshot: [true, true, false],
    });
  });

  it('the event feeds: the user’s, a project’s, another user’s, filters and scopes', async () => {
    const out = await flow('events.py');
    expect(out).toEqual({
      // The README of initialize_with_readme is a push of the new default branch.
      mine: ['pushed new', 'created'],
      mine_newest_first: true,
      project: [
        ['pushed new', 'lin'],
        ['joined', 'lin'],
        ['pushed new', 'ada'],
        ['created', 'ada'],
      ],
      push_data: ['created', 'branch', 'notes', 1, 'Add notes'],
      user: ['pushed new', 'joined'],
      lin_all: 4,
      before_tomorrow: 4,
      after_tomorrow: 0,
      asc: 'created',
      bad_target_type: ['GitlabListError', 400],
      read_user_events: ['pushed new', 'joined'],
      read_user_project: ['GitlabListError', 403],
    });
  });

  it('transfers and sharing: project and group links, project and group transfers', async () => {
    const out = await flow('sharing.py');
    expect(out).toEqual({
      before_share: ['GitlabGetError', 404],
      shared_with: [['readers', 20, '2099-12-31']],
      readme_as_lin: '# service',
      commit_as_reporter: ['GitlabCreateError', 403],
      groups: ['readers'],
      member_all: [
        ['ada', 50],
        ['yu', 20],
      ],
      after_unshare: ['GitlabGetError', 404],
      group_shared_with: ['readers'],
      commit_as_developer: 'committed',
      after_group_unshare: ['GitlabGetError', 404],
      transferred: 'platform/service',
      transfer_again: ['GitlabTransferProjectError', 400],
      old_path_read: 'platform/service',
      old_path_file: '# service\n',
      old_path_write: ['GitlabUpdateError', 405],
      group_moved: 'readers/tools',
      group_top: ['tools', null],
      group_top_again: ['GitlabGroupTransferError', 400],
    });
  });

  it('runners, pipelines and jobs', async () => {
    const out = await flow('ci.py');
    expect(out).toEqual({
      registered: [true, true],
      verified: true,
      bad_token: ['GitlabCreateError', 403],
      runner: ['py-runner', 'not_connected', 'project_type', ['py']],
      renamed: 'renamed',
      project_runners: [true],
      all_runners: true,
      pipeline: ['pending', 'main', 'api'],
      jobs: [
        ['build', 'pending'],
        ['test', 'created'],
      ],
      patched: [202, '0-6'],
      trace: 'built\n',
      after_build: [
        ['build', 'success'],
        ['test', 'pending'],
      ],
      runner_jobs: true,
      online: 'online',
      canceled: 'canceled',
      // The canceled test job runs again; with build done, the pipeline is running.
      retried: 'running',
      disable_only: ['GitlabDeleteError', 403],
      deleted: ['GitlabGetError', 404],
    });
  });

  it('Pages domains: create, list, save, the administrators’ list, refusals, delete', async () => {
    const out = await flow('pages.py');
    expect(out).toEqual({
      created: ['www.site.example', 'http://www.site.example', false, 32],
      listed: ['www.site.example'],
      saved: true,
      admin_list: [['www.site.example', true]],
      bad_name: ['GitlabCreateError', 400],
      taken: ['GitlabCreateError', 400],
      deleted: ['GitlabGetError', 404],
    });
  });

  it('environments and deployments: create, deploy, show the last deployment, stop, delete', async () => {
    const out = await flow('environments.py');
    expect(out).toEqual({
      created: ['staging', 'staging', 'available', 'https://staging.example.com'],
      bad_name: ['GitlabCreateError', 400],
      deployment: [1, 'success'],
      listed: ['staging'],
      last_deployment: ['success', true],
      delete_available: ['GitlabDeleteError', 403],
      stopped: 'stopped',
      deleted: ['GitlabGetError', 404],
    });
  });

  it('application settings, plan limits and the audit trail', async () => {
    const out = await flow('settings.py');
    expect(out).toEqual({
      defaults: [100000, 'private', true],
      changed: [7, 'internal'],
      refused: ['GitlabUpdateError', 400],
      unchanged: [7, 'internal'],
      project_visibility: 'internal',
      npm_limit: 524288000,
      npm_changed: 1048576,
      unknown_plan: ['GitlabHttpError', 400],
      audited: true,
    });
  });

  it('project webhooks and integrations', async () => {
    const out = await flow('hooks.py');
    expect(out).toEqual({
      created: [true, true, false, false],
      listed: true,
      saved: [true, 'main'],
      refused: ['GitlabCreateError', 422],
      deleted: ['GitlabGetError', 404],
      missing: ['GitlabUpdateError', 400],
      slack: [true, false, '#dev', false],
      kept: ['#ops', false],
      active: ['slack'],
      after_delete: [],
    });
  });

  it('merge requests: create, approval rules, approve, merge', async () => {
    const out = await flow('merge_requests.py');
    expect(out).toEqual({
      created: [1, 'opened', 'can_be_merged', 'feature-x', 'main'],
      listed: [1],
      duplicate: ['GitlabCreateError', 409],
      rule: ['Reviewers', 1, ['ada']],
      bad_rule: ['GitlabCreateError', 400],
      before: [1, 'not_approved'],
      blocked: ['GitlabMRClosedError', 405],
      stale_sha: ['GitlabMRApprovalError', 409],
      approved: [0, ['ada']],
      state: [['Reviewers', true]],
      merged: ['merged', 'ada', true],
      main_has_x: 'x\n',
      source_removed: ['GitlabGetError', 404],
      commits: ['Add x'],
    });
  });

  it('protected branches: a wildcard with a user grant, enforced on commits, then unprotected', async () => {
    const out = await flow('protected_branches.py');
    expect(out).toEqual({
      default: [['main', [40]]],
      created: [
        'release/*',
        [
          [0, false, 'No one'],
          [null, true, 'Linus'],
        ],
        ['Developers + Maintainers'],
        false,
      ],
      get: ['release/*', true],
      duplicate: ['GitlabCreateError', 409],
      names: ['main', 'release/*'],
      dev_main: ['GitlabCreateError', 403],
      dev_release: 'try',
      branch_flags: [true, false],
      after_delete: ['main'],
      gone: ['GitlabGetError', 404],
    });
  });

  describe.skipIf(lacks(GITLAB_CLI))('the command line', () => {
    let config: string;
    let project: { id: number; path_with_namespace: string };

    beforeAll(async () => {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-python-gitlab-'));
      config = path.join(dir, 'python-gitlab.cfg');
      await fs.writeFile(
        config,
        `[global]\ndefault = depot\ntimeout = 30\n\n[depot]\nurl = ${app.baseUrl}\nprivate_token = ${token}\napi_version = 4\n`,
      );
      const res = await app.request('/projects', {
        method: 'POST',
        token,
        body: { name: 'cli-tool', initialize_with_readme: true, description: 'From the command line' },
      });
      expect(res.status).toBe(201);
      project = res.body;
      return () => fs.rm(dir, { recursive: true, force: true });
    });

    /** `gitlab <args>` (Debian's `python-gitlab`) with the configuration file. */
    async function cli(...args: string[]): Promise<string> {
      const result = await run('python-gitlab', ['-c', config, ...args]);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toBe('');
      return result.stdout;
    }

    it('project list, project get --id', async () => {
      const listed = await cli('project', 'list');
      expect(listed).toContain(`id: ${project.id}\npath_with_namespace: ${project.path_with_namespace}\n`);
      expect(await cli('project', 'get', '--id', String(project.id))).toBe(
        `id: ${project.id}\npath_with_namespace: ${project.path_with_namespace}\n`,
      );
      const json = JSON.parse(await cli('-o', 'json', 'project', 'get', '--id', String(project.id)));
      expect(json).toMatchObject({ id: project.id, name: 'cli-tool', description: 'From the command line' });
    });

    it('project-branch list --project-id', async () => {
      expect(await cli('project-branch', 'list', '--project-id', String(project.id))).toBe('name: main\n\n');
      const [main] = JSON.parse(await cli('-o', 'json', 'project-branch', 'list', '--project-id', String(project.id)));
      expect(main).toMatchObject({ name: 'main', default: true, protected: true, merged: false });
      expect(main.commit.id).toMatch(SHA);
    });

    it('project-file get', async () => {
      const args = [
        'project-file',
        'get',
        '--project-id',
        String(project.id),
        '--file-path',
        'README.md',
        '--ref',
        'main',
      ];
      expect(await cli(...args)).toBe('file-path: README.md\nfile_path: README.md\n');
      const file = JSON.parse(await cli('-o', 'json', ...args));
      expect(file).toMatchObject({ file_name: 'README.md', file_path: 'README.md', ref: 'main', encoding: 'base64' });
      expect(Buffer.from(file.content, 'base64').toString()).toBe('# cli-tool\n\nFrom the command line\n');
    });
  });
});
