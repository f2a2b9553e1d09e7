import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project } from '../../src/db/schema.js';
import { startTestApp, type TestApp, type TestResponse } from '../support/app.js';
import {
  addMember,
  makeGroup,
  makePersonas,
  makeProject,
  makeToken,
  makeUser,
  makeUserWithToken,
  type Persona,
} from '../support/factories.js';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ storages: ['second'] });
});
afterAll(async () => {
  await app?.close();
});

// ---------------------------------------------------------------------------------------------
// helpers

let counter = 0;
/** A token unique to this run, used in names so searches find only this test's projects. */
const unique = (prefix: string) => {
  counter += 1;
  return `${prefix}${process.pid.toString(36)}q${counter}`;
};

const enc = (fullPath: string) => encodeURIComponent(fullPath);

/** Runs native git against a bare repository and returns stdout. */
const git = (gitDir: string, ...args: string[]) =>
  execFileSync('git', [`--git-dir=${gitDir}`, ...args], {
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  });

const repoOf = (p: { id: number; repository_storage: string }) =>
  app.deps.storages.repositoryPath(p.repository_storage, p.id);

/** GitLab's hashed layout, computed independently of the storage module. */
function hashedPath(storage: string, id: number): string {
  const h = createHash('sha256').update(String(id)).digest('hex');
  return path.join(app.storageDir, 'repositories', storage, '@hashed', h.slice(0, 2), h.slice(2, 4), `${h}.git`);
}

const ids = (res: TestResponse) => (res.body as { id: number }[]).map((p) => p.id);

async function projectRow(id: number): Promise<Project | undefined> {
  return app.deps.db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirst();
}

/** A user with a token and a personal project, as most tests start. */
async function ownerWithProject(options: Parameters<typeof makeProject>[2] = {}) {
  const owner = await makeUserWithToken(app);
  const project = await makeProject(app, owner.user, options);
  return { ...owner, project };
}

const IDENTITY_KEYS = ['id', 'description', 'name', 'name_with_namespace', 'path', 'path_with_namespace', 'created_at'];

/** BasicProjectDetails' keys in GitLab's order (lib/api/entities/basic_project_details.rb). */
function basicKeys(o: { readCode: boolean; storage?: boolean }): string[] {
  return [
    ...IDENTITY_KEYS,
    ...(o.readCode ? ['default_branch'] : []),
    'tag_list',
    'topics',
    'ssh_url_to_repo',
    'http_url_to_repo',
    'web_url',
    ...(o.readCode ? ['readme_url', 'forks_count'] : []),
    'avatar_url',
    'star_count',
    'last_activity_at',
    'visibility',
    'namespace',
    ...(o.storage ? ['repository_storage'] : []),
  ];
}

const ACCESS_LEVEL_KEYS = [
  'issues',
  'repository',
  'merge_requests',
  'forking',
  'wiki',
  'builds',
  'snippets',
  'pages',
  'analytics',
  'container_registry',
  'security_and_compliance',
  'releases',
  'environments',
  'feature_flags',
  'infrastructure',
  'monitor',
  'model_experiments',
  'model_registry',
].map((f) => `${f}_access_level`);

const ADMIN_PROJECT_KEYS = [
  'ci_default_git_depth',
  'ci_delete_pipelines_in_seconds',
  'ci_forward_deployment_enabled',
  'ci_forward_deployment_rollback_allowed',
  'ci_job_token_scope_enabled',
  'ci_separated_caches',
  'ci_allow_fork_pipelines_to_run_in_parent_project',
  'ci_id_token_sub_claim_components',
  'build_git_strategy',
  'keep_latest_artifact',
  'restrict_user_defined_variables',
  'ci_pipeline_variables_minimum_override_role',
  'runners_token',
  'runner_token_expiration_interval',
  'group_runners_enabled',
  'auto_cancel_pending_pipelines',
  'build_timeout',
  'auto_devops_enabled',
  'auto_devops_deploy_strategy',
  'ci_push_repository_for_job_token_allowed',
];

/** The Project entity's keys in GitLab's order (lib/api/entities/project.rb), plus ProjectWithAccess. */
function projectKeys(o: {
  readCode: boolean;
  storage?: boolean;
  owner: boolean;
  maintainer: boolean;
  importError: boolean;
  issues?: boolean;
  permissions: boolean;
}): string[] {
  return [
    ...basicKeys(o),
    '_links',
    'packages_enabled',
    'empty_repo',
    'archived',
    ...(o.owner ? ['owner'] : []),
    'resolve_outdated_diff_discussions',
    'repository_object_format',
    'issues_enabled',
    'merge_requests_enabled',
    'wiki_enabled',
    'jobs_enabled',
    'snippets_enabled',
    'container_registry_enabled',
    'service_desk_enabled',
    'can_create_merge_request_in',
    ...ACCESS_LEVEL_KEYS,
    'emails_disabled',
    'emails_enabled',
    'shared_runners_enabled',
    'lfs_enabled',
    'creator_id',
    ...(o.maintainer ? ['import_url', 'import_type'] : []),
    'import_status',
    ...(o.maintainer && o.importError ? ['import_error'] : []),
    ...((o.issues ?? true) ? ['open_issues_count'] : []),
    'description_html',
    'updated_at',
    ...(o.maintainer ? ADMIN_PROJECT_KEYS : []),
    ...(o.readCode ? ['ci_config_path'] : []),
    'public_jobs',
    'shared_with_groups',
    'only_allow_merge_if_pipeline_succeeds',
    'allow_merge_on_skipped_pipeline',
    'request_access_enabled',
    'only_allow_merge_if_all_discussions_are_resolved',
    'remove_source_branch_after_merge',
    'printing_merge_request_link_enabled',
    'merge_method',
    'squash_option',
    'enforce_auth_checks_on_uploads',
    'suggestion_commit_message',
    'merge_commit_template',
    'squash_commit_template',
    'issue_branch_template',
    'warn_about_potentially_unwanted_characters',
    'autoclose_referenced_issues',
    'max_artifacts_size',
    ...(o.permissions ? ['permissions'] : []),
  ];
}

const access = (level: number) => ({ access_level: level, notification_level: 3 });

const persona = (personas: Persona[], name: Persona['name']) => {
  const found = personas.find((p) => p.name === name);
  if (!found) throw new Error(`no persona ${name}`);
  return found;
};

/** Creates a project through the API and returns the response. */
function post(token: string | undefined, body: Record<string, unknown> | URLSearchParams) {
  return app.request('/projects', { method: 'POST', token, body });
}

// ---------------------------------------------------------------------------------------------

describe('GET /projects: who sees what', () => {
  it('shows anonymous callers public projects only, as BasicProjectDetails', async () => {
    const tok = unique('anon');
    const { user, project: pub } = await ownerWithProject({
      name: `${tok} pub`,
      path: `${tok}-pub`,
      visibility: 'public',
    });
    await makeProject(app, user, { name: `${tok} int`, path: `${tok}-int`, visibility: 'internal' });
    await makeProject(app, user, { name: `${tok} priv`, path: `${tok}-priv`, visibility: 'private' });

    const res = await app.request('/projects', { query: { search: tok } });
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([pub.id]);
    const [entry] = res.body;
    expect(Object.keys(entry)).toEqual(basicKeys({ readCode: true }));
    expect(entry).toEqual({
      id: pub.id,
      description: null,
      name: `${tok} pub`,
      name_with_namespace: `${user.name} / ${tok} pub`,
      path: `${tok}-pub`,
      path_with_namespace: `${user.username}/${tok}-pub`,
      created_at: pub.created_at.toISOString(),
      default_branch: 'main',
      tag_list: [],
      topics: [],
      ssh_url_to_repo: `git@127.0.0.1:${user.username}/${tok}-pub.git`,
      http_url_to_repo: `${app.baseUrl}/${user.username}/${tok}-pub.git`,
      web_url: `${app.baseUrl}/${user.username}/${tok}-pub`,
      readme_url: null,
      forks_count: 0,
      avatar_url: null,
      star_count: 0,
      last_activity_at: pub.last_activity_at.toISOString(),
      visibility: 'public',
      namespace: {
        id: pub.namespace_id,
        name: user.name,
        path: user.username,
        kind: 'user',
        full_path: user.username,
        parent_id: null,
        avatar_url: null,
        web_url: `${app.baseUrl}/${user.username}`,
      },
    });
  });

  it('shows signed-in users public, internal and member projects, as ProjectWithAccess', async () => {
    const tok = unique('signed');
    const { user: owner, project: pub } = await ownerWithProject({ name: `${tok}a`, visibility: 'public' });
    const internal = await makeProject(app, owner, { name: `${tok}b`, visibility: 'internal' });
    const hidden = await makeProject(app, owner, { name: `${tok}c`, visibility: 'private' });
    const member = await makeProject(app, owner, { name: `${tok}d`, visibility: 'private' });
    const viewer = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: member.id }, viewer.user, 30);

    const res = await app.request('/projects', { token: viewer.token, query: { search: tok } });
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([member.id, internal.id, pub.id]);
    expect(ids(res)).not.toContain(hidden.id);
    const byId = new Map((res.body as { id: number }[]).map((p) => [p.id, p as Record<string, unknown>]));
    expect(byId.get(member.id)?.permissions).toEqual({ project_access: access(30), group_access: null });
    expect(byId.get(pub.id)?.permissions).toEqual({ project_access: null, group_access: null });
    // A developer reads code but does not administer: no import or CI settings in lists.
    expect(Object.keys(byId.get(member.id) ?? {})).toEqual(
      projectKeys({ readCode: true, owner: true, maintainer: false, importError: false, permissions: true }),
    );
  });

  it('keeps internal projects from external users unless they are members', async () => {
    const tok = unique('ext');
    const { user: owner, project: pub } = await ownerWithProject({ name: `${tok}a`, visibility: 'public' });
    const internal = await makeProject(app, owner, { name: `${tok}b`, visibility: 'internal' });
    const internalMember = await makeProject(app, owner, { name: `${tok}c`, visibility: 'internal' });
    const external = await makeUserWithToken(app, { external: true });
    await addMember(app, { type: 'project', id: internalMember.id }, external.user, 20);

    const res = await app.request('/projects', { token: external.token, query: { search: tok } });
    expect(ids(res)).toEqual([internalMember.id, pub.id]);
    expect(ids(res)).not.toContain(internal.id);
    expect((await app.request(`/projects/${internal.id}`, { token: external.token })).status).toBe(404);
    expect((await app.request(`/projects/${internalMember.id}`, { token: external.token })).status).toBe(200);
  });

  it('shows administrators every project, with repository_storage', async () => {
    const tok = unique('adm');
    const { user: owner, project: pub } = await ownerWithProject({ name: `${tok}a`, visibility: 'public' });
    const priv = await makeProject(app, owner, { name: `${tok}b`, visibility: 'private' });
    const admin = await makeUserWithToken(app, { admin: true });

    const res = await app.request('/projects', { token: admin.token, query: { search: tok } });
    expect(ids(res)).toEqual([priv.id, pub.id]);
    for (const entry of res.body) {
      expect(entry.repository_storage).toBe('default');
      expect(entry.permissions).toEqual({ project_access: null, group_access: null });
      expect(Object.keys(entry)).toEqual(
        projectKeys({
          readCode: true,
          storage: true,
          owner: true,
          maintainer: true,
          importError: false,
          permissions: true,
        }),
      );
    }
    // membership=true limits an administrator to their own projects too.
    const mine = await app.request('/projects', { token: admin.token, query: { search: tok, membership: true } });
    expect(mine.body).toEqual([]);
    const normal = await app.request('/projects', {
      token: (await makeUserWithToken(app)).token,
      query: { search: tok },
    });
    expect(normal.body[0]).not.toHaveProperty('repository_storage');
  });

  it('shows group access for projects reached through a group, with the highest level of the path', async () => {
    const tok = unique('grp');
    const owner = await makeUser(app);
    const top = await makeGroup(app, owner);
    const sub = await makeGroup(app, owner, { parent: top });
    const project = await makeProject(app, owner, { namespace: sub, name: tok });
    const viewer = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: top.id }, viewer.user, 20);
    await addMember(app, { type: 'group', id: sub.id }, viewer.user, 40);
    await addMember(app, { type: 'project', id: project.id }, viewer.user, 30);

    const res = await app.request('/projects', { token: viewer.token, query: { search: tok } });
    expect(ids(res)).toEqual([project.id]);
    expect(res.body[0].permissions).toEqual({ project_access: access(30), group_access: access(40) });
    expect(res.body[0].name_with_namespace).toBe(`${top.name} / ${sub.name} / ${tok}`);
    expect(res.body[0]).not.toHaveProperty('owner');
    // The group owner sees the project with group access only: group creators get no project membership.
    const ownerToken = await makeToken(app, owner);
    const asOwner = await app.request('/projects', { token: ownerToken, query: { search: tok } });
    expect(asOwner.body[0].permissions).toEqual({ project_access: null, group_access: access(50) });
  });

  it('shows an administrator their own memberships in permissions', async () => {
    const tok = unique('admmember');
    const { project } = await ownerWithProject({ name: tok });
    const admin = await makeUserWithToken(app, { admin: true });
    await addMember(app, { type: 'project', id: project.id }, admin.user, 40);
    const res = await app.request('/projects', { token: admin.token, query: { search: tok } });
    expect(res.body[0].permissions).toEqual({ project_access: access(40), group_access: null });
  });

  it('lists a private project for each role that may see it, with that role in permissions', async () => {
    const tok = unique('roles');
    const { project } = await ownerWithProject({ name: tok });
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const level: Record<string, number | undefined> = { guest: 10, reporter: 20, developer: 30, maintainer: 40 };
    for (const p of personas) {
      const res = await app.request('/projects', { token: p.token, query: { search: tok } });
      expect(res.status, p.name).toBe(200);
      const sees = p.name !== 'anonymous' && p.name !== 'non-member';
      expect(ids(res), p.name).toEqual(sees ? [project.id] : []);
      if (!sees) continue;
      const l = level[p.name];
      expect(res.body[0].permissions, p.name).toEqual({ project_access: l ? access(l) : null, group_access: null });
      const maintainer = p.name === 'maintainer' || p.name === 'admin';
      expect(Object.keys(res.body[0]), p.name).toEqual(
        projectKeys({
          readCode: p.name !== 'guest',
          storage: p.name === 'admin',
          owner: true,
          maintainer,
          importError: false,
          permissions: true,
        }),
      );
    }
  });

  it('answers simple=true with BasicProjectDetails for signed-in callers', async () => {
    const tok = unique('simple');
    const { token, project } = await ownerWithProject({ name: tok });
    const res = await app.request('/projects', { token, query: { search: tok, simple: true } });
    expect(ids(res)).toEqual([project.id]);
    expect(Object.keys(res.body[0])).toEqual(basicKeys({ readCode: true }));
  });
});

describe('GET /projects: filters', () => {
  it('owned: personal projects and projects the user owns through a group', async () => {
    const tok = unique('owned');
    const a = await makeUserWithToken(app);
    const personal = await makeProject(app, a.user, { name: `${tok}a`, visibility: 'public' });
    const group = await makeGroup(app, a.user);
    const inGroup = await makeProject(app, a.user, { namespace: group, name: `${tok}b` });
    const b = await makeUserWithToken(app);
    const others = await makeProject(app, b.user, { name: `${tok}c`, visibility: 'public' });
    await addMember(app, { type: 'project', id: others.id }, a.user, 40);

    const res = await app.request('/projects', { token: a.token, query: { search: tok, owned: true } });
    expect(ids(res)).toEqual([inGroup.id, personal.id]);
    const all = await app.request('/projects', { token: a.token, query: { search: tok, owned: false } });
    expect(ids(all)).toEqual([others.id, inGroup.id, personal.id]);
    // Nobody signed in owns anything.
    const anonymous = await app.request('/projects', { query: { search: tok, owned: true } });
    expect(anonymous.status).toBe(200);
    expect(anonymous.body).toEqual([]);
  });

  it('membership and min_access_level: only projects the user has access to', async () => {
    const tok = unique('member');
    const owner = await makeUser(app);
    const pub = await makeProject(app, owner, { name: `${tok}a`, visibility: 'public' });
    const asGuest = await makeProject(app, owner, { name: `${tok}b` });
    const asDeveloper = await makeProject(app, owner, { name: `${tok}c` });
    const group = await makeGroup(app, owner);
    const viaGroup = await makeProject(app, owner, { namespace: group, name: `${tok}d` });
    const viewer = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: asGuest.id }, viewer.user, 10);
    await addMember(app, { type: 'project', id: asDeveloper.id }, viewer.user, 30);
    await addMember(app, { type: 'group', id: group.id }, viewer.user, 40);

    const membership = await app.request('/projects', {
      token: viewer.token,
      query: { search: tok, membership: true },
    });
    expect(ids(membership)).toEqual([viaGroup.id, asDeveloper.id, asGuest.id]);
    const dev = await app.request('/projects', { token: viewer.token, query: { search: tok, min_access_level: 30 } });
    expect(ids(dev)).toEqual([viaGroup.id, asDeveloper.id]);
    const maint = await app.request('/projects', { token: viewer.token, query: { search: tok, min_access_level: 40 } });
    expect(ids(maint)).toEqual([viaGroup.id]);
    expect(ids(await app.request('/projects', { token: viewer.token, query: { search: tok } }))).toContain(pub.id);
    const memberQueries: Record<string, boolean | number>[] = [{ membership: true }, { min_access_level: 10 }];
    for (const query of memberQueries) {
      const anonymous = await app.request('/projects', { query: { search: tok, ...query } });
      expect(anonymous.body).toEqual([]);
    }
  });

  it('refuses a min_access_level that is not an access level', async () => {
    const { token } = await makeUserWithToken(app);
    const res = await app.request('/projects', { token, query: { min_access_level: 7 } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'min_access_level does not have a valid value' });
  });

  it('search matches name, path and description case-insensitively; search_namespaces adds the namespace', async () => {
    const tok = unique('srch');
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public', path: `${tok}grp` });
    const byName = await makeProject(app, owner, {
      name: `Alpha ${tok.toUpperCase()}`,
      path: 'p1',
      visibility: 'public',
    });
    const byPath = await makeProject(app, owner, { name: 'Beta', path: `beta-${tok}`, visibility: 'public' });
    const byDescription = await makeProject(app, owner, {
      name: 'Gamma',
      path: `gamma${tok}`.slice(0, 5) + counter,
      description: `about ${tok} things`,
      visibility: 'public',
    });
    const inGroup = await makeProject(app, owner, {
      namespace: group,
      name: 'Delta',
      path: 'delta',
      visibility: 'public',
    });

    const res = await app.request('/projects', { query: { search: tok } });
    expect(ids(res)).toEqual([byDescription.id, byPath.id, byName.id]);
    const withNamespaces = await app.request('/projects', { query: { search: tok, search_namespaces: true } });
    expect(ids(withNamespaces)).toEqual([inGroup.id, byDescription.id, byPath.id, byName.id]);
    // Every word must match; words shorter than three characters only match a whole column.
    const twoWords = await app.request('/projects', { query: { search: `Alpha ${tok}` } });
    expect(ids(twoWords)).toEqual([byName.id]);
    const wrongWord = await app.request('/projects', { query: { search: `Zeta ${tok}` } });
    expect(wrongWord.body).toEqual([]);
    // A search shorter than three characters matches a whole name or path only.
    const short = await makeUserWithToken(app);
    const qx = await makeProject(app, short.user, { name: 'Qx', path: unique('qx') });
    const shortList = async (search: string) =>
      ids(await app.request('/projects', { token: short.token, query: { search, owned: true } }));
    expect(await shortList('qx')).toEqual([qx.id]);
    expect(await shortList('q')).toEqual([]);
    // LIKE wildcards in the search are literal characters.
    expect((await app.request('/projects', { query: { search: `${tok}%` } })).body).toEqual([]);
    expect((await app.request('/projects', { query: { search: '%_%' } })).status).toBe(200);
  });

  it('visibility, archived and topic filters', async () => {
    const tok = unique('filt');
    const { user: owner, token } = await makeUserWithToken(app);
    const pub = await makeProject(app, owner, { name: `${tok}a`, visibility: 'public', topics: ['ruby', 'web'] });
    const internal = await makeProject(app, owner, { name: `${tok}b`, visibility: 'internal', topics: ['ruby'] });
    const priv = await makeProject(app, owner, { name: `${tok}c`, visibility: 'private' });
    await app.deps.db.updateTable('projects').set({ archived: true }).where('id', '=', internal.id).execute();
    const list = async (query: Record<string, string | number | boolean>) =>
      ids(await app.request('/projects', { token, query: { search: tok, ...query } }));

    expect(await list({ visibility: 'internal' })).toEqual([internal.id]);
    expect(await list({ visibility: 'private' })).toEqual([priv.id]);
    expect(await list({ archived: true })).toEqual([internal.id]);
    expect(await list({ archived: false })).toEqual([priv.id, pub.id]);
    expect(await list({ topic: 'ruby' })).toEqual([internal.id, pub.id]);
    expect(await list({ topic: 'ruby,web' })).toEqual([pub.id]);
    expect(await list({ topic: 'none' })).toEqual([]);
    const bad = await app.request('/projects', { token, query: { visibility: 'secret' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'visibility does not have a valid value' });
  });

  it('id_after and id_before bound the ids, and huge or negative bounds do not fail', async () => {
    const tok = unique('idb');
    const { user: owner, token } = await makeUserWithToken(app);
    const [a, b, c] = [
      await makeProject(app, owner, { name: `${tok}a` }),
      await makeProject(app, owner, { name: `${tok}b` }),
      await makeProject(app, owner, { name: `${tok}c` }),
    ] as [Project, Project, Project];
    const list = async (query: Record<string, string | number>) =>
      app.request('/projects', { token, query: { search: tok, ...query } });
    expect(ids(await list({ id_after: a.id }))).toEqual([c.id, b.id]);
    expect(ids(await list({ id_before: c.id }))).toEqual([b.id, a.id]);
    expect(ids(await list({ id_after: a.id, id_before: c.id }))).toEqual([b.id]);
    const bounds: Record<string, string>[] = [
      { id_after: '99999999999' },
      { id_before: '-1' },
      { id_after: '-99999999999' },
    ];
    for (const query of bounds) {
      const res = await list(query);
      expect(res.status).toBe(200);
    }
    expect((await list({ id_after: '99999999999' })).body).toEqual([]);
    expect(ids(await list({ id_before: '99999999999' }))).toEqual([c.id, b.id, a.id]);
    const bad = await list({ id_after: 'abc' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'id_after is invalid' });
  });

  it('repository_storage filters for administrators and is ignored for others', async () => {
    const tok = unique('stor');
    const admin = await makeUserWithToken(app, { admin: true });
    const onDefault = await post(admin.token, { name: `${tok}a`, visibility: 'public' });
    const onSecond = await post(admin.token, { name: `${tok}b`, visibility: 'public', repository_storage: 'second' });
    expect(onSecond.status).toBe(201);
    expect(onSecond.body.repository_storage).toBe('second');
    expect(fs.existsSync(hashedPath('second', onSecond.body.id))).toBe(true);

    const filtered = await app.request('/projects', {
      token: admin.token,
      query: { search: tok, repository_storage: 'second' },
    });
    expect(ids(filtered)).toEqual([onSecond.body.id]);
    const user = await makeUserWithToken(app);
    const ignored = await app.request('/projects', {
      token: user.token,
      query: { search: tok, repository_storage: 'second' },
    });
    expect(ids(ignored)).toEqual([onSecond.body.id, onDefault.body.id]);
  });

  it('starred: nothing is starred for a signed-in user; ignored for anonymous callers', async () => {
    const tok = unique('star');
    const { token, project } = await ownerWithProject({ name: tok, visibility: 'public' });
    expect((await app.request('/projects', { token, query: { search: tok, starred: true } })).body).toEqual([]);
    expect(ids(await app.request('/projects', { query: { search: tok, starred: true } }))).toEqual([project.id]);
  });
});

describe('GET /projects: order and pagination', () => {
  it('orders by id descending by default and by the requested column otherwise', async () => {
    const tok = unique('ord');
    const { user: owner, token } = await makeUserWithToken(app);
    const b = await makeProject(app, owner, { name: `b ${tok}`, path: `${tok}-z` });
    const a = await makeProject(app, owner, { name: `A ${tok}`, path: `${tok}-y` });
    const c = await makeProject(app, owner, { name: `c ${tok}`, path: `${tok}-x` });
    const list = async (query: Record<string, string>) =>
      ids(await app.request('/projects', { token, query: { search: tok, ...query } }));

    expect(await list({})).toEqual([c.id, a.id, b.id]);
    expect(await list({ sort: 'asc' })).toEqual([b.id, a.id, c.id]);
    expect(await list({ order_by: 'id', sort: 'asc' })).toEqual([b.id, a.id, c.id]);
    expect(await list({ order_by: 'created_at', sort: 'desc' })).toEqual([c.id, a.id, b.id]);
    expect(await list({ order_by: 'name', sort: 'asc' })).toEqual([a.id, b.id, c.id]);
    expect(await list({ order_by: 'name', sort: 'desc' })).toEqual([c.id, b.id, a.id]);
    expect(await list({ order_by: 'path', sort: 'asc' })).toEqual([c.id, a.id, b.id]);

    app.clock.advance(60_000);
    const put = await app.request(`/projects/${a.id}`, { method: 'PUT', token, body: { description: 'touched' } });
    expect(put.status).toBe(200);
    expect(await list({ order_by: 'updated_at', sort: 'desc' })).toEqual([a.id, c.id, b.id]);
    expect(await list({ order_by: 'updated_at', sort: 'asc' })).toEqual([b.id, c.id, a.id]);

    await app.deps.db
      .updateTable('projects')
      .set({ last_activity_at: new Date('2020-01-01T00:00:00Z') })
      .where('id', '=', c.id)
      .execute();
    expect(await list({ order_by: 'last_activity_at', sort: 'asc' })).toEqual([c.id, b.id, a.id]);
    // Statistics orders fall back to the default order for non-admins; similarity without a search too.
    expect(await list({ order_by: 'storage_size' })).toEqual([c.id, a.id, b.id]);
    expect(await list({ order_by: 'star_count' })).toEqual([c.id, a.id, b.id]);
    const bad = await app.request('/projects', { token, query: { order_by: 'bogus' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'order_by does not have a valid value' });
  });

  it('sets offset pagination headers and Link', async () => {
    const tok = unique('page');
    const { user: owner } = await makeUserWithToken(app);
    const made: Project[] = [];
    for (let i = 0; i < 5; i++) made.push(await makeProject(app, owner, { name: `${tok}${i}`, visibility: 'public' }));
    const res = await app.request('/projects', { query: { search: tok, per_page: 2, page: 2 } });
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([made[2]?.id, made[1]?.id]);
    expect(res.headers.get('x-page')).toBe('2');
    expect(res.headers.get('x-per-page')).toBe('2');
    expect(res.headers.get('x-next-page')).toBe('3');
    expect(res.headers.get('x-prev-page')).toBe('1');
    expect(res.headers.get('x-total')).toBe('5');
    expect(res.headers.get('x-total-pages')).toBe('3');
    const links = (res.headers.get('link') ?? '').split(', ').map((part) => {
      const m = /^<([^>]+)>; rel="(\w+)"$/.exec(part);
      if (!m) throw new Error(`bad link ${part}`);
      return { url: new URL(m[1] as string), rel: m[2] };
    });
    expect(links.map((l) => l.rel)).toEqual(['prev', 'next', 'first', 'last']);
    expect(links.map((l) => l.url.searchParams.get('page'))).toEqual(['1', '3', '1', '3']);
    for (const { url } of links) {
      expect(`${url.origin}${url.pathname}`).toBe(`${app.baseUrl}/api/v4/projects`);
      expect(url.searchParams.get('per_page')).toBe('2');
      expect(url.searchParams.get('search')).toBe(tok);
    }
    const last = await app.request('/projects', { query: { search: tok, per_page: 2, page: 3 } });
    expect(ids(last)).toEqual([made[0]?.id]);
    expect(last.headers.get('x-next-page')).toBe('');
    const beyond = await app.request('/projects', { query: { search: tok, per_page: 2, page: 9 } });
    expect(beyond.body).toEqual([]);
    expect((await app.request('/projects', { query: { per_page: 0 } })).status).toBe(400);
  });

  it('keyset pagination by id follows Link rel="next" with id_after / id_before', async () => {
    const tok = unique('keys');
    const { user: owner } = await makeUserWithToken(app);
    const made: Project[] = [];
    for (let i = 0; i < 5; i++) made.push(await makeProject(app, owner, { name: `${tok}${i}`, visibility: 'public' }));
    const madeIds = made.map((p) => p.id);

    const seen: number[] = [];
    let target: string | null = `/projects?search=${tok}&pagination=keyset&order_by=id&sort=asc&per_page=2`;
    let pages = 0;
    while (target) {
      const res = await app.request(target);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-total')).toBeNull();
      seen.push(...ids(res));
      const link = res.headers.get('link');
      pages += 1;
      if (!link) break;
      const m = /^<([^>]+)>; rel="next"$/.exec(link);
      expect(m).not.toBeNull();
      const next = new URL((m as RegExpExecArray)[1] as string);
      expect(`${next.origin}${next.pathname}`).toBe(`${app.baseUrl}/api/v4/projects`);
      expect(next.searchParams.get('id_after')).toBe(String(ids(res).at(-1)));
      target = `${next.pathname.replace('/api/v4', '')}${next.search}`;
      if (pages > 5) throw new Error('keyset did not end');
    }
    expect(seen).toEqual(madeIds);
    // Pages of 2, 2, 1 and a last empty one without a link.
    expect(pages).toBe(4);

    const desc = await app.request('/projects', {
      query: { search: tok, pagination: 'keyset', order_by: 'id', sort: 'desc', per_page: 2 },
    });
    expect(ids(desc)).toEqual([madeIds[4], madeIds[3]]);
    const next = new URL(/^<([^>]+)>/.exec(desc.headers.get('link') ?? '')?.[1] ?? '');
    expect(next.searchParams.get('id_before')).toBe(String(madeIds[3]));
    expect(next.searchParams.has('id_after')).toBe(false);
  });

  it('refuses keyset pagination for any order but id', async () => {
    const orders: Record<string, string>[] = [{ order_by: 'name' }, {}, { order_by: 'created_at' }];
    for (const query of orders) {
      const res = await app.request('/projects', { query: { pagination: 'keyset', ...query } });
      expect(res.status).toBe(405);
      expect(res.body).toEqual({ error: 'Keyset pagination is not yet available for this type of request' });
    }
  });
});

describe('GET /projects/:id', () => {
  it('finds a project by id and by URL-encoded full path, case-insensitively', async () => {
    const owner = await makeUser(app);
    const top = await makeGroup(app, owner, { visibility: 'public' });
    const sub = await makeGroup(app, owner, { visibility: 'public', parent: top });
    const project = await makeProject(app, owner, { namespace: sub, visibility: 'public', path: unique('Deep') });
    for (const id of [String(project.id), enc(project.full_path), enc(project.full_path.toUpperCase())]) {
      const res = await app.request(`/projects/${id}`);
      expect(res.status).toBe(200);
      expect(res.body.id).toBe(project.id);
      expect(res.body.path_with_namespace).toBe(`${top.path}/${sub.path}/${project.path}`);
    }
    // An unencoded slash is another route; a bare name without namespace is not a lookup key.
    const slashed = await app.request(`/projects/${project.full_path}`);
    expect(slashed.status).toBe(404);
    expect(slashed.body).toEqual({ error: '404 Not Found' });
    const bare = await app.request(`/projects/${project.path}`);
    expect(bare.status).toBe(404);
    expect(bare.body).toEqual({ message: '404 Project Not Found' });
  });

  it('answers 404 Project Not Found for ids that name nothing', async () => {
    const { token } = await makeUserWithToken(app);
    for (const id of [
      '0',
      '-1',
      '99999999999',
      '2147483647',
      'abc',
      enc('no/such/project'),
      enc('ünï/cödé'),
      '%2F',
      'a'.repeat(300),
    ]) {
      const res = await app.request(`/projects/${id}`, { token });
      expect(res.status, id).toBe(404);
      expect(res.body, id).toEqual({ message: '404 Project Not Found' });
    }
  });

  it('hides a private project from anonymous callers and non-members; members and admins see it', async () => {
    const { user: owner, token: ownerToken, project } = await ownerWithProject({ visibility: 'private' });
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<string, number> = {
      anonymous: 404,
      'non-member': 404,
      guest: 200,
      reporter: 200,
      developer: 200,
      maintainer: 200,
      admin: 200,
    };
    for (const p of personas) {
      const res = await app.request(`/projects/${project.id}`, { token: p.token });
      expect(res.status, p.name).toBe(expected[p.name]);
      if (res.status === 404) expect(res.body).toEqual({ message: '404 Project Not Found' });
    }
    const level: Record<string, number> = { guest: 10, reporter: 20, developer: 30, maintainer: 40 };
    for (const name of ['guest', 'reporter', 'developer', 'maintainer'] as const) {
      const res = await app.request(`/projects/${project.id}`, { token: persona(personas, name).token });
      const maintainer = name === 'maintainer';
      // Guests of a private project may not read its code: no default branch or README.
      const readCode = name !== 'guest';
      expect(Object.keys(res.body), name).toEqual(
        projectKeys({ readCode, owner: true, maintainer, importError: true, permissions: true }),
      );
      expect(res.body.permissions).toEqual({ project_access: access(level[name] as number), group_access: null });
      expect(res.body.owner).toEqual({
        id: owner.id,
        username: owner.username,
        name: owner.name,
        state: 'active',
        locked: false,
        avatar_url: res.body.owner.avatar_url,
        web_url: `${app.baseUrl}/${owner.username}`,
      });
    }
    const asAdmin = await app.request(`/projects/${project.id}`, { token: persona(personas, 'admin').token });
    expect(Object.keys(asAdmin.body)).toEqual(
      projectKeys({
        readCode: true,
        storage: true,
        owner: true,
        maintainer: true,
        importError: true,
        permissions: true,
      }),
    );
    const asOwner = await app.request(`/projects/${project.id}`, { token: ownerToken });
    expect(asOwner.body.permissions).toEqual({ project_access: access(50), group_access: null });
    expect(asOwner.body.import_error).toBeNull();
    expect(asOwner.body.import_url).toBeNull();
  });

  it('shows a private project to members of an ancestor group three levels up', async () => {
    const owner = await makeUser(app);
    const g1 = await makeGroup(app, owner);
    const g2 = await makeGroup(app, owner, { parent: g1 });
    const g3 = await makeGroup(app, owner, { parent: g2 });
    const project = await makeProject(app, owner, { namespace: g3 });
    const viewer = await makeUserWithToken(app);
    const stranger = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: g1.id }, viewer.user, 20);

    const res = await app.request(`/projects/${enc(project.full_path)}`, { token: viewer.token });
    expect(res.status).toBe(200);
    expect(res.body.path_with_namespace).toBe(`${g1.path}/${g2.path}/${g3.path}/${project.path}`);
    expect(res.body.permissions).toEqual({ project_access: null, group_access: access(20) });
    expect(res.body).not.toHaveProperty('owner');
    expect(res.body.namespace).toMatchObject({ id: g3.id, kind: 'group', full_path: g3.full_path, parent_id: g2.id });
    expect(res.body.namespace.web_url).toBe(`${app.baseUrl}/groups/${g3.full_path}`);
    expect((await app.request(`/projects/${project.id}`, { token: stranger.token })).status).toBe(404);
  });

  it('shows anonymous callers a public project as BasicProjectDetails and signed-in users as ProjectWithAccess', async () => {
    const { project } = await ownerWithProject({ visibility: 'public' });
    const anonymous = await app.request(`/projects/${project.id}`);
    expect(Object.keys(anonymous.body)).toEqual(basicKeys({ readCode: true }));
    const { token } = await makeUserWithToken(app);
    const signedIn = await app.request(`/projects/${project.id}`, { token });
    expect(Object.keys(signedIn.body)).toEqual(
      projectKeys({ readCode: true, owner: true, maintainer: false, importError: true, permissions: true }),
    );
    expect(signedIn.body.permissions).toEqual({ project_access: null, group_access: null });
    expect(signedIn.body._links).toEqual({
      self: `${app.baseUrl}/api/v4/projects/${project.id}`,
      issues: `${app.baseUrl}/api/v4/projects/${project.id}/issues`,
      merge_requests: `${app.baseUrl}/api/v4/projects/${project.id}/merge_requests`,
      repo_branches: `${app.baseUrl}/api/v4/projects/${project.id}/repository/branches`,
      labels: `${app.baseUrl}/api/v4/projects/${project.id}/labels`,
      events: `${app.baseUrl}/api/v4/projects/${project.id}/events`,
      members: `${app.baseUrl}/api/v4/projects/${project.id}/members`,
      cluster_agents: `${app.baseUrl}/api/v4/projects/${project.id}/cluster_agents`,
    });
  });

  it('shows readme_url when the default branch has a README, and empty_repo', async () => {
    const { user, token, project: empty } = await ownerWithProject();
    const withReadme = await makeProject(app, user, { initializeWithReadme: true });
    const a = await app.request(`/projects/${empty.id}`, { token });
    expect(a.body.empty_repo).toBe(true);
    expect(a.body.readme_url).toBeNull();
    const b = await app.request(`/projects/${withReadme.id}`, { token });
    expect(b.body.empty_repo).toBe(false);
    expect(b.body.readme_url).toBe(`${app.baseUrl}/${withReadme.full_path}/-/blob/main/README.md`);
  });
});

describe('POST /projects', () => {
  it('needs a signed-in user', async () => {
    const res = await post(undefined, { name: 'nope' });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: '401 Unauthorized' });
  });

  it('creates a personal project from a name: path derived, owner membership, repository on disk, event', async () => {
    const { user, token } = await makeUserWithToken(app);
    const name = `My Project ${unique('n')}`;
    const res = await post(token, { name });
    expect(res.status).toBe(201);
    const derived = name.toLowerCase().replace(/ /g, '-');
    expect(res.body).toMatchObject({
      description: null,
      description_html: '',
      name,
      path: derived,
      path_with_namespace: `${user.username}/${derived}`,
      name_with_namespace: `${user.name} / ${name}`,
      visibility: 'private',
      default_branch: 'main',
      empty_repo: true,
      readme_url: null,
      creator_id: user.id,
      archived: false,
      owner: { id: user.id, username: user.username },
      import_status: 'none',
      import_url: null,
      import_error: null,
    });
    // POST answers the Project entity: no permissions.
    expect(Object.keys(res.body)).toEqual(
      projectKeys({ readCode: true, owner: true, maintainer: true, importError: true, permissions: false }),
    );
    const id = res.body.id as number;
    const repo = hashedPath('default', id);
    expect(repoOf({ id, repository_storage: 'default' })).toBe(repo);
    expect(fs.existsSync(path.join(repo, 'HEAD'))).toBe(true);
    expect(git(repo, 'rev-parse', '--is-bare-repository').trim()).toBe('true');
    expect(git(repo, 'symbolic-ref', 'HEAD').trim()).toBe('refs/heads/main');
    expect(git(repo, 'for-each-ref').trim()).toBe('');

    const member = await app.deps.db
      .selectFrom('members')
      .selectAll()
      .where('source_type', '=', 'project')
      .where('source_id', '=', id)
      .execute();
    expect(member.map((m) => [m.user_id, m.access_level])).toEqual([[user.id, 50]]);
    const events = await app.deps.db.selectFrom('events').selectAll().where('project_id', '=', id).execute();
    expect(events.map((e) => [e.action, e.author_id, e.target_type])).toEqual([['created', user.id, null]]);

    const shown = await app.request(`/projects/${id}`, { token });
    expect(shown.body.permissions).toEqual({ project_access: access(50), group_access: null });
  });

  it('derives the path from the name the way GitLab does', async () => {
    const { token } = await makeUserWithToken(app);
    const cases: [string, string][] = [
      ['Foo.Bar_baz', 'Foo.Bar_baz'],
      ['v1.0 release', 'v1-0-release'],
      ['Café déjà vu', 'cafe-deja-vu'],
      ['Straße Ærø', 'strasse-aero'],
      ['C++ tools', 'c-tools'],
      ['spaced   out  ', 'spaced-out'],
      ['🚀 rocket', 'rocket'],
      ['_under score', '_under-score'],
    ];
    for (const [name, path] of cases) {
      const res = await post(token, { name });
      expect(res.status, name).toBe(201);
      expect(res.body.path, name).toBe(path);
      expect(res.body.name, name).toBe(name);
    }
  });

  it('creates from a path alone, naming the project after it', async () => {
    const { token } = await makeUserWithToken(app);
    const path = unique('only-path');
    const res = await post(token, { path });
    expect(res.status).toBe(201);
    expect(res.body.name).toBe(path);
    expect(res.body.path).toBe(path);
  });

  it('needs a name or a path', async () => {
    const { token } = await makeUserWithToken(app);
    for (const body of [{}, { description: 'x' }]) {
      const res = await post(token, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: 'name, path are missing, at least one parameter must be provided' });
    }
  });

  it('refuses names and paths GitLab refuses', async () => {
    const { token } = await makeUserWithToken(app);
    const name = (n: string) => post(token, { name: n, path: unique('ok') });
    const nameMessage =
      "can contain only letters, digits, emoji, '_', '.', '+', dashes, or spaces. It must start with a letter, digit, emoji, or '_'.";
    const pathMessage =
      "can contain only letters, digits, '_', '-' and '.'. Cannot start with '-', end in '.git' or end in '.atom'";
    expect((await name('-dash')).body).toEqual({ message: { name: [nameMessage] } });
    expect((await name('a/b')).body).toEqual({ message: { name: [nameMessage] } });
    expect((await name('amp & sand')).body).toEqual({ message: { name: [nameMessage] } });
    // GitLab's null-byte middleware refuses the request before any validation.
    expect((await name('nul\u0000byte')).body).toEqual({ message: '400 Bad request' });
    expect((await name('x'.repeat(256))).body).toEqual({
      message: { name: ['is too long (maximum is 255 characters)'] },
    });
    for (const path of ['-lead', 'x.git', 'y.atom', 'a b', 'a/b', '..', 'tree', 'ü']) {
      const res = await post(token, { name: 'fine', path });
      expect(res.status, path).toBe(400);
      expect(res.body, path).toEqual({ message: { path: [pathMessage] } });
    }
    const long = await post(token, { path: 'p'.repeat(300) });
    expect(long.status).toBe(400);
    expect(long.body.message.path).toEqual(['is too long (maximum is 255 characters)']);
    // A name with nothing to make a path of.
    const cyrillic = await post(token, { name: 'Проект' });
    expect(cyrillic.status).toBe(400);
    expect(cyrillic.body).toEqual({ message: { path: ["can't be blank"] } });
    const description = await post(token, { name: unique('d'), description: 'd'.repeat(2001) });
    expect(description.status).toBe(400);
    expect(description.body).toEqual({ message: { description: ['is too long (maximum is 2000 characters)'] } });
    // Unicode names that are valid stay as they are.
    const unicode = await post(token, { name: `Проект ${unique('u')}` });
    expect(unicode.status).toBe(201);
    expect(unicode.body.name).toMatch(/^Проект /);
  });

  it('reports names and paths already taken in the namespace', async () => {
    const { token } = await makeUserWithToken(app);
    const name = `Taken ${unique('t')}`;
    const first = await post(token, { name });
    expect(first.status).toBe(201);
    const both = await post(token, { name });
    expect(both.status).toBe(400);
    expect(both.body).toEqual({
      message: {
        'project_namespace.name': ['has already been taken'],
        name: ['has already been taken'],
        path: ['has already been taken'],
      },
    });
    expect(Object.keys(both.body.message)).toEqual(['project_namespace.name', 'name', 'path']);
    const pathOnly = await post(token, { name: `${name} other`, path: first.body.path.toUpperCase() });
    expect(pathOnly.status).toBe(400);
    expect(pathOnly.body).toEqual({ message: { path: ['has already been taken'] } });
    const nameOnly = await post(token, { name, path: unique('fresh') });
    expect(nameOnly.status).toBe(400);
    expect(nameOnly.body).toEqual({
      message: { 'project_namespace.name': ['has already been taken'], name: ['has already been taken'] },
    });
    // Names compare case-sensitively; another namespace is another space.
    expect((await post(token, { name: name.toUpperCase(), path: unique('case') })).status).toBe(201);
    const other = await makeUserWithToken(app);
    expect((await post(other.token, { name })).status).toBe(201);
  });

  it('a project path may not take the place of a subgroup', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user);
    const sub = await makeGroup(app, user, { parent: group });
    const res = await post(token, { name: 'x', path: sub.path, namespace_id: group.id });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: { path: ['has already been taken'] } });
  });

  it('creates in a group by id or full path for owners, maintainers and developers, not reporters', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const personas = await makePersonas(app, { type: 'group', id: group.id });
    const expected: Record<string, number> = {
      anonymous: 401,
      'non-member': 400,
      guest: 400,
      reporter: 400,
      developer: 201,
      maintainer: 201,
      owner: 201,
      admin: 201,
    };
    for (const p of personas) {
      for (const namespaceId of [String(group.id), group.full_path]) {
        const res = await post(p.token, { name: unique(p.name.replace('-', '')), namespace_id: namespaceId });
        expect(res.status, `${p.name} ${namespaceId}`).toBe(expected[p.name]);
        if (res.status === 400) expect(res.body).toEqual({ message: { namespace: ['is not valid'] } });
        if (res.status === 201) {
          expect(res.body.namespace.id).toBe(group.id);
          expect(res.body).not.toHaveProperty('owner');
          // Only those who administer the new project see its import and CI settings.
          const maintainer = ['maintainer', 'owner', 'admin'].includes(p.name);
          expect(Object.keys(res.body), p.name).toEqual(
            projectKeys({
              readCode: true,
              storage: p.name === 'admin',
              owner: false,
              maintainer,
              importError: true,
              permissions: false,
            }),
          );
          // No project membership: access comes from the group.
          const rows = await app.deps.db
            .selectFrom('members')
            .select('id')
            .where('source_type', '=', 'project')
            .where('source_id', '=', res.body.id)
            .execute();
          expect(rows).toEqual([]);
        }
      }
    }
  });

  it('follows the group project_creation_level', async () => {
    const owner = await makeUser(app);
    const maintainersOnly = await makeGroup(app, owner);
    const nobody = await makeGroup(app, owner);
    await app.deps.db
      .updateTable('namespaces')
      .set({ project_creation_level: 'maintainer' })
      .where('id', '=', maintainersOnly.id)
      .execute();
    await app.deps.db
      .updateTable('namespaces')
      .set({ project_creation_level: 'noone' })
      .where('id', '=', nobody.id)
      .execute();
    const developer = await makeUserWithToken(app);
    const maintainer = await makeUserWithToken(app);
    await addMember(app, { type: 'group', id: maintainersOnly.id }, developer.user, 30);
    await addMember(app, { type: 'group', id: maintainersOnly.id }, maintainer.user, 40);
    expect((await post(developer.token, { name: unique('d'), namespace_id: maintainersOnly.id })).status).toBe(400);
    expect((await post(maintainer.token, { name: unique('m'), namespace_id: maintainersOnly.id })).status).toBe(201);
    const admin = await makeUserWithToken(app, { admin: true });
    const refused = await post(admin.token, { name: unique('a'), namespace_id: nobody.id });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({ message: { namespace: ['is not valid'] } });
  });

  it('refuses namespaces the user may not create in, visible or not', async () => {
    const { token } = await makeUserWithToken(app);
    const other = await makeUser(app);
    const otherNamespace = await app.deps.db
      .selectFrom('namespaces')
      .selectAll()
      .where('owner_id', '=', other.id)
      .executeTakeFirstOrThrow();
    const privateGroup = await makeGroup(app, other);
    const publicGroup = await makeGroup(app, other, { visibility: 'public' });
    for (const namespaceId of [
      otherNamespace.id,
      otherNamespace.full_path,
      privateGroup.id,
      publicGroup.full_path,
      999999999,
      '99999999999',
      -1,
      'no/such/group',
    ]) {
      const res = await post(token, { name: unique('ns'), namespace_id: namespaceId });
      expect(res.status, String(namespaceId)).toBe(400);
      expect(res.body).toEqual({ message: { namespace: ['is not valid'] } });
    }
  });

  it('lets an administrator create in another user’s namespace, owned by that user', async () => {
    const admin = await makeUserWithToken(app, { admin: true });
    const target = await makeUser(app);
    const ns = await app.deps.db
      .selectFrom('namespaces')
      .selectAll()
      .where('owner_id', '=', target.id)
      .executeTakeFirstOrThrow();
    const res = await post(admin.token, { name: unique('forother'), namespace_id: ns.id });
    expect(res.status).toBe(201);
    expect(res.body.owner.id).toBe(target.id);
    expect(res.body.creator_id).toBe(admin.user.id);
    const rows = await app.deps.db
      .selectFrom('members')
      .select(['user_id', 'access_level'])
      .where('source_type', '=', 'project')
      .where('source_id', '=', res.body.id)
      .execute();
    expect(rows).toEqual([{ user_id: target.id, access_level: 50 }]);
  });

  it('lowers a visibility the group does not allow, silently', async () => {
    const { user, token } = await makeUserWithToken(app);
    const privateGroup = await makeGroup(app, user, { visibility: 'private' });
    const internalGroup = await makeGroup(app, user, { visibility: 'internal' });
    const a = await post(token, { name: unique('v'), namespace_id: privateGroup.id, visibility: 'public' });
    expect(a.status).toBe(201);
    expect(a.body.visibility).toBe('private');
    const b = await post(token, { name: unique('v'), namespace_id: internalGroup.id, visibility: 'public' });
    expect(b.body.visibility).toBe('internal');
    const c = await post(token, { name: unique('v'), namespace_id: internalGroup.id, visibility: 'private' });
    expect(c.body.visibility).toBe('private');
    const personal = await post(token, { name: unique('v'), visibility: 'public' });
    expect(personal.body.visibility).toBe('public');
    const bad = await post(token, { name: unique('v'), visibility: 'secret' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'visibility does not have a valid value' });
  });

  it('honours default_branch, and initialize_with_readme commits README.md on it', async () => {
    const { user, token } = await makeUserWithToken(app);
    const name = unique('Readme');
    const res = await post(token, {
      name,
      description: 'A fine project',
      default_branch: 'develop',
      initialize_with_readme: true,
    });
    expect(res.status).toBe(201);
    expect(res.body.default_branch).toBe('develop');
    expect(res.body.empty_repo).toBe(false);
    expect(res.body.readme_url).toBe(`${app.baseUrl}/${user.username}/${res.body.path}/-/blob/develop/README.md`);
    const repo = hashedPath('default', res.body.id);
    expect(git(repo, 'symbolic-ref', 'HEAD').trim()).toBe('refs/heads/develop');
    expect(git(repo, 'log', '--format=%s', 'develop').trim()).toBe('Initial commit');
    expect(git(repo, 'log', '--format=%an <%ae>', 'develop').trim()).toBe(`${user.name} <${user.email}>`);
    expect(git(repo, 'for-each-ref', '--format=%(refname)').trim()).toBe('refs/heads/develop');
    const readme = git(repo, 'show', 'develop:README.md');
    expect(readme.startsWith(`# ${name}\n`)).toBe(true);
    expect(readme).toContain('A fine project');
    expect(git(repo, 'ls-tree', '--name-only', 'develop').trim()).toBe('README.md');
  });

  it('creates an empty repository without initialize_with_readme; an empty default_branch means main', async () => {
    const { token } = await makeUserWithToken(app);
    const res = await post(token, { name: unique('empty'), default_branch: '' });
    expect(res.status).toBe(201);
    expect(res.body.default_branch).toBe('main');
    expect(res.body.empty_repo).toBe(true);
    const repo = hashedPath('default', res.body.id);
    expect(git(repo, 'symbolic-ref', 'HEAD').trim()).toBe('refs/heads/main');
    expect(git(repo, 'rev-list', '--all').trim()).toBe('');
  });

  it('starts on the group default branch when none is asked for', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user);
    const sub = await makeGroup(app, user, { parent: group });
    await app.deps.db.updateTable('namespaces').set({ default_branch: 'trunk' }).where('id', '=', group.id).execute();
    const res = await post(token, { name: unique('gb'), namespace_id: sub.id, initialize_with_readme: true });
    expect(res.status).toBe(201);
    expect(res.body.default_branch).toBe('trunk');
    expect(git(hashedPath('default', res.body.id), 'log', '--format=%s', 'trunk').trim()).toBe('Initial commit');
  });

  it('refuses a default branch git would refuse, creating nothing', async () => {
    const { user, token } = await makeUserWithToken(app);
    for (const branch of ['-x', 'a..b', 'HEAD', 'a b', 'x.lock', 'refs/heads/x', 'bad~1', 'a:b']) {
      const name = unique('badbranch');
      const res = await post(token, { name, default_branch: branch });
      expect(res.status, branch).toBe(400);
      expect(res.body, branch).toEqual({
        message: { base: ['Failed to create repository', 'Failed to create repository'] },
      });
      const rows = await app.deps.db.selectFrom('projects').select('id').where('name', '=', name).execute();
      expect(rows).toEqual([]);
    }
    const listed = await app.request('/projects', { token, query: { owned: true } });
    expect(listed.body.every((p: { owner: { id: number } }) => p.owner.id === user.id)).toBe(true);
  });

  it('sets feature access levels, the deprecated *_enabled flags and settings', async () => {
    const { token } = await makeUserWithToken(app);
    const res = await post(token, {
      name: unique('feat'),
      issues_access_level: 'disabled',
      merge_requests_access_level: 'private',
      pages_access_level: 'public',
      wiki_enabled: false,
      jobs_enabled: false,
      snippets_access_level: 'enabled',
      snippets_enabled: false,
      merge_method: 'ff',
      squash_option: 'always',
      emails_disabled: true,
      public_builds: false,
      only_allow_merge_if_pipeline_succeeds: true,
      ci_config_path: 'ci/main.yml',
      lfs_enabled: false,
      request_access_enabled: false,
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      issues_access_level: 'disabled',
      issues_enabled: false,
      merge_requests_access_level: 'private',
      merge_requests_enabled: true,
      pages_access_level: 'public',
      wiki_access_level: 'disabled',
      wiki_enabled: false,
      builds_access_level: 'disabled',
      jobs_enabled: false,
      // The access level wins over the deprecated flag.
      snippets_access_level: 'enabled',
      snippets_enabled: true,
      merge_method: 'ff',
      squash_option: 'always',
      emails_disabled: true,
      emails_enabled: false,
      public_jobs: false,
      only_allow_merge_if_pipeline_succeeds: true,
      ci_config_path: 'ci/main.yml',
      lfs_enabled: false,
      request_access_enabled: false,
      repository_access_level: 'enabled',
      security_and_compliance_access_level: 'private',
    });
    expect(res.body._links).not.toHaveProperty('issues');
    expect(res.body).not.toHaveProperty('open_issues_count');
    const bad = await post(token, { name: unique('feat'), issues_access_level: 'public' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'issues_access_level does not have a valid value' });
    const badBool = await post(token, { name: unique('feat'), wiki_enabled: 'maybe' });
    expect(badBool.status).toBe(400);
    expect(badBool.body).toEqual({ error: 'wiki_enabled is invalid' });
  });

  it('takes topics or tag_list as arrays or comma lists, sorted and without duplicates', async () => {
    const { token } = await makeUserWithToken(app);
    const a = await post(token, { name: unique('top'), topics: ['web', 'api', 'Web'] });
    expect(a.body.topics).toEqual(['api', 'web']);
    expect(a.body.tag_list).toEqual(['api', 'web']);
    const b = await post(token, new URLSearchParams({ name: unique('top'), tag_list: 'zeta, alpha' }));
    expect(b.status).toBe(201);
    expect(b.body.topics).toEqual(['alpha', 'zeta']);
  });

  it('lets only administrators choose the repository storage', async () => {
    const { token } = await makeUserWithToken(app);
    const res = await post(token, { name: unique('st'), repository_storage: 'second' });
    expect(res.status).toBe(201);
    expect(res.body).not.toHaveProperty('repository_storage');
    const row = await projectRow(res.body.id);
    expect(row?.repository_storage).toBe('default');
    expect(fs.existsSync(hashedPath('default', res.body.id))).toBe(true);
    const admin = await makeUserWithToken(app, { admin: true });
    const unknown = await post(admin.token, { name: unique('st'), repository_storage: 'nowhere' });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ message: { repository_storage: ['is not included in the list'] } });
  });

  it('accepts form bodies and answers 400, never 500, to odd input', async () => {
    const { token } = await makeUserWithToken(app);
    const form = await post(token, new URLSearchParams({ name: unique('form'), visibility: 'internal' }));
    expect(form.status).toBe(201);
    expect(form.body.visibility).toBe('internal');
    const odd: Record<string, unknown>[] = [
      { name: ['a', 'b'] },
      { name: { nested: true } },
      { name: unique('x'), namespace_id: { a: 1 } },
      { name: unique('x'), namespace_id: '' },
      { name: unique('x'), description: 'nul\u0000' },
      { name: unique('x'), topics: [{ a: 1 }] },
      { name: unique('x'), initialize_with_readme: 'perhaps' },
      { path: '' },
      { name: '' },
      { name: '   ' },
    ];
    for (const body of odd) {
      const res = await post(token, body);
      expect(res.status, JSON.stringify(body)).toBeGreaterThanOrEqual(400);
      expect(res.status, JSON.stringify(body)).toBeLessThan(500);
    }
  });
});

function put(id: string | number, token: string | undefined, body: Record<string, unknown>) {
  return app.request(`/projects/${id}`, { method: 'PUT', token, body });
}

describe('PUT /projects/:id', () => {
  it('lets maintainers and up update the description; others get 403, or 404 when they cannot see it', async () => {
    const { token: ownerToken, project } = await ownerWithProject({ visibility: 'private' });
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<string, number> = {
      anonymous: 401,
      'non-member': 404,
      guest: 403,
      reporter: 403,
      developer: 403,
      maintainer: 200,
      admin: 200,
    };
    for (const p of personas) {
      const res = await put(project.id, p.token, { description: `by ${p.name}` });
      expect(res.status, p.name).toBe(expected[p.name]);
      const body =
        res.status === 401
          ? { message: '401 Unauthorized' }
          : res.status === 403
            ? { message: '403 Forbidden' }
            : res.status === 404
              ? { message: '404 Project Not Found' }
              : undefined;
      if (body) expect(res.body, p.name).toEqual(body);
      else expect(res.body.description).toBe(`by ${p.name}`);
    }
    const owner = await put(project.id, ownerToken, { description: 'by owner' });
    expect(owner.status).toBe(200);
    // PUT answers the Project entity (no permissions), with import_error for those who administer it.
    expect(Object.keys(owner.body)).toEqual(
      projectKeys({ readCode: true, owner: true, maintainer: true, importError: true, permissions: false }),
    );
    expect((await projectRow(project.id))?.description).toBe('by owner');
  });

  it('answers 403, not 404, to a non-member of a public project', async () => {
    const { project } = await ownerWithProject({ visibility: 'public' });
    const { token } = await makeUserWithToken(app);
    const res = await put(project.id, token, { description: 'x' });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: '403 Forbidden' });
  });

  it('lets a maintainer rename the project', async () => {
    const { project } = await ownerWithProject();
    const maintainer = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: project.id }, maintainer.user, 40);
    const res = await put(project.id, maintainer.token, { name: 'Renamed Project' });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe('Renamed Project');
    expect(res.body.path).toBe(project.path);
    expect(res.body.name_with_namespace).toMatch(/ \/ Renamed Project$/);
  });

  it('changing visibility needs an owner: maintainers get 403 even for the same value', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner, { visibility: 'public' });
    const project = await makeProject(app, owner, { namespace: group, visibility: 'private' });
    const personas = await makePersonas(app, { type: 'group', id: group.id });
    const expected: Record<string, number> = {
      anonymous: 401,
      'non-member': 404,
      guest: 403,
      reporter: 403,
      developer: 403,
      maintainer: 403,
      owner: 200,
      admin: 200,
    };
    for (const p of personas) {
      const res = await put(project.id, p.token, { visibility: 'private' });
      expect(res.status, p.name).toBe(expected[p.name]);
    }
    const maintainer = persona(personas, 'maintainer');
    const changing = await put(project.id, maintainer.token, { visibility: 'internal' });
    expect(changing.status).toBe(403);
    expect(changing.body).toEqual({ message: '403 Forbidden' });
    expect((await projectRow(project.id))?.visibility).toBe('private');
    const byOwner = await put(project.id, persona(personas, 'owner').token, { visibility: 'public' });
    expect(byOwner.status).toBe(200);
    expect(byOwner.body.visibility).toBe('public');
    const byAdmin = await put(project.id, persona(personas, 'admin').token, { visibility: 'internal' });
    expect(byAdmin.body.visibility).toBe('internal');
    // The owner of a personal project may change it too.
    const personal = await ownerWithProject();
    const mine = await put(personal.project.id, personal.token, { visibility: 'public' });
    expect(mine.status).toBe(200);
    expect(mine.body.visibility).toBe('public');
    // A project owner member (not a group owner) is an owner too.
    const projectOwner = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: project.id }, projectOwner.user, 50);
    expect((await put(project.id, projectOwner.token, { visibility: 'private' })).status).toBe(200);
  });

  it('refuses a visibility above the group', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user, { visibility: 'private' });
    const project = await makeProject(app, user, { namespace: group });
    const res = await put(project.id, token, { visibility: 'public' });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: { visibility_level: ['public is not allowed in a private group.'] } });
    const internal = await makeGroup(app, user, { visibility: 'internal' });
    const p2 = await makeProject(app, user, { namespace: internal });
    const res2 = await put(p2.id, token, { visibility: 'public' });
    expect(res2.body).toEqual({ message: { visibility_level: ['public is not allowed in a internal group.'] } });
    expect((await put(p2.id, token, { visibility: 'internal' })).status).toBe(200);
  });

  it('renames the path: path_with_namespace follows and the new encoded path resolves', async () => {
    const { user, token } = await makeUserWithToken(app);
    const group = await makeGroup(app, user);
    const project = await makeProject(app, user, { namespace: group });
    const newPath = unique('moved');
    const res = await put(enc(project.full_path), token, { path: newPath });
    expect(res.status).toBe(200);
    expect(res.body.path).toBe(newPath);
    expect(res.body.path_with_namespace).toBe(`${group.full_path}/${newPath}`);
    expect(res.body.web_url).toBe(`${app.baseUrl}/${group.full_path}/${newPath}`);
    const found = await app.request(`/projects/${enc(`${group.full_path}/${newPath}`)}`, { token });
    expect(found.status).toBe(200);
    expect(found.body.id).toBe(project.id);
    // The repository does not move: hashed storage names it by id.
    expect(fs.existsSync(hashedPath('default', project.id))).toBe(true);
    // A change of case only is allowed.
    const cased = await put(project.id, token, { path: newPath.toUpperCase() });
    expect(cased.status).toBe(200);
    expect(cased.body.path).toBe(newPath.toUpperCase());
  });

  it('refuses a path or name already taken, and invalid ones', async () => {
    const { user, token } = await makeUserWithToken(app);
    const a = await makeProject(app, user, { name: unique('Aaa') });
    const b = await makeProject(app, user, { name: unique('Bbb') });
    const path = await put(b.id, token, { path: a.path });
    expect(path.status).toBe(400);
    expect(path.body).toEqual({ message: { path: ['has already been taken'] } });
    const name = await put(b.id, token, { name: a.name });
    expect(name.status).toBe(400);
    expect(name.body).toEqual({
      message: { 'project_namespace.name': ['has already been taken'], name: ['has already been taken'] },
    });
    const invalid = await put(b.id, token, { path: '-bad' });
    expect(invalid.status).toBe(400);
    expect(invalid.body.message.path).toHaveLength(1);
    const blank = await put(b.id, token, { name: '' });
    expect(blank.status).toBe(400);
    expect(blank.body).toEqual({ message: { name: ["can't be blank"] } });
    // Its own name and path again are fine.
    expect((await put(b.id, token, { name: b.name, path: b.path })).status).toBe(200);
  });

  it('needs at least one parameter, listing all of GitLab’s', async () => {
    const { token, project } = await ownerWithProject();
    for (const body of [{}, { archived: true }, { unknown: 1 }]) {
      const res = await put(project.id, token, body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(
        /^allow_merge_on_skipped_pipeline, analytics_access_level, autoclose_referenced_issues, .*, snippets_enabled, container_registry_enabled are missing, at least one parameter must be provided$/,
      );
    }
    // A parameter Depot only accepts still satisfies the rule.
    const accepted = await put(project.id, token, { merge_pipelines_enabled: true });
    expect(accepted.status).toBe(200);
  });

  it('changes the default branch only to an existing branch, moving HEAD', async () => {
    const { token, project } = await ownerWithProject({ initializeWithReadme: true });
    const repo = repoOf(project);
    const missing = await put(project.id, token, { default_branch: 'feature' });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ message: { base: ["Could not change HEAD: branch 'feature' does not exist"] } });
    for (const bad of ['-x', 'a..b']) {
      const res = await put(project.id, token, { default_branch: bad });
      expect(res.status, bad).toBe(400);
      expect(res.body).toEqual({ message: { base: [`Could not change HEAD: branch '${bad}' does not exist`] } });
    }
    git(repo, 'branch', 'feature', 'main');
    const res = await put(project.id, token, { default_branch: 'feature' });
    expect(res.status).toBe(200);
    expect(res.body.default_branch).toBe('feature');
    expect(res.body.readme_url).toBe(`${app.baseUrl}/${project.full_path}/-/blob/feature/README.md`);
    expect(git(repo, 'symbolic-ref', 'HEAD').trim()).toBe('refs/heads/feature');
    // The same branch again changes nothing and needs nothing.
    expect((await put(project.id, token, { default_branch: 'feature' })).status).toBe(200);
    // In an empty repository no branch exists yet.
    const empty = await ownerWithProject();
    const none = await put(empty.project.id, empty.token, { default_branch: 'develop' });
    expect(none.status).toBe(400);
    expect(none.body).toEqual({ message: { base: ["Could not change HEAD: branch 'develop' does not exist"] } });
  });

  it('updates topics, features and settings', async () => {
    const { token, project } = await ownerWithProject();
    const res = await put(project.id, token, {
      topics: 'one,two',
      issues_access_level: 'private',
      merge_requests_enabled: false,
      build_timeout: 7200,
      ci_default_git_depth: 5,
      keep_latest_artifact: false,
      auto_devops_deploy_strategy: 'manual',
      resolve_outdated_diff_discussions: true,
      emails_enabled: false,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      topics: ['one', 'two'],
      tag_list: ['one', 'two'],
      issues_access_level: 'private',
      merge_requests_access_level: 'disabled',
      merge_requests_enabled: false,
      build_timeout: 7200,
      ci_default_git_depth: 5,
      keep_latest_artifact: false,
      auto_devops_deploy_strategy: 'manual',
      resolve_outdated_diff_discussions: true,
      emails_enabled: false,
      emails_disabled: true,
    });
    expect(res.body._links).not.toHaveProperty('merge_requests');
    const again = await app.request(`/projects/${project.id}`, { token });
    expect(again.body.build_timeout).toBe(7200);
    const short = await put(project.id, token, { build_timeout: 10 });
    expect(short.status).toBe(400);
    expect(short.body).toEqual({ error: 'build_timeout does not have a valid value' });
  });

  it('ignores repository_storage from non-administrators', async () => {
    const { token, project } = await ownerWithProject();
    const res = await put(project.id, token, { repository_storage: 'second' });
    expect(res.status).toBe(200);
    expect((await projectRow(project.id))?.repository_storage).toBe('default');
  });

  it('answers 404 for projects that do not exist', async () => {
    const { token } = await makeUserWithToken(app);
    for (const id of ['0', '-1', '99999999999', 'nosuch', enc('no/such')]) {
      const res = await put(id, token, { description: 'x' });
      expect(res.status, id).toBe(404);
      expect(res.body).toEqual({ message: '404 Project Not Found' });
    }
  });
});

describe('DELETE /projects/:id', () => {
  it('lets group owners and admins delete; maintainers and below get 403', async () => {
    const owner = await makeUser(app);
    const group = await makeGroup(app, owner);
    const personas = await makePersonas(app, { type: 'group', id: group.id });
    const expected: Record<string, number> = {
      anonymous: 401,
      'non-member': 404,
      guest: 403,
      reporter: 403,
      developer: 403,
      maintainer: 403,
      owner: 202,
      admin: 202,
    };
    for (const p of personas) {
      const project = await makeProject(app, owner, { namespace: group });
      const repo = hashedPath('default', project.id);
      expect(fs.existsSync(repo)).toBe(true);
      const res = await app.request(`/projects/${project.id}`, { method: 'DELETE', token: p.token });
      expect(res.status, p.name).toBe(expected[p.name]);
      if (res.status === 202) {
        expect(res.body).toEqual({ message: '202 Accepted' });
        expect(fs.existsSync(repo)).toBe(false);
        expect(await projectRow(project.id)).toBeUndefined();
        const after = await app.request(`/projects/${project.id}`, { token: p.token });
        expect(after.status).toBe(404);
        expect(after.body).toEqual({ message: '404 Project Not Found' });
      } else {
        expect(fs.existsSync(repo)).toBe(true);
        expect(await projectRow(project.id)).toBeDefined();
      }
    }
  });

  it('lets the owner of a personal project delete it by full path; its members lose it too', async () => {
    const { token, project } = await ownerWithProject({ initializeWithReadme: true });
    const maintainer = await makeUserWithToken(app);
    await addMember(app, { type: 'project', id: project.id }, maintainer.user, 40);
    const denied = await app.request(`/projects/${project.id}`, { method: 'DELETE', token: maintainer.token });
    expect(denied.status).toBe(403);
    expect(denied.body).toEqual({ message: '403 Forbidden' });
    const res = await app.request(`/projects/${enc(project.full_path)}`, { method: 'DELETE', token });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ message: '202 Accepted' });
    expect(fs.existsSync(repoOf(project))).toBe(false);
    const members = await app.deps.db
      .selectFrom('members')
      .select('id')
      .where('source_type', '=', 'project')
      .where('source_id', '=', project.id)
      .execute();
    expect(members).toEqual([]);
    expect((await app.request(`/projects/${project.id}`, { method: 'DELETE', token })).status).toBe(404);
    expect((await app.request(`/projects/${project.id}`, { token: maintainer.token })).status).toBe(404);
    // The path is free again.
    expect((await post(token, { path: project.path })).status).toBe(201);
  });

  it('answers 404 for a project the caller cannot see or that does not exist', async () => {
    const { project } = await ownerWithProject({ visibility: 'private' });
    const { token } = await makeUserWithToken(app);
    for (const id of [String(project.id), '99999999999', '-1', 'abc']) {
      const res = await app.request(`/projects/${id}`, { method: 'DELETE', token });
      expect(res.status, id).toBe(404);
      expect(res.body).toEqual({ message: '404 Project Not Found' });
    }
    expect(await projectRow(project.id)).toBeDefined();
  });
});

describe('odd input never fails with 500', () => {
  it('GET /projects with strange parameters', async () => {
    const { token } = await makeUserWithToken(app);
    const queries: Record<string, string>[] = [
      { search: 'x'.repeat(5000) },
      { search: '"quoted phrase" and more' },
      { search: '\\' },
      { search: '日本語 テスト' },
      { topic: ',,,' },
      { page: '99999999999' },
      { per_page: '99999999999' },
      { page: '-1' },
      { last_activity_after: 'not a date' },
      { last_activity_after: '2020-01-01T00:00:00Z' },
      { order_by: 'similarity', search: 'abc' },
      { order_by: 'similarity' },
      { min_access_level: '99999999999' },
      { id_after: '1e3' },
      { sort: 'sideways' },
      { pagination: 'keyset', order_by: 'id', id_after: '99999999999' },
    ];
    for (const query of queries) {
      for (const t of [undefined, token]) {
        const res = await app.request('/projects', { token: t, query });
        expect(res.status, JSON.stringify(query)).toBeLessThan(500);
      }
    }
  });

  it('similarity order lists the caller’s own projects, exact names first', async () => {
    const tok = unique('sim');
    const { user, token } = await makeUserWithToken(app);
    const other = await makeUser(app);
    const prefix = await makeProject(app, user, { name: `${tok} extra`, path: unique('s') });
    const exact = await makeProject(app, user, { name: tok, path: unique('s') });
    await makeProject(app, other, { name: `${tok} public`, visibility: 'public' });
    const res = await app.request('/projects', { token, query: { search: tok, order_by: 'similarity' } });
    expect(ids(res)).toEqual([exact.id, prefix.id]);
  });
});
