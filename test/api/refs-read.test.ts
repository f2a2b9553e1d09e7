import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makePersonas, makeSampleProject, makeUser } from '../support/factories.js';
import { commitTree, gitIn } from '../support/git-fixtures.js';

let app: TestApp;
let owner: User;
let project: Project;
let gitDir: string;

const text = async (...args: string[]) => (await gitIn(gitDir, args)).toString('utf8');
const lines = async (...args: string[]) => (await text(...args)).split('\n').filter(Boolean);
const rev = async (r: string) => (await text('rev-parse', r)).trim();
/** Ref names as `git for-each-ref --sort=<key>` orders them. */
const refOrder = (prefix: string, sort: string) =>
  lines('for-each-ref', `--sort=${sort}`, '--format=%(refname:lstrip=2)', prefix);
const names = (body: { name: string }[]) => body.map((r) => r.name);

const EXTRA_BRANCHES = ['Zeta', 'alpha', 'beta-1', 'beta_1', 'old-stable', 'release/1.0', 'feature/deep/nested'];
const EXTRA_TAGS = [
  'Zeta',
  'alpha',
  'v1.2.0',
  'v1.10.0',
  'v1.9.0',
  'v10.0.0',
  'v1.0.0-rc1',
  '1.0',
  'v1.02',
  'v1.09',
  'v009',
  'v0010',
];

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  ({ project, gitDir } = await makeSampleProject(app, owner, { path: 'refs' }));
  // Branches and lightweight tags on one commit share a date: the sort tie-breaks show.
  const stable = await rev('stable');
  for (const name of EXTRA_BRANCHES) await gitIn(gitDir, ['update-ref', `refs/heads/${name}`, stable]);
  for (const name of EXTRA_TAGS) await gitIn(gitDir, ['update-ref', `refs/tags/${name}`, stable]);
  // A branch ahead of main: not merged.
  await commitTree(
    gitDir,
    'topic/unmerged',
    { 'x.txt': { content: 'x\n' } },
    { parent: await rev('main'), date: '1705400000 +0000' },
  );
  // An annotated tag with a multi-line message and its own date.
  await gitIn(gitDir, ['tag', '-a', 'v3.0.0', '-m', 'Three\n\nWith a body.', await rev('stable')], {
    GIT_COMMITTER_NAME: 'Tagger',
    GIT_COMMITTER_EMAIL: 'tagger@example.com',
    GIT_COMMITTER_DATE: '1705500000 +0100',
  });
});
afterAll(async () => {
  await app?.close();
});

describe('GET /projects/:id/repository/branches', () => {
  const url = () => `/projects/${project.id}/repository/branches`;

  it('sorts by name and by update as git for-each-ref does, ties by name in byte order', async () => {
    const cases: [string | undefined, string][] = [
      [undefined, 'refname'],
      ['name_asc', 'refname'],
      ['updated_asc', 'committerdate'],
      ['updated_desc', '-committerdate'],
    ];
    for (const [sort, gitSort] of cases) {
      const res = await app.request(url(), { query: { per_page: 100, ...(sort ? { sort } : {}) } });
      expect(res.status).toBe(200);
      expect({ sort, names: names(res.body) }).toEqual({ sort, names: await refOrder('refs/heads/', gitSort) });
    }
    expect((await app.request(url(), { query: { sort: 'name_desc' } })).body).toEqual({
      error: 'sort does not have a valid value',
    });
  });

  it('searches with GitLab’s rules: substring, ^ and $ anchors, * wildcards, exact match first', async () => {
    const search = async (term: string) => names((await app.request(url(), { query: { search: term } })).body);
    expect(await search('stable')).toEqual(['stable', 'old-stable']);
    expect(await search('STABLE')).toEqual(['stable', 'old-stable']);
    expect(await search('^feature')).toEqual(['feature/deep/nested', 'feature/merge-me']);
    expect(await search('^stable$')).toEqual(['stable']);
    expect(await search('stable$')).toEqual(['old-stable', 'stable']);
    expect(await search('beta*1')).toEqual(['beta-1', 'beta_1']);
    expect(await search('^f*ed$')).toEqual(['feature/deep/nested']);
    expect(await search('.')).toEqual(['release/1.0']);
    expect(await search('nothing-like-this')).toEqual([]);
  });

  it('filters by an RE2 regex and refuses an invalid one', async () => {
    const regex = async (re: string) => app.request(url(), { query: { regex: re } });
    expect(names((await regex('^beta[-_]1$')).body)).toEqual(['beta-1', 'beta_1']);
    expect(names((await regex('/')).body)).toEqual(
      (await refOrder('refs/heads/', 'refname')).filter((n) => n.includes('/')),
    );
    expect(names((await regex('(?i)^z')).body)).toEqual(['Zeta']);
    const invalid = await regex('(unclosed');
    expect(invalid.status).toBe(400);
    expect(invalid.body).toEqual({ message: 'Regex is invalid' });
  });

  it('pages with totals and clamps per_page', async () => {
    const all = await refOrder('refs/heads/', 'refname');
    const seen: string[] = [];
    for (let page = 1; page <= Math.ceil(all.length / 3); page++) {
      const res = await app.request(url(), { query: { per_page: 3, page } });
      expect(res.headers.get('x-total')).toBe(String(all.length));
      expect(res.headers.get('x-total-pages')).toBe(String(Math.ceil(all.length / 3)));
      seen.push(...names(res.body));
    }
    expect(seen).toEqual(all);
    const huge = await app.request(url(), { query: { per_page: 1000000 } });
    expect(huge.headers.get('x-per-page')).toBe('100');
    expect(huge.body).toHaveLength(all.length);
  });

  it('shows a branch, slashes and all, with merged, protected, default and web_url', async () => {
    const merged = new Set(await lines('for-each-ref', '--merged=main', '--format=%(refname:lstrip=2)', 'refs/heads/'));
    merged.delete('main');
    for (const name of await refOrder('refs/heads/', 'refname')) {
      const res = await app.request(`${url()}/${encodeURIComponent(name)}`);
      expect({ name, status: res.status }).toEqual({ name, status: 200 });
      const { commit, ...rest } = res.body;
      expect(Object.keys(res.body)).toEqual([
        'name',
        'commit',
        'merged',
        'protected',
        'developers_can_push',
        'developers_can_merge',
        'can_push',
        'default',
        'web_url',
      ]);
      expect(rest).toEqual({
        name,
        merged: merged.has(name),
        protected: name === 'main',
        developers_can_push: false,
        developers_can_merge: false,
        can_push: false,
        default: name === 'main',
        web_url: `${app.baseUrl}/${project.full_path}/-/tree/${name}`,
      });
      expect(commit.id).toBe(await rev(`refs/heads/${name}`));
    }
    expect(merged.has('topic/unmerged')).toBe(false);
    expect(merged.has('feature/merge-me')).toBe(true);
  });

  it('answers 404, 400 and HEAD as GitLab does', async () => {
    const show = (name: string, method = 'GET') => app.request(`${url()}/${encodeURIComponent(name)}`, { method });
    expect((await show('no-such-branch')).body).toEqual({ message: '404 Branch Not Found' });
    for (const bad of ['a..b', '-x', 'x.lock', 'a b', 'refs/heads/main']) {
      expect({ bad, body: (await show(bad)).body }).toEqual({
        bad,
        body: { message: 'The branch refname is invalid' },
      });
    }
    expect((await show('release/1.0', 'HEAD')).status).toBe(204);
    expect((await show('no-such-branch', 'HEAD')).status).toBe(404);
    // HEAD asks only whether the branch exists: an invalid name is simply not there.
    expect((await show('a..b', 'HEAD')).status).toBe(404);
  });

  it('says who can push: developers to unprotected branches, maintainers everywhere', async () => {
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<string, [boolean, boolean]> = {
      anonymous: [false, false],
      'non-member': [false, false],
      guest: [false, false],
      reporter: [false, false],
      developer: [false, true],
      maintainer: [true, true],
      admin: [true, true],
    };
    for (const persona of personas) {
      const main = await app.request(`${url()}/main`, { token: persona.token });
      const other = await app.request(`${url()}/release%2F1.0`, { token: persona.token });
      expect({ who: persona.name, can: [main.body.can_push, other.body.can_push] }).toEqual({
        who: persona.name,
        can: expected[persona.name],
      });
    }
  });
});

describe('GET /projects/:id/repository/tags', () => {
  const url = () => `/projects/${project.id}/repository/tags`;

  it('orders by updated, name and version as git for-each-ref does (GitLab’s default: updated desc)', async () => {
    const cases: [Record<string, string>, string][] = [
      [{}, '-creatordate'],
      [{ order_by: 'updated', sort: 'asc' }, 'creatordate'],
      [{ order_by: 'updated', sort: 'desc' }, '-creatordate'],
      [{ order_by: 'name', sort: 'asc' }, 'refname'],
      [{ order_by: 'name', sort: 'desc' }, '-refname'],
      [{ order_by: 'version', sort: 'asc' }, 'version:refname'],
      [{ order_by: 'version', sort: 'desc' }, '-version:refname'],
    ];
    for (const [query, gitSort] of cases) {
      const res = await app.request(url(), { query: { ...query, per_page: 100 } });
      expect(res.status).toBe(200);
      expect({ query, names: names(res.body) }).toEqual({ query, names: await refOrder('refs/tags/', gitSort) });
    }
    expect((await app.request(url(), { query: { order_by: 'date' } })).body).toEqual({
      error: 'order_by does not have a valid value',
    });
  });

  it('searches tags with the same rules as branches', async () => {
    const search = async (term: string, extra: Record<string, string> = {}) =>
      names((await app.request(url(), { query: { search: term, order_by: 'name', sort: 'asc', ...extra } })).body);
    expect(await search('^v1.1')).toEqual(['v1.1.0', 'v1.1.0-rc1', 'v1.10.0']);
    expect(await search('rc1$')).toEqual(['v1.0.0-rc1', 'v1.1.0-rc1']);
    expect(await search('v1.0.0')).toEqual(['v1.0.0', 'v1.0.0-rc1']);
    expect(await search('V1.0.0', { sort: 'desc' })).toEqual(['v1.0.0', 'v1.0.0-rc1']);
    const paged = await app.request(url(), { query: { search: 'v1', per_page: 2 } });
    expect(paged.headers.get('x-total')).toBe(String((await search('v1')).length));
  });

  it('shows annotated and lightweight tags: target, message, created_at, commit', async () => {
    const show = (name: string) => app.request(`${url()}/${encodeURIComponent(name)}`);
    for (const name of await refOrder('refs/tags/', 'refname')) {
      const res = await show(name);
      expect({ name, status: res.status }).toEqual({ name, status: 200 });
      expect(Object.keys(res.body)).toEqual([
        'name',
        'message',
        'target',
        'commit',
        'release',
        'protected',
        'created_at',
      ]);
      const type = (await text('cat-file', '-t', `refs/tags/${name}`)).trim();
      const target = await rev(`refs/tags/${name}`);
      let message = '';
      let createdAt: string | null = null;
      if (type === 'tag') {
        const object = await text('cat-file', 'tag', target);
        // Gitaly trims trailing newlines from tag messages.
        message = object.slice(object.indexOf('\n\n') + 2).replace(/\n+$/, '');
        const seconds = Number(/^tagger .* (\d+) [+-]\d{4}$/m.exec(object)?.[1]);
        createdAt = new Date(seconds * 1000).toISOString();
      }
      expect(res.body).toMatchObject({ name, message, target, release: null, protected: false, created_at: createdAt });
      expect(res.body.commit.id).toBe(await rev(`refs/tags/${name}^{commit}`));
    }
    const annotated = (await show('v3.0.0')).body;
    expect(annotated.message).toBe('Three\n\nWith a body.');
    expect(annotated.created_at).toBe('2024-01-17T14:00:00.000Z');
    expect(annotated.target).not.toBe(annotated.commit.id);
    const light = (await show('v1.1.0-rc1')).body;
    expect(light).toMatchObject({ message: '', created_at: null, target: await rev('v1.1.0-rc1') });
    expect((await show('no-such-tag')).body).toEqual({ message: '404 Tag Not Found' });
  });
});
