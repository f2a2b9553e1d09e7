import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makePersonas, makeSampleProject, makeToken, makeUser } from '../support/factories.js';
import { gitIn } from '../support/git-fixtures.js';

let app: TestApp;
let owner: User;
let project: Project;
let gitDir: string;

const text = async (...args: string[]) => (await gitIn(gitDir, args)).toString('utf8');
const lines = async (...args: string[]) => (await text(...args)).split('\n').filter(Boolean);

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeUser(app);
  ({ project, gitDir } = await makeSampleProject(app, owner, { path: 'read-clients' }));
});
afterAll(async () => {
  await app?.close();
});

describe('@gitbeaker/rest reads commits, branches, tags and files', () => {
  it('gets what native git has', async () => {
    const client = new Gitlab({ host: app.baseUrl, token: await makeToken(app, owner) });

    // Commits.all follows every page (X-Next-Page) with no totals to lean on.
    const commits = await client.Commits.all(project.id, { refName: 'main', perPage: 4 });
    expect(commits.map((c) => c.id)).toEqual(await lines('log', '--format=%H', 'main'));
    const head = (await text('rev-parse', 'main')).trim();
    const shown = await client.Commits.show(project.id, head);
    expect(shown.id).toBe(head);
    expect(shown.stats).toEqual({ additions: 1, deletions: 0, total: 1 });

    const branches = await client.Branches.all(project.id, { perPage: 2 });
    expect(branches.map((b) => b.name)).toEqual(
      await lines('for-each-ref', '--sort=refname', '--format=%(refname:lstrip=2)', 'refs/heads/'),
    );
    const feature = await client.Branches.show(project.id, 'feature/merge-me');
    expect(feature.commit.id).toBe((await text('rev-parse', 'feature/merge-me')).trim());
    expect(feature.merged).toBe(true);

    const tags = await client.Tags.all(project.id, { orderBy: 'version', sort: 'asc' });
    expect(tags.map((t) => t.name)).toEqual(
      await lines('for-each-ref', '--sort=version:refname', '--format=%(refname:lstrip=2)', 'refs/tags/'),
    );
    const tag = await client.Tags.show(project.id, 'v1.0.0');
    expect(tag.target).toBe((await text('rev-parse', 'v1.0.0')).trim());
    expect(tag.message).toBe('Version 1.0.0');

    const file = await client.RepositoryFiles.show(project.id, 'docs/ünïcödé.md', 'main');
    expect(file.file_name).toBe('ünïcödé.md');
    expect(Buffer.from(file.content, 'base64')).toEqual(
      await gitIn(gitDir, ['cat-file', 'blob', 'main:docs/ünïcödé.md']),
    );
    expect(file.last_commit_id).toBe((await text('log', '-1', '--format=%H', 'main', '--', 'docs/ünïcödé.md')).trim());

    const logo = await client.RepositoryFiles.showRaw(project.id, 'assets/logo.png', 'main');
    const bytes = Buffer.from(await (logo as Blob).arrayBuffer());
    expect(bytes.equals(await gitIn(gitDir, ['cat-file', 'blob', 'main:assets/logo.png']))).toBe(true);
  });
});

describe('who may read the repository', () => {
  it('public repositories are readable anonymously; on a private one guests get 403 and strangers 404', async () => {
    const { project: secret } = await makeSampleProject(app, owner, { path: 'read-secret', visibility: 'private' });
    const endpoints = (id: number) => {
      const r = `/projects/${id}/repository`;
      return [
        `${r}/commits`,
        `${r}/commits/main`,
        `${r}/commits/main/diff`,
        `${r}/branches`,
        `${r}/branches/main`,
        `${r}/tags`,
        `${r}/tags/v1.0.0`,
        `${r}/files/README.md?ref=main`,
        `${r}/files/README.md/raw`,
        `${r}/tree`,
        `${r}/compare?from=stable&to=main`,
        `${r}/contributors`,
      ];
    };
    for (const url of endpoints(project.id)) {
      expect({ url, status: (await app.request(url)).status }).toEqual({ url, status: 200 });
    }
    const expected: Record<string, [number, unknown]> = {
      anonymous: [404, { message: '404 Project Not Found' }],
      'non-member': [404, { message: '404 Project Not Found' }],
      guest: [403, { message: '403 Forbidden' }],
      reporter: [200, undefined],
      developer: [200, undefined],
      maintainer: [200, undefined],
      admin: [200, undefined],
    };
    const personas = await makePersonas(app, { type: 'project', id: secret.id });
    for (const persona of personas) {
      const [status, body] = expected[persona.name] as [number, unknown];
      for (const url of endpoints(secret.id)) {
        const res = await app.request(url, { token: persona.token });
        expect({ who: persona.name, url, status: res.status }).toEqual({ who: persona.name, url, status });
        if (body !== undefined) expect(res.body).toEqual(body);
      }
      const head = await app.request(`/projects/${secret.id}/repository/files/README.md?ref=main`, {
        method: 'HEAD',
        token: persona.token,
      });
      expect({ who: persona.name, head: head.status }).toEqual({ who: persona.name, head: status });
    }
  });
});
