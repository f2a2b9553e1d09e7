import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken } from '../support/factories.js';

let app: TestApp;
let admin: InstanceType<typeof Gitlab>;

beforeAll(async () => {
  app = await startTestApp();
  const root = await makeAdmin(app);
  admin = new Gitlab({ host: app.baseUrl, token: await makeToken(app, root, ['api', 'sudo']) });
});
afterAll(async () => {
  await app?.close();
});

describe('a GitLab client library (@gitbeaker/rest) against Depot', () => {
  it('creates a user, a token for them, a group and a project, and reads them back', async () => {
    const user = await admin.Users.create({
      email: 'grace@example.com',
      name: 'Grace Hopper',
      username: 'grace',
      password: 'correct-horse-battery',
      skipConfirmation: true,
    });
    expect(user).toMatchObject({
      username: 'grace',
      name: 'Grace Hopper',
      email: 'grace@example.com',
      is_admin: false,
    });

    const pat = await admin.Users.createPersonalAccessToken(user.id, 'automation', ['api']);
    expect(pat.token).toMatch(/^glpat-/);
    const grace = new Gitlab({ host: app.baseUrl, token: pat.token as string });
    const me = await grace.Users.showCurrentUser();
    expect(me.id).toBe(user.id);

    const group = await grace.Groups.create('Compilers', 'compilers', {
      visibility: 'internal',
      description: 'COBOL and friends',
    });
    expect(group).toMatchObject({
      path: 'compilers',
      name: 'Compilers',
      visibility: 'internal',
      full_path: 'compilers',
    });
    const sub = await grace.Groups.create('Flow', 'flow', { parentId: group.id });
    expect(sub.full_path).toBe('compilers/flow');

    const project = await grace.Projects.create({
      name: 'FLOW-MATIC',
      namespaceId: sub.id,
      description: 'A business language',
      initializeWithReadme: true,
      visibility: 'private',
    });
    expect(project).toMatchObject({
      name: 'FLOW-MATIC',
      // GitLab parameterizes a name into a path only when the name is not a valid path already.
      path: 'FLOW-MATIC',
      path_with_namespace: 'compilers/flow/FLOW-MATIC',
      name_with_namespace: 'Compilers / Flow / FLOW-MATIC',
      visibility: 'private',
      default_branch: 'main',
      empty_repo: false,
    });

    const byId = await grace.Projects.show(project.id);
    const byPath = await grace.Projects.show('compilers/flow/flow-matic');
    expect(byPath.id).toBe(project.id);
    expect(byId.description).toBe('A business language');
    expect(byId.permissions).toEqual({
      project_access: null,
      group_access: { access_level: 50, notification_level: 3 },
    });

    const readGroup = await grace.Groups.show('compilers/flow');
    expect(readGroup.id).toBe(sub.id);
    expect(readGroup.full_name).toBe('Compilers / Flow');

    const updated = await grace.Projects.edit(project.id, { description: 'Renamed', topics: ['history'] });
    expect(updated.description).toBe('Renamed');
    expect(updated.topics).toEqual(['history']);

    const tokens = await grace.PersonalAccessTokens.all();
    expect(tokens.map((t) => t.name)).toContain('automation');
  });

  it('follows pagination links to the end and reads the expanded headers', async () => {
    const owner = await admin.Users.create({
      email: 'pager@example.com',
      name: 'Pager',
      username: 'pager',
      forceRandomPassword: true,
    });
    const pat = await admin.Users.createPersonalAccessToken(owner.id, 'pager', ['api']);
    const client = new Gitlab({ host: app.baseUrl, token: pat.token as string });
    for (let i = 0; i < 5; i++) await client.Projects.create({ name: `paged-${i}` });
    const all = await client.Projects.all({ owned: true, perPage: 2 });
    expect(all.map((p) => p.name).sort()).toEqual(['paged-0', 'paged-1', 'paged-2', 'paged-3', 'paged-4']);
    const { data, paginationInfo } = await client.Projects.all({
      owned: true,
      perPage: 2,
      maxPages: 1,
      showExpanded: true,
    });
    expect(data).toHaveLength(2);
    expect(paginationInfo).toMatchObject({ total: 5, next: 2, current: 1, previous: null, perPage: 2, totalPages: 3 });
    const keyset = await client.Projects.all({
      owned: true,
      perPage: 2,
      pagination: 'keyset',
      orderBy: 'id',
      sort: 'asc',
    });
    expect(keyset.map((p) => p.name)).toEqual(['paged-0', 'paged-1', 'paged-2', 'paged-3', 'paged-4']);
  });

  it('surfaces GitLab error bodies through the client', async () => {
    await expect(admin.Projects.show(987654)).rejects.toMatchObject({
      message: '404 Project Not Found',
      cause: { response: { status: 404 } },
    });
  });

  it('acts as another user through sudo', async () => {
    const target = await admin.Users.create({
      email: 'sudo@example.com',
      name: 'Sudo',
      username: 'sudo-target',
      forceRandomPassword: true,
    });
    const me = await admin.Users.showCurrentUser({ sudo: target.id });
    expect(me.username).toBe('sudo-target');
  });
});
