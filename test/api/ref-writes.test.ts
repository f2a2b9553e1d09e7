import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  makePersonas,
  makeProject,
  makeProjectMember,
  makeSampleProject,
  makeToken,
  makeUser,
  type Persona,
  type Role,
} from '../support/factories.js';

const exec = promisify(execFile);
let app: TestApp;
let owner: User;

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout;
const revParse = async (gitDir: string, rev: string) => (await git(gitDir, 'rev-parse', '--verify', rev)).trim();
/** Every ref with what it points at, as native git lists them. */
const refsOf = (gitDir: string) => git(gitDir, 'for-each-ref', '--format=%(objectname) %(refname)');

const member = (project: Project, role: Role) => makeProjectMember(app, project, role);

async function pushEvents(project: Project) {
  return app.deps.db
    .selectFrom('events')
    .selectAll()
    .where('project_id', '=', project.id)
    .where('action', '=', 'pushed')
    .orderBy('id')
    .execute();
}

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
});
afterAll(async () => {
  await app?.close();
});

describe('POST /projects/:id/repository/branches', () => {
  it('creates a branch from a sha, a branch or a tag, as native git sees it, and records a push', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'create-branches' });
    const dev = await member(project, 'developer');
    const post = (body: Record<string, unknown>) =>
      app.request(`/projects/${project.id}/repository/branches`, { method: 'POST', token: dev.token, body });
    const stable = await revParse(gitDir, 'stable');

    const fromSha = await post({ branch: 'from-sha', ref: stable });
    expect(fromSha.status).toBe(201);
    const subject = (await git(gitDir, 'log', '-1', '--format=%s', stable)).trim();
    expect(fromSha.body).toMatchObject({
      name: 'from-sha',
      merged: true,
      protected: false,
      default: false,
      developers_can_push: false,
      developers_can_merge: false,
      can_push: true,
      web_url: `${app.baseUrl}/${project.full_path}/-/tree/from-sha`,
      commit: { id: stable, short_id: stable.slice(0, 8), title: subject },
    });
    expect((await post({ branch: 'from-branch', ref: 'main' })).body).toMatchObject({
      name: 'from-branch',
      merged: false,
      commit: { id: await revParse(gitDir, 'main') },
    });
    const tagged = await post({ branch: 'nested/from-tag', ref: 'v1.1.0' });
    expect(tagged.status).toBe(201);
    expect(tagged.body.commit.id).toBe(await revParse(gitDir, 'v1.1.0^{commit}'));

    expect(await refsOf(gitDir)).toContain(`${stable} refs/heads/from-sha\n`);
    expect(await revParse(gitDir, 'refs/heads/nested/from-tag')).toBe(tagged.body.commit.id);
    const events = await pushEvents(project);
    expect(events.map((e) => e.push_data)).toEqual([
      expect.objectContaining({ action: 'created', ref_type: 'branch', ref: 'from-sha', commit_to: stable }),
      expect.objectContaining({ action: 'created', ref_type: 'branch', ref: 'from-branch' }),
      expect.objectContaining({ action: 'created', ref_type: 'branch', ref: 'nested/from-tag' }),
    ]);
    expect(events.every((e) => e.author_id === dev.user.id)).toBe(true);
    // GET agrees with what POST answered.
    const read = await app.request(`/projects/${project.id}/repository/branches/from-sha`, { token: dev.token });
    expect(read.body).toEqual(fromSha.body);
  });

  it('answers GitLab’s messages for bad names, existing branches and unknown refs, and changes nothing', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'bad-branches' });
    const { token } = await member(project, 'maintainer');
    const before = await refsOf(gitDir);
    const cases: [Record<string, unknown>, unknown][] = [
      [{ branch: 'main', ref: 'stable' }, { message: 'Branch already exists' }],
      [{ branch: 'stable', ref: 'nope' }, { message: 'Branch already exists' }],
      [{ branch: 'fresh', ref: 'nope' }, { message: 'Invalid reference name: nope' }],
      [{ branch: 'fresh', ref: 'main..stable' }, { message: 'Invalid reference name: main..stable' }],
      [{ branch: 'fresh', ref: '--output=/tmp/x' }, { message: 'Invalid reference name: --output=/tmp/x' }],
      [{ branch: 'fresh', ref: '0'.repeat(40) }, { message: `Invalid reference name: ${'0'.repeat(40)}` }],
      [
        { branch: 'main/sub', ref: 'main' },
        {
          message: "Failed to create branch 'main/sub': Branch name conflicts with existing branch hierarchy.",
        },
      ],
      [
        { branch: 'feature', ref: 'main' },
        {
          message: "Failed to create branch 'feature': Branch name conflicts with existing branch hierarchy.",
        },
      ],
      [{ ref: 'main' }, { error: 'branch is missing' }],
      [{ branch: 'x' }, { error: 'ref is missing' }],
      [{ branch: ' ', ref: 'main' }, { error: 'branch is empty' }],
    ];
    for (const name of [
      'a..b',
      'a.lock',
      '-x',
      'a@{1}',
      'trailing/',
      'with space',
      'a~1',
      'a^',
      'a:b',
      'HEAD',
      '.hidden',
      'a//b',
      'refs/heads/x',
      'a\\b',
      'new\ndesign',
      'x?',
      'x*',
      'x[',
    ]) {
      cases.push([{ branch: name, ref: 'main' }, { message: 'Branch name is invalid' }]);
    }
    for (const [body, expected] of cases) {
      const res = await app.request(`/projects/${project.id}/repository/branches`, { method: 'POST', token, body });
      expect({ body, status: res.status, response: res.body }).toEqual({ body, status: 400, response: expected });
    }
    expect(await refsOf(gitDir)).toBe(before);
    expect(await pushEvents(project)).toEqual([]);
  });

  it('gives an empty repository its default branch first, as GitLab does', async () => {
    const project = await makeProject(app, owner, { path: 'empty-branches' });
    const gitDir = app.deps.storages.repositoryPath(project.repository_storage, project.id);
    const token = await makeToken(app, owner);
    const res = await app.request(`/projects/${project.id}/repository/branches`, {
      method: 'POST',
      token,
      body: { branch: 'topic', ref: 'main' },
    });
    expect(res.status).toBe(201);
    const main = await revParse(gitDir, 'main');
    expect(res.body.commit).toMatchObject({ id: main, title: 'Add README.md', author_email: owner.email });
    expect(await git(gitDir, 'ls-tree', '-r', '--name-only', 'main')).toBe('README.md\n');
    expect(await git(gitDir, 'cat-file', 'blob', 'main:README.md')).toBe('');
    expect(await revParse(gitDir, 'topic')).toBe(main);
  });
});

describe('DELETE /projects/:id/repository/branches/:branch', () => {
  it('deletes a branch, refuses the default branch, and honours If-Unmodified-Since', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'delete-branches' });
    const dev = await member(project, 'developer');
    const del = (branch: string, headers: Record<string, string> = {}) =>
      app.request(`/projects/${project.id}/repository/branches/${encodeURIComponent(branch)}`, {
        method: 'DELETE',
        token: dev.token,
        headers,
      });
    const target = await revParse(gitDir, 'feature/merge-me');
    const authored = Number((await git(gitDir, 'log', '-1', '--format=%at', target)).trim()) * 1000;
    const early = await del('feature/merge-me', { 'If-Unmodified-Since': new Date(authored - 60_000).toUTCString() });
    expect(early).toMatchObject({ status: 412, body: { message: '412 Precondition Failed' } });

    const res = await del('feature/merge-me', { 'If-Unmodified-Since': new Date(authored + 60_000).toUTCString() });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(await refsOf(gitDir)).not.toContain('refs/heads/feature/merge-me');
    expect((await pushEvents(project)).map((e) => e.push_data)).toEqual([
      expect.objectContaining({
        action: 'removed',
        ref_type: 'branch',
        ref: 'feature/merge-me',
        commit_from: target,
        commit_to: null,
      }),
    ]);

    const before = await refsOf(gitDir);
    expect(await del('feature/merge-me')).toMatchObject({ status: 404, body: { message: '404 Branch Not Found' } });
    expect(await del('branch*')).toMatchObject({ status: 400, body: { message: 'The branch refname is invalid' } });
    for (const who of [dev.token, (await member(project, 'maintainer')).token, await makeToken(app, owner)]) {
      const main = await app.request(`/projects/${project.id}/repository/branches/main`, {
        method: 'DELETE',
        token: who,
      });
      expect(main).toMatchObject({
        status: 400,
        body: { message: 'The default branch of a project cannot be deleted.' },
      });
    }
    expect(await refsOf(gitDir)).toBe(before);
  });
});

describe('DELETE /projects/:id/repository/merged_branches', () => {
  it('deletes branches merged into the default branch, keeping it, unmerged ones and those at its tip', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'merged' });
    const dev = await member(project, 'developer');
    const main = await revParse(gitDir, 'main');
    await git(gitDir, 'update-ref', 'refs/heads/at-tip', main);
    await git(gitDir, 'update-ref', 'refs/heads/old/ancestor', `${main}~3`);
    const ahead = await app.request(`/projects/${project.id}/repository/commits`, {
      method: 'POST',
      token: dev.token,
      body: {
        branch: 'ahead',
        start_branch: 'main',
        commit_message: 'Not merged yet',
        actions: [{ action: 'create', file_path: 'ahead.txt', content: 'x' }],
      },
    });
    expect(ahead.status).toBe(201);

    // A reporter is answered as GitLab answers (the work is refused later, silently): nothing goes.
    const reporter = await member(project, 'reporter');
    const refused = await app.request(`/projects/${project.id}/repository/merged_branches`, {
      method: 'DELETE',
      token: reporter.token,
    });
    expect(refused).toMatchObject({ status: 202, body: { message: '202 Accepted' } });
    const names = async () =>
      (await git(gitDir, 'for-each-ref', '--format=%(refname:lstrip=2)', 'refs/heads/')).trim().split('\n');
    expect(await names()).toEqual(['ahead', 'at-tip', 'feature/merge-me', 'main', 'old/ancestor', 'stable']);

    const res = await app.request(`/projects/${project.id}/repository/merged_branches`, {
      method: 'DELETE',
      token: dev.token,
    });
    expect(res).toMatchObject({ status: 202, body: { message: '202 Accepted' } });
    expect(await names()).toEqual(['ahead', 'at-tip', 'main']);
    expect(await revParse(gitDir, 'main')).toBe(main);
    const removed = (await pushEvents(project))
      .map((e) => e.push_data as { action: string; ref: string })
      .filter((d) => d.action === 'removed')
      .map((d) => d.ref)
      .sort();
    expect(removed).toEqual(['feature/merge-me', 'old/ancestor', 'stable']);
  });
});

describe('POST /projects/:id/repository/tags', () => {
  it('creates an annotated tag with the user as tagger, and a lightweight one without a message', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'create-tags' });
    const dev = await member(project, 'developer');
    const at = new Date('2026-03-04T05:06:07.000Z');
    app.clock.set(at);
    const res = await app.request(`/projects/${project.id}/repository/tags`, {
      method: 'POST',
      token: dev.token,
      body: { tag_name: 'v3.0.0', ref: 'stable', message: '  Release 3.0.0\n\nNotes.  \n' },
    });
    expect(res.status).toBe(201);
    const tagObject = await revParse(gitDir, 'refs/tags/v3.0.0');
    const stable = await revParse(gitDir, 'stable');
    expect(res.body).toMatchObject({
      name: 'v3.0.0',
      target: tagObject,
      message: 'Release 3.0.0\n\nNotes.',
      commit: { id: stable },
      protected: false,
      created_at: '2026-03-04T05:06:07.000Z',
    });
    expect(tagObject).not.toBe(stable);
    expect(await git(gitDir, 'cat-file', '-p', tagObject)).toBe(
      `object ${stable}\ntype commit\ntag v3.0.0\n` +
        `tagger ${dev.user.name} <${dev.user.email}> ${at.getTime() / 1000} +0000\n\nRelease 3.0.0\n\nNotes.`,
    );
    expect(await git(gitDir, 'cat-file', '-t', tagObject)).toBe('tag\n');

    const light = await app.request(`/projects/${project.id}/repository/tags`, {
      method: 'POST',
      token: dev.token,
      body: { tag_name: 'light', ref: stable.slice(0, 10) },
    });
    expect(light.status).toBe(201);
    expect(light.body).toMatchObject({ name: 'light', target: stable, message: '', created_at: null });
    expect(await git(gitDir, 'cat-file', '-t', 'refs/tags/light')).toBe('commit\n');

    const read = await app.request(`/projects/${project.id}/repository/tags/v3.0.0`, { token: dev.token });
    expect(read.body).toEqual(res.body);
    expect((await pushEvents(project)).map((e) => e.push_data)).toEqual([
      expect.objectContaining({ action: 'created', ref_type: 'tag', ref: 'v3.0.0', commit_to: tagObject }),
      expect.objectContaining({ action: 'created', ref_type: 'tag', ref: 'light', commit_to: stable }),
    ]);
  });

  it('answers GitLab’s messages and changes nothing for bad names, existing tags and unknown targets', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'bad-tags' });
    const { token } = await member(project, 'maintainer');
    const before = await refsOf(gitDir);
    const cases: [Record<string, unknown>, unknown][] = [
      [{ tag_name: 'v1.0.0', ref: 'main' }, { message: 'Tag v1.0.0 already exists' }],
      [{ tag_name: 'v1.0.0', ref: 'main', message: 'again' }, { message: 'Tag v1.0.0 already exists' }],
      [{ tag_name: 'fresh', ref: 'foo' }, { message: 'Target foo is invalid' }],
      [{ tag_name: 'fresh', ref: '-n' }, { message: 'Target -n is invalid' }],
      [{ tag_name: 'fresh', ref: '' }, { message: 'Target is empty' }],
      [{ tag_name: '', ref: 'main' }, { message: 'Tag name invalid' }],
      [
        { tag_name: 'v1.0.0/x', ref: 'main' },
        {
          message: "Failed to create tag 'v1.0.0/x': Tag name conflicts with existing tag hierarchy.",
        },
      ],
      [{ ref: 'main' }, { error: 'tag_name is missing' }],
      [{ tag_name: 'x' }, { error: 'ref is missing' }],
    ];
    for (const name of ['a..b', 'a.lock', '-x', 'a@{1}', 'trailing/', 'with space', 'new design', 'x^', 'x~2', 'x:y']) {
      cases.push([{ tag_name: name, ref: 'main', message: 'm' }, { message: 'Tag name invalid' }]);
    }
    for (const [body, expected] of cases) {
      const res = await app.request(`/projects/${project.id}/repository/tags`, { method: 'POST', token, body });
      expect({ body, status: res.status, response: res.body }).toEqual({ body, status: 400, response: expected });
    }
    expect(await refsOf(gitDir)).toBe(before);
  });
});

describe('DELETE /projects/:id/repository/tags/:tag_name', () => {
  it('deletes annotated and lightweight tags, 404 for unknown ones', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'delete-tags' });
    const dev = await member(project, 'developer');
    const annotated = await revParse(gitDir, 'refs/tags/v1.1.0');
    for (const tag of ['v1.1.0', 'v1.1.0-rc1']) {
      const res = await app.request(`/projects/${project.id}/repository/tags/${tag}`, {
        method: 'DELETE',
        token: dev.token,
      });
      expect(res.status).toBe(204);
    }
    expect(await git(gitDir, 'for-each-ref', '--format=%(refname)', 'refs/tags/')).toBe(
      'refs/tags/v1.0.0\nrefs/tags/v2.0.0-beta.1\n',
    );
    const again = await app.request(`/projects/${project.id}/repository/tags/v1.1.0`, {
      method: 'DELETE',
      token: dev.token,
    });
    expect(again).toMatchObject({ status: 404, body: { message: '404 Tag Not Found' } });
    expect((await pushEvents(project)).map((e) => e.push_data)).toEqual([
      expect.objectContaining({ action: 'removed', ref_type: 'tag', ref: 'v1.1.0', commit_from: annotated }),
      expect.objectContaining({ action: 'removed', ref_type: 'tag', ref: 'v1.1.0-rc1' }),
    ]);
  });
});

describe('every role, through HTTP', () => {
  type Outcome = number;
  const expectations = (visibility: 'private' | 'public'): Record<Persona['name'], Outcome> => ({
    anonymous: visibility === 'private' ? 404 : 403,
    'non-member': visibility === 'private' ? 404 : 403,
    guest: 403,
    reporter: 403,
    developer: 0,
    maintainer: 0,
    owner: 0,
    admin: 0,
  });

  for (const visibility of ['private', 'public'] as const) {
    it(`creates and deletes branches and tags only for developers and up (${visibility} project)`, async () => {
      const { project, gitDir } = await makeSampleProject(app, owner, { path: `roles-${visibility}`, visibility });
      const personas = await makePersonas(app, { type: 'project', id: project.id });
      const expected = expectations(visibility);
      for (const persona of personas) {
        const denied = expected[persona.name];
        const name = `by-${persona.name}`;
        const before = await refsOf(gitDir);
        const calls = [
          ['POST', '/repository/branches', { branch: name, ref: 'main' }, 201],
          ['DELETE', `/repository/branches/${name}`, undefined, 204],
          ['DELETE', '/repository/branches/stable', undefined, 204],
          ['POST', '/repository/tags', { tag_name: name, ref: 'main', message: 'm' }, 201],
          // A tag is looked up before the permission check (GitLab's order): refuse an existing one.
          ['DELETE', `/repository/tags/${denied === 0 ? name : 'v1.0.0'}`, undefined, 204],
        ] as const;
        for (const [method, path, body, ok] of calls) {
          const res = await app.request(`/projects/${project.id}${path}`, { method, token: persona.token, body });
          const want = denied === 0 ? ok : denied;
          expect({ persona: persona.name, method, path, status: res.status }).toEqual({
            persona: persona.name,
            method,
            path,
            status: want,
          });
          if (denied === 403) expect(res.body).toEqual({ message: '403 Forbidden' });
          if (denied === 404) expect(res.body).toEqual({ message: '404 Project Not Found' });
        }
        if (denied !== 0) expect(await refsOf(gitDir)).toBe(before);
        else await git(gitDir, 'update-ref', 'refs/heads/stable', 'v1.0.0^{commit}');
        const main = await app.request(`/projects/${project.id}/repository/branches/main`, {
          method: 'DELETE',
          token: persona.token,
        });
        expect({ persona: persona.name, status: main.status }).toEqual({
          persona: persona.name,
          status: denied === 0 ? 400 : denied,
        });
      }
      expect(await revParse(gitDir, 'main')).toBeTruthy();
    });
  }

  it('refuses every write while the repository is read-only, and for archived projects', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'frozen' });
    const { token } = await member(project, 'maintainer');
    const before = await refsOf(gitDir);
    const calls = [
      ['POST', '/repository/branches', { branch: 'ro', ref: 'main' }],
      ['DELETE', '/repository/branches/stable', undefined],
      ['DELETE', '/repository/merged_branches', undefined],
      ['POST', '/repository/tags', { tag_name: 'ro', ref: 'main' }],
      ['DELETE', '/repository/tags/v1.0.0', undefined],
    ] as const;
    await app.deps.db
      .updateTable('projects')
      .set({ repository_read_only: true })
      .where('id', '=', project.id)
      .execute();
    for (const [method, path, body] of calls) {
      const res = await app.request(`/projects/${project.id}${path}`, { method, token, body });
      expect({ path, status: res.status, body: res.body }).toEqual({
        path,
        status: 403,
        body: { message: '403 Forbidden - The repository is temporarily read-only. Please try again later.' },
      });
    }
    await app.deps.db
      .updateTable('projects')
      .set({ repository_read_only: false, archived: true })
      .where('id', '=', project.id)
      .execute();
    for (const [method, path, body] of calls.filter(([, path]) => !path.includes('merged'))) {
      const res = await app.request(`/projects/${project.id}${path}`, { method, token, body });
      expect({ path, status: res.status }).toEqual({ path, status: 403 });
    }
    expect(await refsOf(gitDir)).toBe(before);
  });
});

describe('a GitLab client (@gitbeaker/rest)', () => {
  it('creates and removes branches and tags', async () => {
    const { project, gitDir } = await makeSampleProject(app, owner, { path: 'gitbeaker-refs' });
    const client = new Gitlab({ host: app.baseUrl, token: (await member(project, 'developer')).token });
    const branch = await client.Branches.create(project.id, 'release/1.x', 'stable');
    expect(branch).toMatchObject({ name: 'release/1.x', commit: { id: await revParse(gitDir, 'stable') } });
    const tag = await client.Tags.create(project.id, 'v1.0.1', 'release/1.x', { message: 'Patch release' });
    expect(tag).toMatchObject({ name: 'v1.0.1', message: 'Patch release' });
    expect(await git(gitDir, 'cat-file', '-p', 'refs/tags/v1.0.1')).toContain('tag v1.0.1\n');
    expect(await refsOf(gitDir)).toContain(' refs/heads/release/1.x\n');

    await client.Tags.remove(project.id, 'v1.0.1');
    await client.Branches.remove(project.id, 'release/1.x');
    const refs = await refsOf(gitDir);
    expect(refs).not.toContain('refs/tags/v1.0.1');
    expect(refs).not.toContain('refs/heads/release/1.x');
    await expect(client.Branches.remove(project.id, 'release/1.x')).rejects.toThrow();
  });
});
