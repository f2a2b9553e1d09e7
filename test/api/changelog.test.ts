import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { projectMemberIds } from '../../src/db/queries/access.js';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { today } from '../../src/services/deps.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { vectorsOf } from '../support/changelog-vectors.js';
import {
  addMember,
  makeGroup,
  makePersonas,
  makeProject,
  makeSampleProject,
  makeToken,
  makeUser,
  ROLES,
} from '../support/factories.js';
import { RepoBuilder } from '../support/git-builder.js';

const exec = promisify(execFile);
const ids = inject('sampleCommits');
const PREFIX = 'Failed to generate the changelog: ';

let app: TestApp;
let owner: User;
let maintainer: User;
let token: string;
let seq = 0;

const git = async (gitDir: string, ...args: string[]) =>
  (await exec('git', [`--git-dir=${gitDir}`, ...args], { env: gitEnvironment(), encoding: 'utf8' })).stdout;
const tip = async (gitDir: string, branch = 'main') => (await git(gitDir, 'rev-parse', branch)).trim();
const changelogUrl = (project: Project) => `/projects/${project.id}/repository/changelog`;

/** The sample repository as a new project, with `maintainer` as a maintainer. */
async function sample(options: { visibility?: 'public' | 'private' } = {}) {
  seq += 1;
  const made = await makeSampleProject(app, owner, { path: `changelog${seq}`, ...options });
  await addMember(app, { type: 'project', id: made.project.id }, maintainer, ROLES.maintainer);
  return made;
}

/** A project whose repository `build` fills. */
async function built(build: (b: RepoBuilder) => Promise<void>) {
  seq += 1;
  const project = await makeProject(app, owner, { path: `built${seq}`, visibility: 'public' });
  await addMember(app, { type: 'project', id: project.id }, maintainer, ROLES.maintainer);
  const gitDir = app.deps.storages.repositoryPath(project.repository_storage, project.id);
  const b = await RepoBuilder.create();
  await build(b);
  await b.install(gitDir);
  return { project, gitDir };
}

const commitUrl = (project: Project, sha: string) => `${app.baseUrl}/${project.full_path}/-/commit/${sha}`;

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  maintainer = await makeUser(app);
  token = await makeToken(app, maintainer);
  // The 5-per-minute limit is checked in its own test; here it would only get in the way.
  await app.deps.db
    .insertInto('application_settings')
    .values({ key: 'rate_limits', value: JSON.stringify({ project_repositories_changelog: 0 }) })
    .execute();
});
afterAll(async () => {
  await app?.close();
});

/** The sample history's 1.1.0 section (v1.0.0..v1.1.0), newest first, no author credited. */
const section110 = (project: Project, date = '2024-02-01') =>
  `## 1.1.0 (${date})\n\n` +
  `### security (1 change)\n\n- [Escape user names in greetings](${commitUrl(project, ids.security as string)})\n\n` +
  `### removed (1 change)\n\n- [Remove the deprecated helper](${commitUrl(project, ids.removal as string)})\n\n` +
  `### changed (1 change)\n\n- [Improve the guide](${commitUrl(project, ids.docs as string)})\n\n` +
  `### fixed (1 change)\n\n- [Fix bug Y in the helpers](${commitUrl(project, ids.fixY as string)})\n\n` +
  `### added (1 change)\n\n- [Add feature X](${commitUrl(project, ids.featureX as string)})\n`;

describe('GET /projects/:id/repository/changelog', () => {
  it('returns the section for the range after the previous stable tag, commits nothing', async () => {
    const { project, gitDir } = await sample();
    const before = await tip(gitDir);
    const res = await app.request(changelogUrl(project), {
      token,
      query: { version: '1.1.0', to: 'v1.1.0', date: '2024-02-01' },
    });
    // v1.1.0-rc1 is a pre-release and v1.1.0 is not below 1.1.0: the range starts at v1.0.0.
    // The experimental flag and its revert cancel out; the merged branch's commit is in.
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ notes: section110(project) });
    expect(await tip(gitDir)).toBe(before);
  });

  it('defaults `to` to the default branch and the date to today (UTC)', async () => {
    const { project } = await sample();
    app.clock.set('2026-03-04T23:30:00Z');
    const res = await app.request(changelogUrl(project), { token, query: { version: '2.0.0' } });
    expect(res.body).toEqual({
      notes: `## 2.0.0 (2026-03-04)\n\n### other (1 change)\n\n- [Start the 2.0 work](${commitUrl(project, ids.next as string)})\n`,
    });
  });

  it('keeps the offset of `date` for the header; a v prefix is dropped from the header', async () => {
    const { project } = await sample();
    const res = await app.request(changelogUrl(project), {
      token,
      query: { version: 'v2.0.0', from: 'v1.1.0', date: '2024-02-01T22:00:00-05:00' },
    });
    // In UTC it is already 2 February.
    expect(res.body.notes.split('\n')[0]).toBe('## 2.0.0 (2024-02-01)');
  });

  it('uses the trailer given, case-sensitively, with the trailer value as category', async () => {
    const { project } = await sample();
    const reviewed = await app.request(changelogUrl(project), {
      token,
      query: { version: '1.1.0', trailer: 'Reviewed-by', date: '2024-02-01' },
    });
    expect(reviewed.body.notes).toBe(
      '## 1.1.0 (2024-02-01)\n\n### Carol Écrivain <carol@example.org> (1 change)\n\n' +
        `- [Escape user names in greetings](${commitUrl(project, ids.security as string)})\n`,
    );
    const lower = await app.request(changelogUrl(project), {
      token,
      query: { version: '1.1.0', trailer: 'changelog', date: '2024-02-01' },
    });
    expect(lower.body.notes).toBe('## 1.1.0 (2024-02-01)\n\nNo changes.\n');
  });

  it('credits authors found by e-mail only through include_groups the caller can read', async () => {
    const { project, gitDir } = await built(async (b) => {
      const bob = { name: 'Bob', email: 'Bob.Changelog@Example.com' };
      await b.commit(bob, 'Initial');
      await b.git(bob, 'tag', 'v1.0.0');
      await b.commit(bob, 'Add a thing\n\nChangelog: added');
      await b.commit({ name: 'Nobody', email: 'nobody@example.com' }, 'Fix a thing\n\nChangelog: fixed');
      await b.commit({ name: 'Carol', email: 'carol.changelog@example.com' }, 'Change a thing\n\nChangelog: changed');
      await b.commit(bob, '.gitlab: config', {
        '.gitlab/changelog_config.yml':
          'include_groups:\n  - credited\n  - secret\n  - missing/group\ntemplate: |\n' +
          '  {% each categories %}{% each entries %}{{ title }}|{{ author.reference }}|{{ author.contributor }}|{{ author.credit }}|{{ merge_request }}\n' +
          '  {% end %}{% end %}\n',
      });
    });
    const bob = await makeUser(app, { email: 'bob.changelog@example.com' });
    const carol = await makeUser(app, { email: 'carol.changelog@example.com' });
    const credited = await makeGroup(app, owner, { path: 'credited', visibility: 'public' });
    const secret = await makeGroup(app, owner, { path: 'secret', visibility: 'private' });
    await addMember(app, { type: 'group', id: credited.id }, bob, ROLES.developer);
    await addMember(app, { type: 'group', id: secret.id }, carol, ROLES.developer);
    await addMember(app, { type: 'project', id: project.id }, carol, ROLES.developer);
    expect(await tip(gitDir)).toMatch(/^[0-9a-f]{40}$/);

    const res = await app.request(changelogUrl(project), { token, query: { version: '1.1.0', date: '2024-02-01' } });
    // Bob: credited through a public group. Carol: a project member (no contributor) whose group
    // the caller cannot read. Nobody: no Depot user, so no author at all. No merge requests yet.
    expect(res.body.notes).toBe(
      '## 1.1.0 (2024-02-01)\n\n' +
        `Change a thing|@${carol.username}|false|false|\n` +
        'Fix a thing||||\n' +
        `Add a thing|@${bob.username}|false|true|\n`,
    );
    // The owner of the private group reads it, so Carol is credited when the owner asks.
    const ownerToken = await makeToken(app, owner);
    const asOwner = await app.request(changelogUrl(project), {
      token: ownerToken,
      query: { version: '1.1.0', date: '2024-02-01' },
    });
    expect(asOwner.body.notes).toContain(`Change a thing|@${carol.username}|false|true|`);
  });

  it('contributor test, membership half: Guest or above on the project or an ancestor group', async () => {
    const parent = await makeGroup(app, owner, { visibility: 'public' });
    const child = await makeGroup(app, owner, { visibility: 'public', parent });
    const project = await makeProject(app, owner, { namespace: child, visibility: 'public' });
    const [direct, inherited, guest, minimal, expired, stranger] = await Promise.all(
      Array.from({ length: 6 }, () => makeUser(app)),
    );
    await addMember(app, { type: 'project', id: project.id }, direct as User, ROLES.developer);
    await addMember(app, { type: 'group', id: parent.id }, inherited as User, ROLES.reporter);
    await addMember(app, { type: 'project', id: project.id }, guest as User, ROLES.guest);
    await addMember(app, { type: 'group', id: child.id }, minimal as User, 5);
    await addMember(app, { type: 'project', id: project.id }, expired as User, ROLES.developer, '2000-01-01');
    const all = [direct, inherited, guest, minimal, expired, stranger].map((u) => (u as User).id);
    const members = await projectMemberIds(app.deps.db, all, project.id, child.traversal_ids, today(app.deps));
    expect([...members].sort((a, b) => a - b)).toEqual(
      [direct, inherited, guest].map((u) => (u as User).id).sort((a, b) => a - b),
    );
  });

  it('reads the config at the default branch unless config_file_ref names another ref', async () => {
    const { project } = await built(async (b) => {
      const a = { name: 'A', email: 'a@example.com' };
      await b.commit(a, 'Initial');
      await b.git(a, 'tag', '1.0.0');
      await b.commit(a, 'Feature\n\nChangelog: feature');
      await b.git(a, 'checkout', '--quiet', '-b', 'foo');
      await b.commit(a, 'Config', {
        'custom_changelog.yml':
          "date_format: '%d %B %Y'\ncategories:\n  feature: Features\ntemplate: custom changelog {{ categories.0.title }}\n",
      });
      await b.git(a, 'checkout', '--quiet', 'main');
    });
    const query = { version: '1.1.0', date: '2024-02-01', config_file: 'custom_changelog.yml' };
    const plain = await app.request(changelogUrl(project), { token, query });
    expect(plain.body.notes).toContain('### feature (1 change)');
    const custom = await app.request(changelogUrl(project), { token, query: { ...query, config_file_ref: 'foo' } });
    expect(custom.body.notes).toBe('## 1.1.0 (01 February 2024)\n\ncustom changelog Features\n');
  });

  it('a revert of a revert restores the original; a revert with its own trailer is kept', async () => {
    // The structure of GitLab's gitlab-test fixture used by its commits finder spec.
    const commits: Record<string, string> = {};
    const { project } = await built(async (b) => {
      const a = { name: 'A', email: 'a@example.com' };
      commits.base = await b.commit(a, 'Base');
      commits.original = await b.commit(a, 'Add original\n\nChangelog: added', { 'f.txt': 'x\n' });
      await b.git(a, 'revert', '--no-edit', commits.original);
      // The middle revert carries a trailer too: being reverted itself, it must not show.
      await b.git(
        a,
        'commit',
        '--quiet',
        '--amend',
        '-m',
        `Revert "Add original"\n\nThis reverts commit ${commits.original}.\n\nChangelog: removed`,
      );
      commits.revert = await b.git(a, 'rev-parse', 'HEAD');
      await b.git(a, 'revert', '--no-edit', commits.revert);
      await b.git(
        a,
        'commit',
        '--quiet',
        '--amend',
        '-m',
        `Restore\n\nThis reverts commit ${commits.revert}.\n\nChangelog: fixed`,
      );
      commits.restore = await b.git(a, 'rev-parse', 'HEAD');
    });
    const res = await app.request(changelogUrl(project), {
      token,
      query: { version: '1.0.0', from: commits.base as string, date: '2024-02-01' },
    });
    expect(res.body.notes).toBe(
      '## 1.0.0 (2024-02-01)\n\n' +
        `### fixed (1 change)\n\n- [Restore](${commitUrl(project, commits.restore as string)})\n\n` +
        `### added (1 change)\n\n- [Add original](${commitUrl(project, commits.original as string)})\n`,
    );
  });

  it('answers every changelog failure with 422 and GitLab message', async () => {
    const { project } = await built(async (b) => {
      const a = { name: 'A', email: 'a@example.com' };
      await b.commit(a, 'Initial');
      await b.git(a, 'tag', 'v1.0.0');
      for (const [branch, config] of [
        ['yaml', 'invalid: :yaml\n'],
        ['template', 'template: "{% each %}"\n'],
        ['regex', "tag_regex: '(?P<major>\\d+'\n"],
        ['categories', 'categories: [a]\n'],
        [
          'loops',
          `template: "{% each categories %}{% each entries %}${'{% each it %}'.repeat(3)}${'{% end %}'.repeat(5)}"\n`,
        ],
      ]) {
        await b.git(a, 'checkout', '--quiet', '-b', branch as string, 'main');
        await b.commit(a, `config ${branch}\n\nChangelog: added`, { 'c.yml': config as string });
      }
      await b.git(a, 'checkout', '--quiet', 'main');
    });
    const fail = async (query: Record<string, string>) => {
      const res = await app.request(changelogUrl(project), { token, query });
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      return res.body.message as string;
    };
    expect(await fail({ version: '0.9.0' })).toBe(
      `${PREFIX}The commit start range is unspecified, and no previous tag could be found to use instead`,
    );
    for (const bad of ['nope', '--output=/tmp/x', 'main..main', 'a b']) {
      expect(await fail({ version: '1.0.0', from: bad })).toBe(
        `${PREFIX}Invalid or not found commit value in the given range`,
      );
    }
    expect(await fail({ version: '1.0.0', from: 'v1.0.0', to: 'missing' })).toBe(
      `${PREFIX}Invalid or not found commit value in the given range`,
    );
    const withConfig = (branch: string) => ({ version: '1.1.0', config_file: 'c.yml', config_file_ref: branch });
    expect(await fail(withConfig('yaml'))).toBe(`${PREFIX}c.yml does not contain valid YAML`);
    expect(await fail(withConfig('template'))).toMatch(
      /^Failed to generate the changelog: Failed to parse the template: /,
    );
    expect(await fail(withConfig('regex'))).toMatch(
      /^Failed to generate the changelog: The regular expression to use for finding the previous tag for a version is invalid: .+/,
    );
    expect(await fail(withConfig('categories'))).toBe(`${PREFIX}The "categories" configuration key must be a Hash`);
    // Entries are maps, iterated as [key, value] pairs, whose values are iterated again: the
    // fifth loop is entered (on a string) and refused.
    expect(await fail({ ...withConfig('loops'), to: 'loops' })).toBe(`${PREFIX}You can only nest up to 4 loops`);
  });

  it('refuses a range over 15000 commits', async () => {
    const { project, gitDir } = await built(async (b) => {
      await b.commit({ name: 'A', email: 'a@example.com' }, 'Initial');
    });
    // 15,001 commits on top of the first, written with fast-import.
    const lines: string[] = [];
    for (let i = 0; i < 15_001; i++) {
      lines.push(
        'commit refs/heads/main',
        `committer A <a@example.com> ${1_700_100_000 + i} +0000`,
        'data 2',
        `c${i % 10}`,
      );
      if (i === 0) lines.push(`from ${await tip(gitDir)}`);
      lines.push('');
    }
    await new Promise<void>((resolve, reject) => {
      const child = execFile(
        'git',
        [`--git-dir=${gitDir}`, 'fast-import', '--quiet'],
        { env: gitEnvironment() },
        (e) => (e ? reject(e) : resolve()),
      );
      child.stdin?.end(`${lines.join('\n')}\n`);
    });
    const first = (await git(gitDir, 'rev-list', '--max-parents=0', 'main')).trim();
    const res = await app.request(changelogUrl(project), { token, query: { version: '1.0.0', from: first } });
    expect(res).toMatchObject({
      status: 422,
      body: { message: `${PREFIX}The commits range exceeds 15000 elements.` },
    });
    const fits = await app.request(changelogUrl(project), {
      token,
      query: { version: '1.0.0', from: (await git(gitDir, 'rev-parse', 'main~15000')).trim() },
    });
    expect(fits.status).toBe(200);
  });

  it('validates parameters the way Grape does', async () => {
    const { project } = await sample();
    const missing = await app.request(changelogUrl(project), { token });
    expect(missing).toMatchObject({ status: 400, body: { error: 'version is missing' } });
    const invalid = await app.request(changelogUrl(project), { token, query: { version: 'wrong_version' } });
    expect(invalid).toMatchObject({ status: 400, body: { error: 'version is invalid' } });
    const date = await app.request(changelogUrl(project), { token, query: { version: '1.0.0', date: 'soon' } });
    expect(date).toMatchObject({ status: 400, body: { error: 'date is invalid' } });
  });

  it('needs read access to the code: 404 for outsiders of a private project, 403 for guests', async () => {
    const { project } = await sample({ visibility: 'private' });
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const statuses: Record<string, number> = {};
    for (const persona of personas) {
      const res = await app.request(changelogUrl(project), {
        token: persona.token,
        query: { version: '1.1.0', to: 'v1.1.0' },
      });
      statuses[persona.name] = res.status;
    }
    expect(statuses).toEqual({
      anonymous: 404,
      'non-member': 404,
      guest: 403,
      reporter: 200,
      developer: 200,
      maintainer: 200,
      admin: 200,
    });
  });

  it('is rate limited per user and project (project_repositories_changelog)', async () => {
    const { project } = await sample();
    await app.deps.db
      .updateTable('application_settings')
      .set({ value: JSON.stringify({ project_repositories_changelog: 1 }) })
      .where('key', '=', 'rate_limits')
      .execute();
    try {
      app.clock.advance(60_000);
      const query = { version: '1.1.0', to: 'v1.1.0' };
      expect((await app.request(changelogUrl(project), { token, query })).status).toBe(200);
      const limited = await app.request(changelogUrl(project), { token, query });
      expect(limited).toMatchObject({
        status: 429,
        body: { message: { error: 'This changelog has been requested too many times. Try again later.' } },
      });
      const post = await app.request(changelogUrl(project), { method: 'POST', token, body: { version: '1.1.0' } });
      expect(post.status).toBe(429);
      const other = await makeToken(app, owner);
      expect((await app.request(changelogUrl(project), { token: other, query })).status).toBe(200);
    } finally {
      await app.deps.db
        .updateTable('application_settings')
        .set({ value: JSON.stringify({ project_repositories_changelog: 0 }) })
        .where('key', '=', 'rate_limits')
        .execute();
    }
  });
});

describe('POST /projects/:id/repository/changelog', () => {
  it('commits the section into CHANGELOG.md on the default branch as the caller', async () => {
    const { project, gitDir } = await sample();
    const before = await tip(gitDir);
    const res = await app.request(changelogUrl(project), {
      method: 'POST',
      token,
      body: { version: '1.1.0', to: 'v1.1.0', date: '2024-02-01' },
    });
    expect(res.status).toBe(200);
    expect(await git(gitDir, 'show', 'main:CHANGELOG.md')).toBe(section110(project));
    expect((await git(gitDir, 'log', '-1', '--format=%P%n%an <%ae>%n%cn <%ce>%n%B', 'main')).trim()).toBe(
      `${before}\n${maintainer.name} <${maintainer.email}>\n${maintainer.name} <${maintainer.email}>\nAdd changelog for version 1.1.0`,
    );
    expect((await git(gitDir, 'diff', '--name-status', before, 'main')).trim()).toBe('A\tCHANGELOG.md');
  });

  it('inserts sections in version order; a version already present commits nothing', async () => {
    const { project, gitDir } = await sample();
    const post = (body: Record<string, string>) =>
      app.request(changelogUrl(project), { method: 'POST', token, body: { date: '2024-02-01', ...body } });
    expect((await post({ version: '1.1.0', to: 'v1.1.0' })).status).toBe(200);
    const afterFirst = await tip(gitDir);

    const again = await post({ version: '1.1.0', to: 'v1.1.0', message: 'should not appear' });
    expect(again.status).toBe(200);
    expect(await tip(gitDir)).toBe(afterFirst);

    expect((await post({ version: 'v2.0.0', from: 'v1.1.0' })).status).toBe(200);
    expect((await git(gitDir, 'log', '-1', '--format=%s', 'main')).trim()).toBe('Add changelog for version v2.0.0');
    expect((await post({ version: '1.0.1', from: 'v1.0.0', to: 'v1.0.0' })).status).toBe(200);
    expect((await post({ version: '1.0.5', from: 'v1.0.0', to: 'v1.0.0', message: 'Patch notes' })).status).toBe(200);
    expect((await git(gitDir, 'log', '-1', '--format=%s', 'main')).trim()).toBe('Patch notes');

    const next = `- [Start the 2.0 work](${commitUrl(project, ids.next as string)})`;
    expect(await git(gitDir, 'show', 'main:CHANGELOG.md')).toBe(
      `## 2.0.0 (2024-02-01)\n\n### other (1 change)\n\n${next}\n\n` +
        `${section110(project)}\n` +
        '## 1.0.5 (2024-02-01)\n\nNo changes.\n\n' +
        '## 1.0.1 (2024-02-01)\n\nNo changes.\n',
    );
  });

  it('commits to the branch and file given, reading `to` from that branch', async () => {
    const { project, gitDir } = await sample();
    const mainBefore = await tip(gitDir);
    const res = await app.request(changelogUrl(project), {
      method: 'POST',
      token,
      body: { version: '1.0.1', branch: 'stable', file: 'docs/CHANGES.md', date: '2024-02-01' },
    });
    expect(res.status).toBe(200);
    expect(await tip(gitDir)).toBe(mainBefore);
    // `stable` is at v1.0.0: nothing since the previous tag.
    expect(await git(gitDir, 'show', 'stable:docs/CHANGES.md')).toBe('## 1.0.1 (2024-02-01)\n\nNo changes.\n');
    const missing = await app.request(changelogUrl(project), {
      method: 'POST',
      token,
      body: { version: '1.0.1', branch: 'missing' },
    });
    expect(missing).toMatchObject({
      status: 422,
      body: { message: `${PREFIX}Invalid or not found commit value in the given range` },
    });
    const badFile = await app.request(changelogUrl(project), {
      method: 'POST',
      token,
      body: { version: '1.0.1', file: '../outside.md' },
    });
    expect(badFile).toMatchObject({ status: 400, body: { error: 'file is invalid' } });
  });

  it('GitLab service vector: from excluded, to included, newest first, file created', async () => {
    const vector = vectorsOf('service').find((v) => v.name.includes('generates and commits'));
    if (!vector) throw new Error('vector missing');
    const shas: Record<string, string> = {};
    const { project, gitDir } = await built(async (b) => {
      for (const c of vector.input.commits_oldest_first) {
        shas[c.sha] = await b.commit({ name: c.author, email: `${c.sha}@example.com` }, c.message, {
          [`${c.sha}.txt`]: c.sha,
        });
      }
    });
    app.clock.set('2026-01-15T10:00:00Z');
    const res = await app.request(changelogUrl(project), {
      method: 'POST',
      token,
      body: { version: '1.0.0', from: shas.sha1, to: shas.sha3 },
    });
    expect(res.status).toBe(200);
    const file = await git(gitDir, 'show', `main:${vector.expected.file}`);
    for (const title of vector.expected.contains) expect(file).toContain(title);
    // The derived file less the merge request links: Depot has no merge requests yet.
    expect(file).toBe(
      (vector.expected.derived_full_file as string)
        .replace('<today>', '2026-01-15')
        .replace('<web_url sha3>', commitUrl(project, shas.sha3 as string))
        .replace('<web_url sha2>', commitUrl(project, shas.sha2 as string))
        .replaceAll(/ \(\[merge request\]\(<web_url mr\d>\)\)/g, ''),
    );
  });

  it('needs push access to the branch and a writable repository', async () => {
    const { project, gitDir } = await sample();
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const before = await tip(gitDir);
    const statuses: Record<string, [number, unknown]> = {};
    for (const persona of personas) {
      const res = await app.request(changelogUrl(project), {
        method: 'POST',
        token: persona.token,
        body: { version: '1.1.0', to: 'v1.1.0', branch: persona.name === 'developer' ? 'main' : 'stable' },
      });
      statuses[persona.name] = [res.status, res.body?.message];
    }
    const refused = [403, '403 Forbidden - You are not allowed to commit a changelog on this branch'];
    // Developers may push to other branches but not to the default one.
    expect(statuses).toEqual({
      anonymous: refused,
      'non-member': refused,
      guest: refused,
      reporter: refused,
      developer: refused,
      maintainer: [200, undefined],
      admin: [200, undefined],
    });
    expect(await tip(gitDir)).toBe(before);
    const developer = personas.find((p) => p.name === 'developer');
    const onStable = await app.request(changelogUrl(project), {
      method: 'POST',
      token: developer?.token,
      body: { version: '1.2.0', branch: 'stable', to: 'main' },
    });
    expect(onStable.status).toBe(200);

    await app.deps.db
      .updateTable('projects')
      .set({ repository_read_only: true })
      .where('id', '=', project.id)
      .execute();
    const readOnly = await app.request(changelogUrl(project), {
      method: 'POST',
      token,
      body: { version: '3.0.0', from: 'v1.1.0' },
    });
    expect(readOnly).toMatchObject({
      status: 403,
      body: { message: '403 Forbidden - The repository is temporarily read-only. Please try again later.' },
    });
    expect(await tip(gitDir)).toBe(before);
    const read = await app.request(changelogUrl(project), { token, query: { version: '3.0.0', from: 'v1.1.0' } });
    expect(read.status).toBe(200);
  });

  it('GitLab API vectors: every parameter as sent, GET without a commit, version required', async () => {
    const [post, get, , required] = vectorsOf('api');
    if (!post || !get || !required) throw new Error('vectors missing');
    const { project, gitDir } = await built(async (b) => {
      const a = { name: 'A', email: 'a@example.com' };
      await b.commit(a, 'Initial');
      await b.git(a, 'tag', 'foo');
      await b.commit(a, 'Kept\n\nFoo: kittens');
      await b.git(a, 'branch', 'bar');
      await b.git(a, 'branch', 'kittens');
    });
    const url = changelogUrl(project);
    const section = `## 1.0.0 (2020-01-01)\n\n### kittens (1 change)\n\n- [Kept](${commitUrl(project, await tip(gitDir, 'bar'))})\n`;

    const shown = await app.request(url, { token, query: get.input.params });
    expect(shown).toMatchObject({ status: get.expected.status, body: { notes: section } });

    const before = await tip(gitDir, 'kittens');
    const committed = await app.request(url, { method: 'POST', token, body: post.input.params });
    expect(committed.status).toBe(post.expected.status);
    expect(await git(gitDir, 'show', `kittens:${post.expected.service_args.file}`)).toBe(section);
    expect((await git(gitDir, 'log', '-1', '--format=%P %s', 'kittens')).trim()).toBe(
      `${before} ${post.expected.service_args.message}`,
    );

    const missing = await app.request(url, { method: 'POST', token, body: required.input.params });
    expect(missing).toMatchObject({ status: required.expected.status, body: required.expected.body });
  });

  it('works from a GitLab client library (@gitbeaker/rest)', async () => {
    const { project, gitDir } = await sample();
    const client = new Gitlab({ host: app.baseUrl, token });
    const shown = await client.Repositories.showChangelog(project.id, '1.1.0', { to: 'v1.1.0', date: '2024-02-01' });
    expect(shown.notes).toBe(section110(project));
    await client.Repositories.editChangelog(project.id, '1.1.0', {
      to: 'v1.1.0',
      date: '2024-02-01',
      message: 'Release notes via gitbeaker',
    });
    expect(await git(gitDir, 'show', 'main:CHANGELOG.md')).toBe(section110(project));
    expect((await git(gitDir, 'log', '-1', '--format=%s', 'main')).trim()).toBe('Release notes via gitbeaker');
  });
});
