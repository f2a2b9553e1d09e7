import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { addMember, makeSampleProject, makeToken, makeUser, ROLES } from '../support/factories.js';

const exec = promisify(execFile);
let app: TestApp;
let owner: User;
let project: Project;
let gitDir: string;

const git = async (...args: string[]) =>
  (
    await exec('git', [`--git-dir=${gitDir}`, ...args], {
      env: gitEnvironment(),
      encoding: 'buffer',
      maxBuffer: 1 << 26,
    })
  ).stdout;

/** What `git ls-tree` says, in GitLab's order (trees, blobs, submodules; git order within). */
async function lsTree(rev: string, path: string, recursive: boolean) {
  const args = ['ls-tree', '-z', ...(recursive ? ['-r', '-t'] : []), path ? `${rev}:${path}` : rev];
  const entries = (await git(...args))
    .toString('utf8')
    .split('\0')
    .filter(Boolean)
    .map((record) => {
      const [meta, rel] = record.split('\t') as [string, string];
      const [mode, type, id] = meta.split(' ') as [string, string, string];
      return { id, name: rel.slice(rel.lastIndexOf('/') + 1), type, path: path ? `${path}/${rel}` : rel, mode };
    });
  const rank: Record<string, number> = { tree: 0, blob: 1, commit: 2 };
  return entries
    .map((e, i) => ({ e, i }))
    .sort((a, b) => (rank[a.e.type] ?? 0) - (rank[b.e.type] ?? 0) || a.i - b.i)
    .map((x) => x.e);
}

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  ({ project, gitDir } = await makeSampleProject(app, owner, { path: 'trees' }));
});
afterAll(async () => {
  await app?.close();
});

describe('GET /projects/:id/repository/tree', () => {
  it('lists every directory of every ref as git ls-tree does', async () => {
    for (const ref of ['main', 'stable', 'v1.0.0', 'feature/merge-me']) {
      const dirs = (await git('ls-tree', '-r', '-d', '-z', '--name-only', ref))
        .toString('utf8')
        .split('\0')
        .filter(Boolean);
      for (const path of ['', ...dirs]) {
        for (const recursive of [false, true]) {
          const res = await app.request(`/projects/${project.id}/repository/tree`, {
            query: {
              ref,
              path,
              recursive,
              pagination: recursive ? 'none' : 'legacy',
              per_page: 100,
            },
          });
          expect(res.status).toBe(200);
          expect({ ref, path, recursive, body: res.body }).toEqual({
            ref,
            path,
            recursive,
            body: await lsTree(ref, path, recursive),
          });
        }
      }
    }
  });

  it('pages with legacy offsets and with keyset tokens to the same listing', async () => {
    const all = await lsTree('main', '', true);
    expect(all.length).toBeGreaterThan(5);
    const legacy: unknown[] = [];
    for (let page = 1; ; page++) {
      const res = await app.request(`/projects/${project.id}/repository/tree`, {
        query: { recursive: true, per_page: 3, page },
      });
      expect(res.headers.get('x-total')).toBe(String(all.length));
      expect(res.headers.get('x-total-pages')).toBe(String(Math.ceil(all.length / 3)));
      legacy.push(...res.body);
      if (res.headers.get('x-next-page') === '') break;
    }
    expect(legacy).toEqual(all);

    const keyset: unknown[] = [];
    let url: string | null = `/projects/${project.id}/repository/tree?recursive=true&pagination=keyset&per_page=4`;
    while (url) {
      const res = await app.request(url);
      expect(res.status).toBe(200);
      keyset.push(...res.body);
      const link = res.headers.get('link');
      url = link
        ? (
            new URL(/<([^>]+)>; rel="next"/.exec(link)?.[1] as string).pathname +
            new URL(/<([^>]+)>/.exec(link)?.[1] as string).search
          ).replace('/api/v4', '')
        : null;
      if (link) expect(res.body).toHaveLength(4);
    }
    expect(keyset).toEqual(all);
  });

  it('answers GitLab’s errors for unknown refs, paths and bad parameters', async () => {
    const tree = (query: Record<string, string | number | boolean>) =>
      app.request(`/projects/${project.id}/repository/tree`, { query });
    expect((await tree({ ref: 'no-such-ref' })).body).toEqual({ message: '404 Tree Not Found' });
    expect((await tree({ ref: '--output=/tmp/depot-pwned' })).body).toEqual({ message: '404 Tree Not Found' });
    expect((await tree({ ref: 'main\nmain' })).status).toBe(404);
    expect((await tree({ path: 'no/such/dir' })).body).toEqual({ message: '404 invalid revision or path Not Found' });
    expect((await tree({ path: '../../etc' })).status).toBe(404);
    expect((await tree({ path: 'README.md' })).body).toEqual([]);
    expect((await tree({ pagination: 'none' })).body).toEqual({
      error: 'pagination cannot be "none" unless "recursive" is true',
    });
    expect((await tree({ pagination: 'sideways' })).body).toEqual({ error: 'pagination does not have a valid value' });
    expect((await tree({ per_page: 100000, recursive: true })).headers.get('x-per-page')).toBe('100');
    expect((await tree({ ref: 'main%00' })).status).toBe(404);
    const nul = await app.request(`/projects/${project.id}/repository/tree?ref=main%00x`);
    expect(nul.status).toBe(400);
  });
});

describe('blobs', () => {
  it('returns every blob of main byte for byte, as JSON and raw', async () => {
    const files = await lsTree('main', '', true);
    for (const file of files.filter((f) => f.type === 'blob')) {
      const bytes = await git('cat-file', 'blob', file.id);
      const json = await app.request(`/projects/${project.id}/repository/blobs/${file.id}`);
      expect(json.body).toEqual({
        size: bytes.length,
        encoding: 'base64',
        content: bytes.toString('base64'),
        sha: file.id,
      });
      const raw = await fetch(new URL(`/api/v4/projects/${project.id}/repository/blobs/${file.id}/raw`, app.baseUrl));
      expect(raw.status).toBe(200);
      expect(Buffer.from(await raw.arrayBuffer()).equals(bytes)).toBe(true);
      expect(raw.headers.get('content-length')).toBe(String(bytes.length));
      expect(raw.headers.get('cache-control')).toBe('max-age=0, private, must-revalidate, no-store, no-cache');
      expect(raw.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  it('serves text as plain text inline and binaries as attachments', async () => {
    const readme = (await git('rev-parse', 'main:README.md')).toString().trim();
    const raw = await fetch(new URL(`/api/v4/projects/${project.id}/repository/blobs/${readme}/raw`, app.baseUrl));
    expect(raw.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(raw.headers.get('content-disposition')).toBe('inline');
    const binary = (await lsTree('main', '', true)).find((f) => f.path.endsWith('.png'));
    if (binary) {
      const png = await fetch(new URL(`/api/v4/projects/${project.id}/repository/blobs/${binary.id}/raw`, app.baseUrl));
      expect(png.headers.get('content-type')).toBe('image/png');
    }
  });

  it('answers 404 Blob Not Found for anything that is not a blob', async () => {
    const main = (await git('rev-parse', 'main')).toString().trim();
    for (const sha of ['main', main, '0'.repeat(40), 'zzz', '--output=x', main.slice(0, 2)]) {
      const res = await app.request(`/projects/${project.id}/repository/blobs/${encodeURIComponent(sha)}`);
      expect({ sha, body: res.body }).toEqual({ sha, body: { message: '404 Blob Not Found' } });
      const raw = await app.request(`/projects/${project.id}/repository/blobs/${encodeURIComponent(sha)}/raw`);
      expect(raw.status).toBe(404);
    }
  });
});

describe('repository access', () => {
  it('reads public repositories anonymously; private ones need reporter, guests get 403', async () => {
    const { project: secret, gitDir: secretDir } = await makeSampleProject(app, owner, {
      path: 'hidden',
      visibility: 'private',
    });
    const blob = (
      await exec('git', [`--git-dir=${secretDir}`, 'rev-parse', 'main:README.md'], { encoding: 'utf8' })
    ).stdout.trim();
    const urls = [
      `/projects/${secret.id}/repository/tree`,
      `/projects/${secret.id}/repository/blobs/${blob}`,
      `/projects/${secret.id}/repository/blobs/${blob}/raw`,
    ];
    const guest = await makeUser(app);
    await addMember(app, { type: 'project', id: secret.id }, guest, ROLES.guest);
    const reporter = await makeUser(app);
    await addMember(app, { type: 'project', id: secret.id }, reporter, ROLES.reporter);
    const tokens = {
      guest: await makeToken(app, guest),
      reporter: await makeToken(app, reporter),
      stranger: await makeToken(app, await makeUser(app)),
    };
    for (const url of urls) {
      expect((await app.request(url)).body).toEqual({ message: '404 Project Not Found' });
      expect((await app.request(url, { token: tokens.stranger })).status).toBe(404);
      expect((await app.request(url, { token: tokens.guest })).body).toEqual({ message: '403 Forbidden' });
      expect((await app.request(url, { token: tokens.reporter })).status).toBe(200);
    }
    expect((await app.request(`/projects/${project.id}/repository/tree`)).status).toBe(200);
  });

  it('works through @gitbeaker/rest', async () => {
    const client = new Gitlab({ host: app.baseUrl, token: await makeToken(app, owner) });
    const entries = await client.Repositories.allRepositoryTrees(project.id, { recursive: true, perPage: 100 });
    expect(entries.map((e) => e.path)).toEqual((await lsTree('main', '', true)).map((e) => e.path));
    const readme = (await git('rev-parse', 'main:README.md')).toString().trim();
    const blob = await client.Repositories.showBlob(project.id, readme);
    expect(Buffer.from(blob.content as string, 'base64')).toEqual(await git('cat-file', 'blob', readme));
  });
});
