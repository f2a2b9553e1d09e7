import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeSampleProject, makeUser } from '../support/factories.js';
import { gitIn } from '../support/git-fixtures.js';

let app: TestApp;
let owner: User;
let project: Project;
let gitDir: string;

const text = async (...args: string[]) => (await gitIn(gitDir, args)).toString('utf8');
const ids = async (...args: string[]) => (await text('log', '--format=%H', ...args)).split('\n').filter(Boolean);

/** GitLab's Commit entity for `sha`, from `git show` fields. */
async function expectedCommit(sha: string) {
  const [id, parents, an, ae, ad, cn, ce, cd] = (
    await text('show', '-s', '--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI', sha)
  )
    .trim()
    .split('\0') as string[];
  const message = (await gitIn(gitDir, ['cat-file', 'commit', sha]))
    .toString('utf8')
    .split('\n\n')
    .slice(1)
    .join('\n\n');
  const iso = (d: string) => d.replace(/(:\d\d)([+-]\d\d:\d\d|Z)$/, '$1.000$2');
  return {
    id,
    short_id: id?.slice(0, 8),
    created_at: iso(cd as string),
    parent_ids: parents ? parents.split(' ') : [],
    title: message.split('\n')[0],
    message,
    author_name: an,
    author_email: ae,
    authored_date: iso(ad as string),
    committer_name: cn,
    committer_email: ce,
    committed_date: iso(cd as string),
    trailers: {},
    extended_trailers: {},
    web_url: `${app.baseUrl}/${project.full_path}/-/commit/${id}`,
  };
}

/** Additions and deletions against the first parent, as `git show --numstat` counts them. */
async function numstat(sha: string) {
  const out = await text('show', '--numstat', '--format=', '--diff-merges=first-parent', '--no-renames', sha);
  let additions = 0;
  let deletions = 0;
  for (const line of out.split('\n').filter(Boolean)) {
    const [a, d] = line.split('\t');
    if (a !== '-') additions += Number(a);
    if (d !== '-') deletions += Number(d);
  }
  return { additions, deletions, total: additions + deletions };
}

/** Every page of a list, following X-Next-Page. */
async function allPages(url: string, query: Record<string, string | number | boolean>) {
  const out: { id: string }[] = [];
  for (let page = 1; ; page++) {
    const res = await app.request(url, { query: { ...query, page } });
    expect(res.status).toBe(200);
    out.push(...res.body);
    if (res.headers.get('x-next-page') === '') return out;
    expect(page).toBeLessThan(50);
  }
}

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  ({ project, gitDir } = await makeSampleProject(app, owner, { path: 'commit-history' }));
});
afterAll(async () => {
  await app?.close();
});

describe('GET /projects/:id/repository/commits', () => {
  const url = () => `/projects/${project.id}/repository/commits`;

  it('lists the default branch as git log does, every field as git records it', async () => {
    const res = await app.request(url(), { query: { per_page: 100 } });
    expect(res.status).toBe(200);
    const expected = await ids('main');
    expect(expected.length).toBe(13);
    expect(res.body.map((c: { id: string }) => c.id)).toEqual(expected);
    for (const commit of res.body) expect(commit).toEqual(await expectedCommit(commit.id));
  });

  it('filters by ref_name, path, since, until, all, first_parent, order and author like git log', async () => {
    const cases: [Record<string, string | boolean>, string[]][] = [
      [{ ref_name: 'stable' }, ['stable']],
      [{ ref_name: 'v1.1.0' }, ['v1.1.0']],
      [{ ref_name: 'feature/merge-me' }, ['feature/merge-me']],
      [{ ref_name: 'main~3' }, ['main~3']],
      [{ path: 'src/app/util/helpers.js' }, ['main', '--', ':(literal)src/app/util/helpers.js']],
      [{ path: '/src/app/util/helpers.js' }, ['main', '--', ':(literal)src/app/util/helpers.js']],
      [{ path: 'docs' }, ['main', '--', ':(literal)docs']],
      [{ path: 'データ/説明.txt' }, ['main', '--', ':(literal)データ/説明.txt']],
      [{ path: 'docs/guide/intro.md', ref_name: 'stable' }, ['stable', '--', ':(literal)docs/guide/intro.md']],
      [{ since: '2024-01-15T16:00:00Z' }, ['--since=2024-01-15T16:00:00Z', 'main']],
      [{ until: '2024-01-15T16:00:00Z' }, ['--until=2024-01-15T16:00:00Z', 'main']],
      [
        { since: '2024-01-15T12:00:00Z', until: '2024-01-15T20:00:00Z' },
        ['--since=2024-01-15T12:00:00Z', '--until=2024-01-15T20:00:00Z', 'main'],
      ],
      [{ all: true }, ['--all']],
      [{ first_parent: true }, ['--first-parent', 'main']],
      [{ order: 'topo' }, ['--topo-order', 'main']],
      [{ author: 'Bob' }, ['--author=Bob', 'main']],
      [{ author: 'carol@example.org' }, ['--author=carol@example.org', 'main']],
    ];
    for (const [query, args] of cases) {
      const res = await app.request(url(), { query: { ...query, per_page: 100 } });
      expect({ query, status: res.status }).toEqual({ query, status: 200 });
      expect({ query, ids: res.body.map((c: { id: string }) => c.id) }).toEqual({ query, ids: await ids(...args) });
    }
    // The cases are not all the same list.
    expect(new Set(cases.map(([q]) => JSON.stringify(q))).size).toBe(cases.length);
    expect((await ids('--first-parent', 'main')).length).toBeLessThan((await ids('main')).length);
    expect((await ids('--all')).length).toBeGreaterThan((await ids('main')).length - 1);
  });

  it('pages without totals, in git’s order, and clamps per_page to 100', async () => {
    const expected = await ids('--all');
    const paged = await allPages(url(), { all: true, per_page: 4 });
    expect(paged.map((c) => c.id)).toEqual(expected);

    const second = await app.request(url(), { query: { per_page: 4, page: 2 } });
    expect(second.headers.get('x-page')).toBe('2');
    expect(second.headers.get('x-per-page')).toBe('4');
    expect(second.headers.get('x-prev-page')).toBe('1');
    expect(second.headers.get('x-next-page')).toBe('3');
    expect(second.headers.get('x-total')).toBeNull();
    expect(second.headers.get('x-total-pages')).toBeNull();
    const link = second.headers.get('link') ?? '';
    expect(link).toContain('rel="prev"');
    expect(link).toContain('rel="next"');
    expect(link).toContain('rel="first"');
    expect(link).not.toContain('rel="last"');

    const huge = await app.request(url(), { query: { per_page: 1000000 } });
    expect(huge.status).toBe(200);
    expect(huge.headers.get('x-per-page')).toBe('100');
    expect(huge.body).toHaveLength(13);
    const beyond = await app.request(url(), { query: { per_page: 20, page: 5 } });
    expect(beyond.body).toEqual([]);
    expect(beyond.headers.get('x-next-page')).toBe('');
  });

  it('adds stats against the first parent and parses trailers when asked', async () => {
    const res = await app.request(url(), { query: { with_stats: true, per_page: 100, all: true } });
    for (const commit of res.body) {
      expect({ id: commit.id, stats: commit.stats }).toEqual({ id: commit.id, stats: await numstat(commit.id) });
      expect(Object.keys(commit).at(-1)).toBe('stats');
    }
    const plain = await app.request(url(), { query: { per_page: 100 } });
    expect(plain.body.every((c: object) => !('stats' in c))).toBe(true);

    const security = (await ids('--grep=Escape user names', 'main'))[0] as string;
    const withTrailers = await app.request(url(), { query: { trailers: true, per_page: 100 } });
    const found = withTrailers.body.find((c: { id: string }) => c.id === security);
    expect(found.trailers).toEqual({ Changelog: 'security', 'Reviewed-by': 'Carol Écrivain <carol@example.org>' });
    expect(found.extended_trailers).toEqual({
      Changelog: ['security'],
      'Reviewed-by': ['Carol Écrivain <carol@example.org>'],
    });
    const initial = withTrailers.body.find((c: { title: string }) => c.title === 'Initial commit');
    expect(initial.trailers).toEqual({});
    const without = plain.body.find((c: { id: string }) => c.id === security);
    expect(without.trailers).toEqual({});
  });

  it('lists nothing for an unknown ref and refuses invalid input with a 400', async () => {
    const unknown = await app.request(url(), { query: { ref_name: 'no-such-branch' } });
    expect(unknown.status).toBe(200);
    expect(unknown.body).toEqual([]);
    expect((await app.request(url(), { query: { ref_name: '--output=/tmp/x' } })).body).toEqual({
      message: 'ref_name is invalid',
    });
    expect((await app.request(url(), { query: { since: 'yesterday' } })).body).toEqual({ error: 'since is invalid' });
    expect((await app.request(url(), { query: { order: 'random' } })).body).toEqual({
      error: 'order does not have a valid value',
    });
    expect((await app.request(url(), { query: { page: 'two' } })).body).toEqual({ error: 'page is invalid' });
  });
});

describe('GET /projects/:id/repository/commits/:sha', () => {
  it('shows every commit with its stats as git show --numstat counts them', async () => {
    for (const sha of await ids('--all')) {
      const res = await app.request(`/projects/${project.id}/repository/commits/${sha}`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        ...(await expectedCommit(sha)),
        stats: await numstat(sha),
        status: null,
        project_id: project.id,
        last_pipeline: null,
      });
      expect(Object.keys(res.body).slice(-4)).toEqual(['stats', 'status', 'project_id', 'last_pipeline']);
    }
  });

  it('resolves branches, tags (peeled), short shas and leaves stats out when asked', async () => {
    const main = (await text('rev-parse', 'main')).trim();
    const show = (ref: string, query = '') =>
      app.request(`/projects/${project.id}/repository/commits/${encodeURIComponent(ref)}${query}`);
    expect((await show('main')).body.id).toBe(main);
    expect((await show(main.slice(0, 8))).body.id).toBe(main);
    expect((await show('v1.0.0')).body.id).toBe((await text('rev-parse', 'v1.0.0^{commit}')).trim());
    expect((await show('feature/merge-me')).body.id).toBe((await text('rev-parse', 'feature/merge-me')).trim());
    const noStats = await show('main', '?stats=false');
    expect('stats' in noStats.body).toBe(false);
    for (const bad of ['no-such-ref', '0'.repeat(40), 'main:README.md', '--output=x', 'main..stable']) {
      expect({ bad, body: (await show(bad)).body }).toEqual({ bad, body: { message: '404 Commit Not Found' } });
    }
  });
});
