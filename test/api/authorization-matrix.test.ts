import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_MODULES, API_PREFIX } from '../../src/app.js';
import type { Namespace, Project, User, Visibility } from '../../src/db/schema.js';
import { ApiRouter, type Operation } from '../../src/http/route.js';
import { INTEGRATION_KINDS, type IntegrationKind } from '../../src/services/integration-catalog.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { registerRunner, registrationToken, requestJob } from '../support/ci.js';
import {
  addMember,
  makeGroup,
  makeProject,
  makeSampleProject,
  makeToken,
  makeUser,
  ROLES,
} from '../support/factories.js';

/**
 * The authorization matrix (issue 23): every route of the route table (the source of the OpenAPI
 * document, so a new route cannot be missed) is called by every persona on a public, an internal
 * and a private project or group, and the status must be the one GitLab's policies give. The
 * expected answers are the RULES table below, one compact rule per route expanded by `expected`;
 * a route missing from the table fails the test.
 *
 * What each persona is:
 * - anonymous: no credentials; blocked: a Maintainer whose account is blocked;
 * - non-member: a signed-in user with no membership;
 * - guest … owner: a member of the subject's group with that role (projects inherit it);
 * - admin: an administrator (admin mode off, the default);
 * - read_api, read_user, read_repository: a Maintainer's token with only that scope.
 */

const PERSONAS = [
  'anonymous',
  'blocked',
  'non-member',
  'guest',
  'reporter',
  'developer',
  'maintainer',
  'owner',
  'admin',
  'read_api',
  'read_user',
  'read_repository',
] as const;
type PersonaName = (typeof PERSONAS)[number];
type RoleName = 'guest' | 'reporter' | 'developer' | 'maintainer' | 'owner';

/**
 * Who may call a route, above the subject's visibility:
 * - `any`: whoever can see the subject (anonymous callers included where the route allows them);
 * - `signed`: any signed-in user who can see the subject;
 * - `code`: who may read the repository: anyone who sees a public or internal project, Reporters
 *   and above on a private one (GitLab's download_code; guests are excluded on private projects);
 * - a role: members with at least that role, and administrators;
 * - `admin`: administrators only, checked before anything else (403 for every other user).
 * - `token`: authenticated by a token of its own (runner, job, client key), never by the user: every persona,
 *   blocked users and narrow scopes included, gets the same answer (`allowed`), as GitLab's
 *   lib/api/ci/runner.rb never loads the current user.
 */
type Min = 'any' | 'signed' | 'code' | RoleName | 'admin' | 'token';

type Values = Record<string, string>;

interface Rule {
  /** What `:id` names and whose visibility matters; `none` runs once (instance and user routes). */
  on: 'project' | 'group' | 'none';
  min: Min;
  /** Scopes this route accepts besides api and read_api (GET) — GitLab's allow_access_with_scope. */
  scopes?: ('read_user' | 'read_repository' | 'any')[];
  /** Path values made fresh for each request (a target that a successful call consumes). */
  fresh?: (w: World, visibility: Visibility) => Promise<Values>;
  body?: (n: number, fresh: Values) => Record<string, unknown>;
  query?: Record<string, string | string[]>;
  /**
   * Per-persona answers that differ from what `min` gives (each a GitLab fact, commented), for
   * personas whose credentials were accepted.
   */
  override?: Partial<Record<PersonaName, number | 'ok'>>;
  /** A raw body of another type (the error tracking collector's envelopes). */
  raw?: () => { body: string; type: string };
  /** What allowed callers get when it is not a 2xx (a check after authorization that the data fails). */
  allowed?: number;
  /** The visibilities to check (all three unless said). */
  visibilities?: Visibility[];
  /** The route first reads the subject's code (merge requests): 403 for those who may not. */
  needsCode?: boolean;
  /** The status denied members get: 403 unless the route hides what they may not use (404). */
  denied?: number;
  /** The persona mints a fresh token of its own for each request (routes that revoke the caller's token). */
  ownToken?: boolean;
  /**
   * GitLab's `before { authenticate! }` ahead of the subject: anonymous callers get 401 on
   * public subjects too.
   */
  signIn?: boolean;
  /**
   * For `on: 'none'` routes whose target belongs to the world's projects (runners): the persona's
   * role there decides, though no subject is hidden.
   */
  roleOn?: 'project';
  /** Path values for every persona (fixtures of the subject's visibility), below `fresh`. */
  values?: (w: World, visibility: Visibility) => Values;
  /**
   * The role check is a Grape `before` block, made before the parameters are validated: a
   * Developer with broken parameters still gets 403 (checked after the matrix).
   */
  beforeParams?: boolean;
}

interface Persona {
  name: PersonaName;
  user: User | null;
  scopes: string[];
  token: string | undefined;
  /** The access level the persona's user has on every subject (0 when none). */
  level: number;
}

interface World {
  admin: User;
  adminToken: string;
  personas: Persona[];
  groups: Record<Visibility, Namespace>;
  projects: Record<Visibility, Project>;
  /** A plain user to be the target of user routes. */
  target: User;
  values: Values;
  counter: () => number;
}

const VISIBILITIES: Visibility[] = ['public', 'internal', 'private'];
const ROLE_LEVEL: Record<RoleName, number> = ROLES;

let app: TestApp;
let world: World;

async function adminRequest(path: string, method: string, body?: unknown) {
  const res = await app.request(path, { method, token: world.adminToken, body });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.body;
}

const n = () => world.counter();

/** A fresh branch of the project of `visibility`. */
async function freshBranch(w: World, v: Visibility): Promise<Values> {
  const name = `fresh-${n()}`;
  await adminRequest(`/projects/${w.projects[v].id}/repository/branches`, 'POST', { branch: name, ref: 'main' });
  return { branch: name };
}

async function freshTag(w: World, v: Visibility): Promise<Values> {
  const name = `fresh-${n()}`;
  await adminRequest(`/projects/${w.projects[v].id}/repository/tags`, 'POST', { tag_name: name, ref: 'main' });
  return { tag_name: name };
}

async function freshFile(w: World, v: Visibility): Promise<Values> {
  const path = `fresh/file-${n()}.txt`;
  await adminRequest(`/projects/${w.projects[v].id}/repository/files/${encodeURIComponent(path)}`, 'POST', {
    branch: 'matrix',
    content: 'x',
    commit_message: 'fresh file',
  });
  return { file_path: path };
}

/** A fresh group of `visibility` with every persona a member at its level. */
async function freshGroup(w: World, v: Visibility): Promise<Namespace> {
  const group = await makeGroup(app, w.admin, { visibility: v });
  for (const persona of w.personas) {
    if (persona.user && persona.level > 0) {
      await addMember(app, { type: 'group', id: group.id }, persona.user, persona.level);
    }
  }
  return group;
}

/** A fresh guest member of the subject (group of the visibility, or its project). */
async function freshMember(w: World, v: Visibility, type: 'project' | 'group'): Promise<Values> {
  const user = await quickUser();
  const id = type === 'project' ? w.projects[v].id : w.groups[v].id;
  await addMember(app, { type, id }, user, ROLES.guest);
  return { user_id: String(user.id) };
}

/** A fresh user who requested access to the subject. */
async function freshRequester(w: World, v: Visibility, type: 'project' | 'group', existing?: User): Promise<Values> {
  const user = existing ?? (await quickUser());
  const now = app.deps.clock.now();
  await app.deps.db
    .insertInto('members')
    .values({
      source_type: type,
      source_id: type === 'project' ? w.projects[v].id : w.groups[v].id,
      user_id: user.id,
      access_level: ROLES.developer,
      expires_at: null,
      created_by_id: null,
      requested_at: now,
      invite_source: null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  return { user_id: String(user.id) };
}

/** A user without a password (scrypt is slow on purpose). */
const quickUser = () => makeUser(app, { randomPassword: false });

async function freshUser(state?: 'blocked_pending_approval'): Promise<Values> {
  return { id: String((await makeUser(app, { randomPassword: false, state })).id) };
}

const ADMIN_404 = { admin: 404 };
/**
 * Administrator routes whose check GitLab makes inside the endpoint (users.rb `post` and
 * `get ':user_id/memberships'` call authenticated_as_admin! first thing), after Grape has
 * validated the parameters: a non-administrator's bad parameters answer 400 there, as here.
 */
const ADMIN_IN_ENDPOINT = new Set(['post /users', 'get /users/:user_id/memberships']);
const MEMBERS_403 = { guest: 403, reporter: 403, developer: 403, maintainer: 403, owner: 403, admin: 403 };
const BULK_MOVE = { source_storage_name: 'default', destination_storage_name: 'second' };

/** Every signed-in persona but the token's owner (the Maintainer) and administrators gets `status`. */
function notOwner(status: number): Partial<Record<PersonaName, number>> {
  return { 'non-member': status, guest: status, reporter: status, developer: status, owner: status, read_api: status };
}

const SENTRY_EVENT = {
  event_id: 'b'.repeat(32),
  platform: 'node',
  timestamp: 1764147600.5,
  exception: { values: [{ type: 'TypeError', value: 'x is not a function' }] },
};

/** A group shared with the subject (`base` is its API path), by an administrator. */
async function freshShare(w: World, base: string): Promise<Values> {
  const group = await makeGroup(app, w.admin, { visibility: 'public' });
  await adminRequest(`${base}/share`, 'POST', { group_id: group.id, group_access: ROLES.developer });
  return { group_id: String(group.id) };
}

/** A commit adding a file on `branch` (made from main when missing); its sha. */
async function freshCommit(w: World, v: Visibility, branch: string): Promise<string> {
  const project = w.projects[v].id;
  if (branch !== 'matrix') {
    await adminRequest(`/projects/${project}/repository/branches`, 'POST', { branch, ref: 'main' });
  }
  const commit = await adminRequest(`/projects/${project}/repository/commits`, 'POST', {
    branch,
    commit_message: 'fresh commit',
    actions: [{ action: 'create', file_path: `fresh/${n()}.txt`, content: 'x' }],
  });
  return commit.id;
}

/** A branch from main with one commit of its own; its name. */
async function freshBranchWithCommit(w: World, v: Visibility): Promise<string> {
  const branch = `mr-${n()}`;
  await freshCommit(w, v, branch);
  return branch;
}

/** A merge request of the MR author from a fresh branch into `matrix`; its iid. */
async function freshMergeRequest(w: World, v: Visibility): Promise<string> {
  const source = await freshBranchWithCommit(w, v);
  const res = await app.request(`/projects/${w.projects[v].id}/merge_requests`, {
    method: 'POST',
    token: w.values.author_token,
    body: { source_branch: source, target_branch: 'matrix', title: `fresh ${source}` },
  });
  if (res.status !== 201) throw new Error(`merge request: ${res.status} ${res.text}`);
  return String(res.body.iid);
}

/** A fresh environment of the project, made by an administrator; its id. */
async function freshEnvironment(w: World, v: Visibility): Promise<string> {
  const env = await adminRequest(`/projects/${w.projects[v].id}/environments`, 'POST', { name: `fresh-env-${n()}` });
  return String(env.id);
}

/**
 * A runner registered to the sibling (`home`) project of `visibility`, which the groups'
 * Maintainers own and which no other project uses yet; its id.
 */
async function freshRunner(w: World, v: Visibility): Promise<string> {
  const project = w.values[`home:${v}`] as string;
  const key = `registration:${project}`;
  w.values[key] ??= await registrationToken(app, w.adminToken, `/projects/${project}`);
  return String((await registerRunner(app, w.values[key] as string)).id);
}

/** A pipeline of the `matrix` branch made by an administrator; the id of its job `name`. */
async function freshJob(w: World, v: Visibility, name: 'a' | 'm'): Promise<string> {
  const project = w.projects[v].id;
  const pipeline = await adminRequest(`/projects/${project}/pipeline`, 'POST', { ref: 'matrix' });
  const jobs = await adminRequest(`/projects/${project}/pipelines/${pipeline.id}/jobs`, 'GET');
  return String(jobs.find((job: { name: string }) => job.name === name).id);
}

/** A deployment made through the API to environment `environment`; its id. */
async function freshDeployment(w: World, v: Visibility, environment: string, status: string): Promise<string> {
  const deployment = await adminRequest(`/projects/${w.projects[v].id}/deployments`, 'POST', {
    environment,
    sha: w.values.commit,
    ref: 'main',
    tag: false,
    status,
  });
  return String(deployment.id);
}

/** A body an integration of `kind` accepts: its required settings, each of a valid value. */
function integrationBody(kind: IntegrationKind): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const field of kind.fields) {
    if (!field.required) continue;
    if (field.values) body[field.name] = field.values[0];
    else if (field.type === 'boolean') body[field.name] = true;
    else if (field.type === 'integer') body[field.name] = 1;
    else if (field.emails) body[field.name] = 'matrix@example.com';
    else if (field.url || field.target) body[field.name] = 'https://93.184.215.14/matrix';
    else body[field.name] = 'matrix';
  }
  return body;
}

/** The date `days` ago by the app's clock. */
const daysAgo = (days: number) => new Date(app.deps.clock.now().getTime() - days * 24 * 60 * 60 * 1000).toISOString();

/** The public project with its client key, for the error tracking collector. */
function collector(w: World): Values {
  return { id: String(w.projects.public.id) };
}

/** The routes and who may call them (GitLab's policies; lib/api/*.rb before blocks). */
const RULES: Record<string, Rule> = {
  // Instance and users (lib/api/version.rb, metadata.rb, users.rb, user.rb).
  'get /version': { on: 'none', min: 'signed', scopes: ['read_user'] },
  'get /metadata': { on: 'none', min: 'signed', scopes: ['read_user'] },
  'get /user': { on: 'none', min: 'signed', scopes: ['read_user'] },
  // Anonymous callers must name a username (users.rb: read_users_list && username), and may not
  // read a user by id (forbidden! 'Not authorized!' unless current_user).
  'get /users': { on: 'none', min: 'any', scopes: ['read_user'], override: { anonymous: 403 } },
  'get /users/:id': { on: 'none', min: 'any', scopes: ['read_user'], override: { anonymous: 403 } },
  'post /users': {
    on: 'none',
    min: 'admin',
    body: (i) => ({
      email: `new${i}@example.com`,
      name: `New ${i}`,
      username: `new-${i}`,
      password: 'Long-pass-12345',
    }),
  },
  'put /users/:id': { on: 'none', min: 'admin', body: () => ({ bio: 'changed' }) },
  'post /users/:user_id/personal_access_tokens': {
    on: 'none',
    min: 'admin',
    body: () => ({ name: 'made by admin', scopes: ['read_api'] }),
  },
  'delete /users/:id': { on: 'none', min: 'admin', fresh: () => freshUser() },
  'post /users/:id/block': { on: 'none', min: 'admin', fresh: () => freshUser() },
  'post /users/:id/unblock': { on: 'none', min: 'admin', fresh: () => freshUser() },
  'post /users/:id/deactivate': { on: 'none', min: 'admin', fresh: () => freshUser() },
  'post /users/:id/activate': { on: 'none', min: 'admin', fresh: () => freshUser() },
  'post /users/:id/ban': { on: 'none', min: 'admin', fresh: () => freshUser() },
  'post /users/:id/unban': {
    on: 'none',
    min: 'admin',
    fresh: async () => {
      const user = await freshUser();
      await adminRequest(`/users/${user.id}/ban`, 'POST');
      return user;
    },
  },
  'post /users/:id/approve': { on: 'none', min: 'admin', fresh: () => freshUser('blocked_pending_approval') },
  'post /users/:id/reject': { on: 'none', min: 'admin', fresh: () => freshUser('blocked_pending_approval') },
  // Served by projects.rb, which allows no read_user.
  'get /users/:user_id/projects': { on: 'none', min: 'any' },
  'get /users/:user_id/memberships': { on: 'none', min: 'admin' },
  'get /users/:user_id/impersonation_tokens': { on: 'none', min: 'admin' },
  'post /users/:user_id/impersonation_tokens': {
    on: 'none',
    min: 'admin',
    body: () => ({ name: 'imp', scopes: ['api'] }),
  },
  'get /users/:user_id/impersonation_tokens/:impersonation_token_id': { on: 'none', min: 'admin' },
  'delete /users/:user_id/impersonation_tokens/:impersonation_token_id': {
    on: 'none',
    min: 'admin',
    fresh: async (w) => {
      const token = await adminRequest(`/users/${w.target.id}/impersonation_tokens`, 'POST', {
        name: 'gone',
        scopes: ['api'],
      });
      return { impersonation_token_id: String(token.id) };
    },
  },
  // Personal access tokens (lib/api/personal_access_tokens.rb): a user's own tokens; any scope
  // may read and revoke the token it is (self).
  'get /personal_access_tokens': { on: 'none', min: 'signed' },
  'get /personal_access_tokens/self': { on: 'none', min: 'signed', scopes: ['any'] },
  'delete /personal_access_tokens/self': { on: 'none', min: 'signed', scopes: ['any'], ownToken: true },
  // The target is the Maintainer persona's token: only its owner and administrators may read or
  // revoke it; others get 401 (unauthorized! unless allowed) and 400 (the revoke service fails).
  'get /personal_access_tokens/:id': { on: 'none', min: 'signed', override: notOwner(401) },
  'delete /personal_access_tokens/:id': {
    on: 'none',
    min: 'signed',
    override: notOwner(400),
    fresh: async (w) => {
      const maintainer = w.personas.find((p) => p.name === 'maintainer') as Persona;
      await makeToken(app, maintainer.user as User, ['api'], { name: `gone${n()}` });
      const list = await app.request('/personal_access_tokens', {
        token: w.adminToken,
        query: { user_id: String(maintainer.user?.id), search: 'gone' },
      });
      return { id: String(list.body[0].id) };
    },
  },
  // Namespaces (lib/api/namespaces.rb).
  'get /namespaces': { on: 'none', min: 'signed' },
  // read_namespace_via_membership: members (Guest and up) only, a public group is not enough.
  'get /namespaces/:id': { on: 'group', min: 'guest', denied: 404 },
  'get /namespaces/:id/exists': { on: 'none', min: 'signed' },
  // Groups (lib/api/groups.rb; GroupPolicy).
  'get /groups': { on: 'none', min: 'any' },
  'get /groups/:id': { on: 'group', min: 'any' },
  'post /groups': { on: 'none', min: 'signed', body: (i) => ({ name: `g${i}`, path: `matrix-g${i}` }) },
  'put /groups/:id': { on: 'group', min: 'owner', body: () => ({ description: 'changed' }) },
  'delete /groups/:id': {
    on: 'group',
    min: 'owner',
    fresh: async (w, v) => ({ id: String((await freshGroup(w, v)).id) }),
  },
  'get /groups/:id/subgroups': { on: 'group', min: 'any' },
  'get /groups/:id/descendant_groups': { on: 'group', min: 'any' },
  'get /groups/:id/projects': { on: 'group', min: 'any' },
  // Projects (lib/api/projects.rb; ProjectPolicy).
  'get /projects': { on: 'none', min: 'any' },
  'get /projects/:id': { on: 'project', min: 'any' },
  'post /projects': { on: 'none', min: 'signed', body: (i) => ({ name: `p${i}`, path: `matrix-p${i}` }) },
  'put /projects/:id': { on: 'project', min: 'maintainer', body: () => ({ description: 'changed' }) },
  'delete /projects/:id': {
    on: 'project',
    min: 'owner',
    fresh: async (w, v) => ({
      id: String((await makeProject(app, w.admin, { namespace: w.groups[v], visibility: v })).id),
    }),
  },
  // Repository reads (lib/api/repositories.rb, files.rb, branches.rb, tags.rb, commits.rb:
  // authorize_read_code! / download_code).
  'get /projects/:id/repository/tree': { on: 'project', min: 'code' },
  'get /projects/:id/repository/blobs/:sha': { on: 'project', min: 'code' },
  'get /projects/:id/repository/blobs/:sha/raw': { on: 'project', min: 'code' },
  'get /projects/:id/repository/archive': { on: 'project', min: 'code' },
  'get /projects/:id/repository/archive.:format': { on: 'project', min: 'code' },
  'get /projects/:id/repository/compare': { on: 'project', min: 'code', query: { from: 'v1.0.0', to: 'main' } },
  'get /projects/:id/repository/commits/:sha/diff': { on: 'project', min: 'code' },
  'get /projects/:id/repository/contributors': { on: 'project', min: 'code' },
  'get /projects/:id/repository/merge_base': { on: 'project', min: 'code', query: { refs: ['main', 'v1.0.0'] } },
  'get /projects/:id/repository/commits': { on: 'project', min: 'code' },
  'get /projects/:id/repository/commits/:sha': { on: 'project', min: 'code' },
  'get /projects/:id/repository/files/:file_path': {
    on: 'project',
    min: 'code',
    query: { ref: 'main' },
    scopes: ['read_repository'],
  },
  'get /projects/:id/repository/files/:file_path/raw': {
    on: 'project',
    min: 'code',
    query: { ref: 'main' },
    scopes: ['read_repository'],
  },
  'get /projects/:id/repository/branches': { on: 'project', min: 'code' },
  'get /projects/:id/repository/branches/:branch': { on: 'project', min: 'code' },
  'get /projects/:id/repository/tags': { on: 'project', min: 'code' },
  'get /projects/:id/repository/tags/:tag_name': { on: 'project', min: 'code' },
  'get /projects/:id/repository/changelog': { on: 'project', min: 'code', query: { version: '9.9.9' } },
  // Repository writes (push_code: Developers; deleting a tag or many branches: Maintainers).
  'post /projects/:id/repository/files/:file_path': {
    on: 'project',
    min: 'developer',
    fresh: async () => ({ file_path: `new/file-${n()}.txt` }),
    body: () => ({ branch: 'matrix', content: 'x', commit_message: 'matrix' }),
  },
  'put /projects/:id/repository/files/:file_path': {
    on: 'project',
    min: 'developer',
    body: (i) => ({ branch: 'matrix', content: `x${i}`, commit_message: 'matrix' }),
  },
  'delete /projects/:id/repository/files/:file_path': {
    on: 'project',
    min: 'developer',
    fresh: freshFile,
    body: () => ({ branch: 'matrix', commit_message: 'matrix' }),
  },
  'post /projects/:id/repository/commits': {
    on: 'project',
    min: 'developer',
    body: (i) => ({
      branch: 'matrix',
      commit_message: 'matrix',
      actions: [{ action: 'create', file_path: `commits/${i}.txt`, content: 'x' }],
    }),
  },
  'post /projects/:id/repository/branches': {
    on: 'project',
    min: 'developer',
    body: (i) => ({ branch: `new-${i}`, ref: 'main' }),
  },
  'delete /projects/:id/repository/branches/:branch': { on: 'project', min: 'developer', fresh: freshBranch },
  // branches.rb answers 202 to whoever may read the code; the worker then does nothing without push_code.
  'delete /projects/:id/repository/merged_branches': { on: 'project', min: 'code' },
  'post /projects/:id/repository/tags': {
    on: 'project',
    min: 'developer',
    body: (i) => ({ tag_name: `new-${i}`, ref: 'main' }),
  },
  // admin_tag is a Developer ability (protected tags aside).
  'delete /projects/:id/repository/tags/:tag_name': { on: 'project', min: 'developer', fresh: freshTag },
  'post /projects/:id/repository/changelog': {
    on: 'project',
    min: 'developer',
    body: (i) => ({ version: `${i}.0.0`, to: 'main', from: 'v1.0.0', branch: 'matrix' }),
  },
  // Instance administration.
  'get /application/settings': { on: 'none', min: 'admin' },
  'put /application/settings': { on: 'none', min: 'admin', body: () => ({ after_sign_out_path: '' }) },
  'get /application/plan_limits': { on: 'none', min: 'admin' },
  'put /application/plan_limits': { on: 'none', min: 'admin', body: () => ({ plan_name: 'default' }) },
  'get /audit_events': { on: 'none', min: 'admin' },
  'get /audit_events/:id': { on: 'none', min: 'admin' },
  'post /admin/security/advisories': {
    on: 'none',
    min: 'admin',
    body: () => ({
      advisories: [
        {
          id: 'GHSA-matrix',
          modified: '2024-01-01T00:00:00Z',
          affected: [{ package: { ecosystem: 'npm', name: 'left-pad' }, versions: ['1.0.0'] }],
        },
      ],
    }),
  },
  'post /applications': {
    on: 'none',
    min: 'admin',
    body: (i) => ({ name: `app${i}`, redirect_uri: 'https://example.com/cb', scopes: 'api' }),
  },
  'get /applications': { on: 'none', min: 'admin' },
  'delete /applications/:id': {
    on: 'none',
    min: 'admin',
    fresh: async () => {
      const created = await adminRequest('/applications', 'POST', {
        name: 'gone',
        redirect_uri: 'https://example.com/cb',
        scopes: 'api',
      });
      return { id: String(created.id) };
    },
  },
  // Pages domains (lib/api/pages_domains.rb: Maintainers; the instance list: administrators).
  'get /pages/domains': { on: 'none', min: 'admin' },
  'get /projects/:id/pages/domains': { on: 'project', min: 'maintainer' },
  'get /projects/:id/pages/domains/:domain': { on: 'project', min: 'maintainer' },
  'post /projects/:id/pages/domains': {
    on: 'project',
    min: 'maintainer',
    body: (i) => ({ domain: `d${i}.matrix.example` }),
  },
  'put /projects/:id/pages/domains/:domain': { on: 'project', min: 'maintainer' },
  // The made-up domain has no TXT record: allowed callers get the verification's 400.
  'put /projects/:id/pages/domains/:domain/verify': { on: 'project', min: 'maintainer', allowed: 400 },
  'delete /projects/:id/pages/domains/:domain': {
    on: 'project',
    min: 'maintainer',
    fresh: async (w, v) => {
      const domain = `gone${n()}.matrix.example`;
      await adminRequest(`/projects/${w.projects[v].id}/pages/domains`, 'POST', { domain });
      return { domain };
    },
  },
  // Error tracking (lib/api/error_tracking/*.rb: admin_operations, Maintainers).
  'get /projects/:id/error_tracking/settings': { on: 'project', min: 'maintainer' },
  'patch /projects/:id/error_tracking/settings': {
    on: 'project',
    min: 'maintainer',
    body: () => ({ active: true }),
  },
  'put /projects/:id/error_tracking/settings': {
    on: 'project',
    min: 'maintainer',
    body: () => ({ active: true, integrated: true }),
  },
  'get /projects/:id/error_tracking/client_keys': { on: 'project', min: 'maintainer' },
  'post /projects/:id/error_tracking/client_keys': { on: 'project', min: 'maintainer' },
  'delete /projects/:id/error_tracking/client_keys/:key_id': {
    on: 'project',
    min: 'maintainer',
    fresh: async (w, v) => {
      const key = await adminRequest(`/projects/${w.projects[v].id}/error_tracking/client_keys`, 'POST');
      return { key_id: String(key.id) };
    },
  },
  // Dependencies (lib/api/dependencies.rb: read_dependency, Reporters and up).
  'get /projects/:id/dependencies': { on: 'project', min: 'code' },
  // Storage moves (administrators).
  'get /project_repository_storage_moves': { on: 'none', min: 'admin' },
  // (Move 999 does not exist and Depot has no snippets: administrators get 404 there.)
  'get /project_repository_storage_moves/:repository_storage_move_id': {
    on: 'none',
    min: 'admin',
    override: ADMIN_404,
  },
  'post /project_repository_storage_moves': { on: 'none', min: 'admin', body: () => BULK_MOVE },
  'get /projects/:id/repository_storage_moves': { on: 'project', min: 'admin' },
  'get /projects/:id/repository_storage_moves/:repository_storage_move_id': {
    on: 'project',
    min: 'admin',
    override: ADMIN_404,
  },
  'post /projects/:id/repository_storage_moves': {
    on: 'project',
    min: 'admin',
    body: () => ({ destination_storage_name: 'second' }),
  },
  'get /snippet_repository_storage_moves': { on: 'none', min: 'admin' },
  'get /snippet_repository_storage_moves/:repository_storage_move_id': {
    on: 'none',
    min: 'admin',
    override: ADMIN_404,
  },
  'post /snippet_repository_storage_moves': { on: 'none', min: 'admin', body: () => BULK_MOVE },
  'get /snippets/:id/repository_storage_moves': { on: 'none', min: 'admin', override: ADMIN_404 },
  'get /snippets/:id/repository_storage_moves/:repository_storage_move_id': {
    on: 'none',
    min: 'admin',
    override: ADMIN_404,
  },
  'post /snippets/:id/repository_storage_moves': { on: 'none', min: 'admin', override: ADMIN_404 },
  'get /group_repository_storage_moves': { on: 'none', min: 'admin' },
  'get /group_repository_storage_moves/:repository_storage_move_id': { on: 'none', min: 'admin', override: ADMIN_404 },
  'post /group_repository_storage_moves': { on: 'none', min: 'admin', body: () => BULK_MOVE },
  'get /groups/:id/repository_storage_moves': { on: 'group', min: 'admin' },
  'get /groups/:id/repository_storage_moves/:repository_storage_move_id': {
    on: 'group',
    min: 'admin',
    override: ADMIN_404,
  },
  'post /groups/:id/repository_storage_moves': {
    on: 'group',
    min: 'admin',
    body: () => ({ destination_storage_name: 'second' }),
  },
  // Billable members and LDAP overrides (EE lib/api/members.rb: admin_group_member, Owners).
  // (bad_request! unless admin_group_member: denied members get 400.)
  'get /groups/:id/billable_members': { on: 'group', min: 'owner', denied: 400 },
  'get /groups/:id/billable_members/:user_id/memberships': { on: 'group', min: 'owner', denied: 400 },
  'delete /groups/:id/billable_members/:user_id': {
    on: 'group',
    min: 'owner',
    denied: 400,
    fresh: (w, v) => freshMember(w, v, 'group'),
  },
  // The groups are not LDAP-synced, so no one may override (override_group_member needs it).
  'post /groups/:id/members/:user_id/override': { on: 'group', min: 'owner', override: { owner: 403, admin: 403 } },
  'delete /groups/:id/members/:user_id/override': { on: 'group', min: 'owner', override: { owner: 403, admin: 403 } },
  // Members (lib/api/members.rb: read_group_member / read_project_member for anyone who sees the
  // source; admin_group_member Owners, admin_project_member Maintainers).
  'get /groups/:id/members': { on: 'group', min: 'signed' },
  'get /groups/:id/members/all': { on: 'group', min: 'signed' },
  'get /groups/:id/members/all/:user_id': { on: 'group', min: 'signed' },
  'get /groups/:id/members/:user_id': { on: 'group', min: 'signed' },
  'post /groups/:id/members': {
    on: 'group',
    min: 'owner',
    fresh: async () => ({ user_id: String((await quickUser()).id) }),
    body: (_, fresh) => ({ user_id: fresh.user_id ?? world.values.user, access_level: ROLES.developer }),
  },
  'put /groups/:id/members/:user_id': {
    on: 'group',
    min: 'owner',
    fresh: (w, v) => freshMember(w, v, 'group'),
    body: () => ({ access_level: ROLES.developer }),
  },
  'delete /groups/:id/members/:user_id': {
    on: 'group',
    min: 'owner',
    fresh: (w, v) => freshMember(w, v, 'group'),
  },
  'get /projects/:id/members': { on: 'project', min: 'signed' },
  'get /projects/:id/members/all': { on: 'project', min: 'signed' },
  'get /projects/:id/members/all/:user_id': { on: 'project', min: 'signed' },
  'get /projects/:id/members/:user_id': { on: 'project', min: 'signed' },
  'post /projects/:id/members': {
    on: 'project',
    min: 'maintainer',
    fresh: async () => ({ user_id: String((await quickUser()).id) }),
    body: (_, fresh) => ({ user_id: fresh.user_id ?? world.values.user, access_level: ROLES.developer }),
  },
  'put /projects/:id/members/:user_id': {
    on: 'project',
    min: 'maintainer',
    fresh: (w, v) => freshMember(w, v, 'project'),
    body: () => ({ access_level: ROLES.developer }),
  },
  'delete /projects/:id/members/:user_id': {
    on: 'project',
    min: 'maintainer',
    fresh: (w, v) => freshMember(w, v, 'project'),
  },
  // Access requests (lib/api/access_requests.rb): listing and deciding need admin_*_member; a
  // request is made by a signed-in user who is not yet a member.
  'get /groups/:id/access_requests': { on: 'group', min: 'owner' },
  // request_access: signed-in users who are not members; members and administrators may not.
  'post /groups/:id/access_requests': { on: 'group', min: 'signed', override: MEMBERS_403 },
  'put /groups/:id/access_requests/:user_id/approve': {
    on: 'group',
    min: 'owner',
    fresh: (w, v) => freshRequester(w, v, 'group'),
  },
  'delete /groups/:id/access_requests/:user_id': {
    on: 'group',
    min: 'owner',
    fresh: (w, v) => freshRequester(w, v, 'group'),
  },
  'get /projects/:id/access_requests': { on: 'project', min: 'maintainer' },
  'post /projects/:id/access_requests': { on: 'project', min: 'signed', override: MEMBERS_403 },
  'put /projects/:id/access_requests/:user_id/approve': {
    on: 'project',
    min: 'maintainer',
    fresh: (w, v) => freshRequester(w, v, 'project'),
  },
  'delete /projects/:id/access_requests/:user_id': {
    on: 'project',
    min: 'maintainer',
    fresh: (w, v) => freshRequester(w, v, 'project'),
  },
  // Events (lib/api/events.rb).
  'get /events': { on: 'none', min: 'signed', scopes: ['read_user'] },
  'get /users/:id/events': { on: 'none', min: 'any', scopes: ['read_user'] },
  'get /projects/:id/events': { on: 'project', min: 'any' },
  // Transfers and sharing (projects.rb transfer: change_namespace, Owners; share: admin_project;
  // groups.rb transfer and share: admin_group, Owners; storage: administrators).
  'put /projects/:id/transfer': {
    on: 'project',
    min: 'owner',
    fresh: async (w, v) => ({
      id: String((await makeProject(app, w.admin, { namespace: w.groups[v], visibility: v })).id),
    }),
    body: () => ({ namespace: world.values.landing }),
  },
  'get /projects/:id/groups': { on: 'project', min: 'any' },
  'get /projects/:id/storage': { on: 'project', min: 'admin' },
  // The group shared with must be one the caller is a member of (read_namespace_via_membership).
  'post /projects/:id/share': {
    on: 'project',
    min: 'maintainer',
    fresh: async (w) => ({ group_id: String((await freshGroup(w, 'public')).id) }),
    body: (_, fresh) => ({ group_id: fresh.group_id ?? world.values.landing, group_access: ROLES.developer }),
  },
  'delete /projects/:id/share/:group_id': {
    on: 'project',
    min: 'maintainer',
    fresh: (w, v) => freshShare(w, `/projects/${w.projects[v].id}`),
  },
  'post /groups/:id/transfer': {
    on: 'group',
    min: 'owner',
    fresh: async (w, v) => ({ id: String((await makeGroup(app, w.admin, { visibility: v, parent: w.groups[v] })).id) }),
  },
  // Groups::GroupLinks::CreateService answers 404 Not Found to whoever may not admin the members.
  'post /groups/:id/share': {
    on: 'group',
    min: 'owner',
    denied: 404,
    fresh: async (w) => ({ group_id: String((await makeGroup(app, w.admin, { visibility: 'public' })).id) }),
    body: (_, fresh) => ({ group_id: fresh.group_id ?? world.values.landing, group_access: ROLES.developer }),
  },
  'delete /groups/:id/share/:group_id': {
    on: 'group',
    min: 'owner',
    fresh: (w, v) => freshShare(w, `/groups/${w.groups[v].id}`),
  },
  // Repository operations (files.rb blame, commits.rb cherry_pick/revert: push to the branch,
  // refs and signature: read_code; the snapshot: administrators).
  'get /projects/:id/repository/files/:file_path/blame': {
    on: 'project',
    min: 'code',
    query: { ref: 'main' },
    scopes: ['read_repository'],
  },
  'post /projects/:id/repository/commits/:sha/cherry_pick': {
    on: 'project',
    min: 'developer',
    fresh: async (w, v) => ({ sha: await freshCommit(w, v, `pick-${n()}`) }),
    body: () => ({ branch: 'matrix' }),
    // Anonymous callers of a public project are asked to sign in: 401, as GitLab's
    // spec/requests/api/commits_spec.rb expects for cherry_pick and revert.
    override: { anonymous: 401 },
  },
  'post /projects/:id/repository/commits/:sha/revert': {
    on: 'project',
    min: 'developer',
    fresh: async (w, v) => ({ sha: await freshCommit(w, v, 'matrix') }),
    body: () => ({ branch: 'matrix' }),
    override: { anonymous: 401 },
  },
  'get /projects/:id/repository/commits/:sha/refs': { on: 'project', min: 'code' },
  // The sample commits are not signed: those who may read get 404 Signature Not Found.
  'get /projects/:id/repository/commits/:sha/signature': { on: 'project', min: 'code', allowed: 404 },
  'get /projects/:id/snapshot': { on: 'project', min: 'admin' },
  // Merge requests (merge_requests.rb; read_merge_request follows read_code here, creating and
  // updating need push_code or authorship, merging a push to the target branch).
  'get /projects/:id/merge_requests': { on: 'project', min: 'code' },
  'post /projects/:id/merge_requests': {
    on: 'project',
    min: 'developer',
    fresh: async (w, v) => ({ source: await freshBranchWithCommit(w, v) }),
    body: (i, fresh) => ({
      source_branch: fresh.source ?? 'mr-source',
      target_branch: 'matrix',
      title: `Matrix ${i}`,
    }),
  },
  'get /projects/:id/merge_requests/:merge_request_iid': { on: 'project', min: 'code' },
  'put /projects/:id/merge_requests/:merge_request_iid': {
    on: 'project',
    min: 'developer',
    body: (i) => ({ description: `changed ${i}` }),
  },
  'get /projects/:id/merge_requests/:merge_request_iid/commits': { on: 'project', min: 'code' },
  'get /projects/:id/merge_requests/:merge_request_iid/changes': { on: 'project', min: 'code' },
  'get /projects/:id/merge_requests/:merge_request_iid/diffs': { on: 'project', min: 'code' },
  // unauthorized! unless can_be_merged_by?: denied members get 401. The fresh merge request is
  // approved by an administrator first (the project's rule asks for one approval).
  'put /projects/:id/merge_requests/:merge_request_iid/merge': {
    on: 'project',
    min: 'developer',
    denied: 401,
    needsCode: true,
    fresh: async (w, v) => {
      const iid = await freshMergeRequest(w, v);
      await adminRequest(`/projects/${w.projects[v].id}/merge_requests/${iid}/approve`, 'POST');
      return { merge_request_iid: iid };
    },
  },
  // Approvals (EE project_approvals.rb, project_approval_rules.rb, merge_request_approvals.rb,
  // merge_request_approval_rules.rb): reading needs the project or its merge requests, changing
  // the project's rules admin_project, a merge request's rules update_merge_request, approving
  // Developers (not the author).
  'get /projects/:id/approvals': { on: 'project', min: 'signed' },
  'post /projects/:id/approvals': { on: 'project', min: 'maintainer', body: () => ({ reset_approvals_on_push: true }) },
  'get /projects/:id/approval_rules': { on: 'project', min: 'signed' },
  'get /projects/:id/approval_rules/:approval_rule_id': { on: 'project', min: 'signed' },
  'post /projects/:id/approval_rules': {
    on: 'project',
    min: 'maintainer',
    body: (i) => ({ name: `rule ${i}`, approvals_required: 1 }),
  },
  'put /projects/:id/approval_rules/:approval_rule_id': {
    on: 'project',
    min: 'maintainer',
    body: (i) => ({ name: `renamed ${i}`, approvals_required: 1 }),
  },
  'delete /projects/:id/approval_rules/:approval_rule_id': {
    on: 'project',
    min: 'maintainer',
    fresh: async (w, v) => {
      const rule = await adminRequest(`/projects/${w.projects[v].id}/approval_rules`, 'POST', {
        name: `gone ${n()}`,
        approvals_required: 1,
      });
      return { approval_rule_id: String(rule.id) };
    },
  },
  'get /projects/:id/merge_requests/:merge_request_iid/approvals': { on: 'project', min: 'code' },
  'post /projects/:id/merge_requests/:merge_request_iid/approvals': {
    on: 'project',
    min: 'developer',
    body: () => ({ approvals_required: 1 }),
  },
  'get /projects/:id/merge_requests/:merge_request_iid/approval_state': { on: 'project', min: 'code' },
  'get /projects/:id/merge_requests/:merge_request_iid/approval_rules': { on: 'project', min: 'code' },
  'post /projects/:id/merge_requests/:merge_request_iid/approval_rules': {
    on: 'project',
    min: 'developer',
    body: (i) => ({ name: `mr rule ${i}`, approvals_required: 1 }),
  },
  'put /projects/:id/merge_requests/:merge_request_iid/approval_rules/:approval_rule_id': {
    on: 'project',
    min: 'developer',
    body: (i) => ({ name: `mr renamed ${i}`, approvals_required: 1 }),
  },
  'delete /projects/:id/merge_requests/:merge_request_iid/approval_rules/:approval_rule_id': {
    on: 'project',
    min: 'developer',
    fresh: async (w, v) => {
      const iid = w.values[`mr:${v}`];
      const rule = await adminRequest(`/projects/${w.projects[v].id}/merge_requests/${iid}/approval_rules`, 'POST', {
        name: `gone ${n()}`,
        approvals_required: 1,
      });
      return { approval_rule_id: String(rule.id) };
    },
  },
  'post /projects/:id/merge_requests/:merge_request_iid/approve': { on: 'project', min: 'developer' },
  'post /projects/:id/merge_requests/:merge_request_iid/unapprove': { on: 'project', min: 'developer' },
  // Protected branches (protected_branches.rb: reading needs read_code beyond Guests,
  // changing admin_project; anonymous callers are asked to sign in before a change).
  'get /projects/:id/protected_branches': { on: 'project', min: 'code' },
  'get /projects/:id/protected_branches/:name': { on: 'project', min: 'code' },
  'post /projects/:id/protected_branches': {
    on: 'project',
    min: 'maintainer',
    override: { anonymous: 401 },
    body: (i) => ({ name: `protected-${i}` }),
  },
  'patch /projects/:id/protected_branches/:name': {
    on: 'project',
    min: 'maintainer',
    override: { anonymous: 401 },
    body: () => ({ allow_force_push: false }),
  },
  'delete /projects/:id/protected_branches/:name': {
    on: 'project',
    min: 'maintainer',
    override: { anonymous: 401 },
    fresh: async (w, v) => {
      const name = `unprotect-${n()}`;
      await adminRequest(`/projects/${w.projects[v].id}/protected_branches`, 'POST', { name });
      return { name };
    },
  },
  // The runner protocol (lib/api/ci/runner.rb): registration, verification and deletion by a
  // runner's token; a missing one is Grape's 400, a wrong one 403, whoever the user is.
  'post /runners': { on: 'none', min: 'token', allowed: 400 },
  'delete /runners': { on: 'none', min: 'token', allowed: 403, body: () => ({ token: 'glrt-not-a-runner' }) },
  'post /runners/verify': { on: 'none', min: 'token', allowed: 403, body: () => ({ token: 'glrt-not-a-runner' }) },
  'post /runners/reset_registration_token': { on: 'none', min: 'admin' },
  'get /runners': { on: 'none', min: 'signed' },
  'get /runners/all': { on: 'none', min: 'admin' },
  // One runner (lib/api/ci/runners.rb, before { authenticate! }): the private project's runner,
  // which its Maintainers own (read_runner, update_runner, delete_runner, read_builds: "No access
  // granted" for others; administrators may do anything).
  'get /runners/:id': { on: 'none', roleOn: 'project', min: 'maintainer', values: runnerOf },
  'put /runners/:id': {
    on: 'none',
    roleOn: 'project',
    min: 'maintainer',
    values: runnerOf,
    body: (i) => ({ description: `matrix ${i}` }),
  },
  // A fresh runner of one project (a runner of several may be deleted by administrators only).
  'delete /runners/:id': {
    on: 'none',
    roleOn: 'project',
    min: 'maintainer',
    values: runnerOf,
    fresh: async (w) => ({ id: await freshRunner(w, 'private') }),
  },
  'get /runners/:id/jobs': { on: 'none', roleOn: 'project', min: 'maintainer', values: runnerOf },
  // The project routes: before { authorize! :read_project_runners } (Maintainers), ahead of the
  // parameters; assigning needs create_runner and a runner the caller owns (one of a sibling
  // project); unassigning a runner the project shares with that sibling.
  'get /projects/:id/runners': { on: 'project', min: 'maintainer', beforeParams: true },
  'post /projects/:id/runners': {
    on: 'project',
    min: 'maintainer',
    beforeParams: true,
    fresh: async (w, v) => ({ runner_id: await freshRunner(w, v) }),
    body: (_, fresh) => ({ runner_id: fresh.runner_id ?? world.values.runner }),
  },
  'delete /projects/:id/runners/:runner_id': {
    on: 'project',
    min: 'maintainer',
    beforeParams: true,
    values: (w) => ({ runner_id: w.values.runner as string }),
    fresh: async (w, v) => {
      const runner = await freshRunner(w, v);
      await adminRequest(`/projects/${w.projects[v].id}/runners`, 'POST', { runner_id: Number(runner) });
      return { runner_id: runner };
    },
  },
  'post /projects/:id/runners/reset_registration_token': { on: 'project', min: 'maintainer' },
  // before { authorize! :read_group_runners, user_group }: Maintainers of the group.
  'get /groups/:id/runners': { on: 'group', min: 'maintainer', beforeParams: true },
  'post /groups/:id/runners/reset_registration_token': { on: 'group', min: 'owner' },
  // Jobs as the runner sees them: a missing runner token is 400, a job without its job token 403
  // (authenticate_job!: an unknown job is 403 too); an upload without its file fails Grape's
  // validation first (400).
  'post /jobs/request': { on: 'none', min: 'token', allowed: 400 },
  'put /jobs/:id': { on: 'none', min: 'token', allowed: 400, values: protocolJob },
  'patch /jobs/:id/trace': { on: 'none', min: 'token', allowed: 403, values: protocolJob },
  'post /jobs/:id/artifacts': {
    on: 'none',
    min: 'token',
    allowed: 400,
    values: protocolJob,
  },
  'get /jobs/:id/artifacts': { on: 'none', min: 'token', allowed: 403, values: protocolJob },
  // Pipelines and jobs (pipelines.rb, jobs.rb: read_pipeline and read_build for whoever reads
  // the project; creating, cancelling, retrying and playing: Developers).
  'get /projects/:id/pipelines': { on: 'project', min: 'any' },
  'get /projects/:id/pipelines/:pipeline_id': { on: 'project', min: 'any' },
  'post /projects/:id/pipeline': { on: 'project', min: 'developer', body: () => ({ ref: 'matrix' }) },
  'get /projects/:id/pipelines/:pipeline_id/jobs': { on: 'project', min: 'any' },
  'post /projects/:id/pipelines/:pipeline_id/cancel': {
    on: 'project',
    min: 'developer',
    fresh: async (w, v) => {
      const pipeline = await adminRequest(`/projects/${w.projects[v].id}/pipeline`, 'POST', { ref: 'matrix' });
      return { pipeline_id: String(pipeline.id) };
    },
  },
  // update_pipeline (Developers); a pipeline with nothing failed is presented as it is.
  'post /projects/:id/pipelines/:pipeline_id/retry': { on: 'project', min: 'developer' },
  // jobs.rb: before { authenticate! } (anonymous callers sign in, public projects too), then
  // read_build; the job ran to success with a log and an artifact archive.
  'get /projects/:id/jobs': { on: 'project', min: 'any', signIn: true },
  'get /projects/:id/jobs/:job_id': { on: 'project', min: 'any', signIn: true, values: jobOf },
  'get /projects/:id/jobs/:job_id/trace': { on: 'project', min: 'any', signIn: true, values: jobOf },
  // job_artifacts.rb authenticates only non-GET requests: anonymous callers may download there.
  'get /projects/:id/jobs/:job_id/artifacts': { on: 'project', min: 'any', values: jobOf },
  // cancel_build, retry_job, play_job (Developers), each on a fresh job of the state it needs;
  // a played job answers 200 (jobs.rb `status 200`).
  'post /projects/:id/jobs/:job_id/cancel': {
    on: 'project',
    min: 'developer',
    values: jobOf,
    fresh: async (w, v) => ({ job_id: await freshJob(w, v, 'a') }),
  },
  'post /projects/:id/jobs/:job_id/retry': {
    on: 'project',
    min: 'developer',
    values: jobOf,
    fresh: async (w, v) => {
      const job = await freshJob(w, v, 'a');
      await adminRequest(`/projects/${w.projects[v].id}/jobs/${job}/cancel`, 'POST');
      return { job_id: job };
    },
  },
  'post /projects/:id/jobs/:job_id/play': {
    on: 'project',
    min: 'developer',
    values: jobOf,
    allowed: 200,
    fresh: async (w, v) => ({ job_id: await freshJob(w, v, 'm') }),
  },
  // Project hooks (project_hooks.rb: before { authorize_admin_project }, ahead of the parameters).
  'get /projects/:id/hooks': { on: 'project', min: 'maintainer', beforeParams: true },
  'get /projects/:id/hooks/:hook_id': { on: 'project', min: 'maintainer', beforeParams: true },
  'post /projects/:id/hooks': {
    on: 'project',
    min: 'maintainer',
    beforeParams: true,
    body: (i) => ({ url: `https://93.184.215.14/${i}`, push_events: true }),
  },
  'put /projects/:id/hooks/:hook_id': {
    on: 'project',
    min: 'maintainer',
    beforeParams: true,
    body: (i) => ({ url: `https://93.184.215.14/edited-${i}` }),
  },
  'delete /projects/:id/hooks/:hook_id': {
    on: 'project',
    min: 'maintainer',
    beforeParams: true,
    fresh: async (w, v) => {
      const hook = await adminRequest(`/projects/${w.projects[v].id}/hooks`, 'POST', {
        url: `https://93.184.215.14/gone-${n()}`,
      });
      return { hook_id: String(hook.id) };
    },
  },
  'get /projects/:id/hooks/:hook_id/events': { on: 'project', min: 'maintainer', beforeParams: true },
  // (No delivery was logged: those allowed meet 404 for the log.)
  'post /projects/:id/hooks/:hook_id/events/:hook_log_id/resend': {
    on: 'project',
    min: 'maintainer',
    beforeParams: true,
    allowed: 404,
  },
  // Testing note events of a project without notes: TestHooks answers 422 "Ensure the project
  // has notes." to those allowed (no request leaves the host).
  'post /projects/:id/hooks/:hook_id/test/:trigger': {
    on: 'project',
    min: 'maintainer',
    beforeParams: true,
    allowed: 422,
    values: () => ({ trigger: 'note_events' }),
  },
  // Environments and deployments (environments.rb, deployments.rb: read_environment and
  // read_deployment for readers of the code, Developers write; as test/api/environments.test.ts).
  'get /projects/:id/environments': { on: 'project', min: 'code' },
  'post /projects/:id/environments': { on: 'project', min: 'developer', body: (i) => ({ name: `env-${i}` }) },
  // Reporters are told 401 by GitLab's destroy_environment check there (module test).
  // Environments::ScheduleToDeleteReviewAppsService answers 401 to who may not destroy
  // environments (guests of a private project cannot read them: 403); with no stopped review app
  // those allowed get its 400.
  'delete /projects/:id/environments/review_apps': {
    on: 'project',
    min: 'developer',
    denied: 401,
    needsCode: true,
    allowed: 400,
  },
  // environments.rb authorize! :stop_environment on the project: Maintainers (GitLab's request
  // spec: a developer is rejected with 403).
  'post /projects/:id/environments/stop_stale': {
    on: 'project',
    min: 'maintainer',
    body: () => ({ before: daysAgo(30) }),
  },
  'get /projects/:id/environments/:environment_id': { on: 'project', min: 'code' },
  'put /projects/:id/environments/:environment_id': {
    on: 'project',
    min: 'developer',
    body: (i) => ({ external_url: `https://env${i}.example.com` }),
  },
  'delete /projects/:id/environments/:environment_id': {
    on: 'project',
    min: 'developer',
    fresh: async (w, v) => {
      const id = await freshEnvironment(w, v);
      await adminRequest(`/projects/${w.projects[v].id}/environments/${id}/stop`, 'POST');
      return { environment_id: id };
    },
  },
  'post /projects/:id/environments/:environment_id/stop': {
    on: 'project',
    min: 'developer',
    fresh: async (w, v) => ({ environment_id: await freshEnvironment(w, v) }),
  },
  'get /projects/:id/deployments': { on: 'project', min: 'code' },
  // deployments.rb: read_deployment as the list; create_deployment and update_deployment for
  // Developers (a deployment made through the API, running, is set to success);
  // destroy_deployment for Maintainers (one that is neither running nor the environment's last).
  'get /projects/:id/deployments/:deployment_id': { on: 'project', min: 'code', values: deploymentOf },
  'post /projects/:id/deployments': {
    on: 'project',
    min: 'developer',
    body: (i) => ({ environment: `deploy-${i}`, sha: world.values.commit, ref: 'main', tag: false, status: 'success' }),
  },
  'put /projects/:id/deployments/:deployment_id': {
    on: 'project',
    min: 'developer',
    values: deploymentOf,
    fresh: async (w, v) => ({ deployment_id: await freshDeployment(w, v, `put-${n()}`, 'running') }),
    body: () => ({ status: 'success' }),
  },
  'delete /projects/:id/deployments/:deployment_id': {
    on: 'project',
    min: 'maintainer',
    values: deploymentOf,
    fresh: async (w, v) => {
      const environment = `gone-${n()}`;
      const first = await freshDeployment(w, v, environment, 'success');
      await freshDeployment(w, v, environment, 'success');
      return { deployment_id: first };
    },
  },
  // Error tracking collector: authenticated by the client key (GitLab's Sentry DSN); collector.rb
  // never reads a user's credentials, so every persona's event is taken (200), a blocked user's too.
  'post /error_tracking/collector/api/:id/envelope': {
    on: 'none',
    min: 'token',
    allowed: 200,
    values: collector,
    raw: () => ({
      type: 'application/x-sentry-envelope',
      body: [{ event_id: 'a'.repeat(32) }, { type: 'event' }, SENTRY_EVENT]
        .map((line) => JSON.stringify(line))
        .join('\n'),
    }),
  },
  'post /error_tracking/collector/api/:id/store': {
    on: 'none',
    min: 'token',
    allowed: 200,
    values: collector,
    raw: () => ({ type: 'application/json', body: JSON.stringify(SENTRY_EVENT) }),
  },
};

/** The private project's runner. */
function runnerOf(w: World): Values {
  return { id: w.values.runner as string };
}

/** A job as the runner protocol names it (the public project's, finished). */
function protocolJob(w: World): Values {
  return { id: w.values['job:public'] as string };
}

/** The job that ran on the project of `v`. */
function jobOf(w: World, v: Visibility): Values {
  return { job_id: w.values[`job:${v}`] as string };
}

/** The deployment made on the project of `v`. */
function deploymentOf(w: World, v: Visibility): Values {
  return { deployment_id: w.values[`deployment:${v}`] as string };
}

/**
 * The integrations family is large (two paths per kind, ~90 routes): a public project (members
 * and non-members are told 403) and a private one (404 for those who cannot see it) cover its
 * answers; an internal one would add a thousand requests that repeat them.
 */
const INTEGRATION_VISIBILITIES: Visibility[] = ['public', 'private'];

/** Rules for families of routes (one per integration slug, under /integrations and /services). */
function ruleFor(key: string): Rule | undefined {
  const exact = RULES[key];
  if (exact) return exact;
  // integrations.rb: before { authorize_admin_project }, ahead of the parameters (Maintainers);
  // each PUT sends its integration's required settings. Redmine is set up on every project, so
  // that reading it finds it; deleting it answers 204 whether or not it is still there.
  const family = /^(put|get|delete) \/projects\/:id\/(integrations|services)(?:\/([:a-z0-9_-]+))?$/.exec(key);
  if (family) {
    const kind = family[3] && !family[3].startsWith(':') ? INTEGRATION_KINDS.get(family[3]) : undefined;
    if (family[3] && !family[3].startsWith(':') && !kind) return undefined;
    return {
      on: 'project',
      min: 'maintainer',
      beforeParams: true,
      visibilities: INTEGRATION_VISIBILITIES,
      body: kind ? () => integrationBody(kind) : undefined,
    };
  }
  return undefined;
}

function levelOf(persona: Persona, rule: Rule): number {
  if (rule.on === 'none' && !rule.roleOn) return 0;
  return persona.level;
}

/** Whether the persona sees the subject (GitLab: public to all, internal to users, private to members). */
function sees(persona: Persona, rule: Rule, visibility: Visibility): boolean {
  if (rule.on === 'none') return true;
  if (persona.user?.admin) return true;
  if (visibility === 'public') return true;
  if (visibility === 'internal') return persona.user !== null;
  return levelOf(persona, rule) >= ROLES.guest;
}

/** The status GitLab answers, or 'ok' for any 2xx. */
function expected(op: Operation, rule: Rule, persona: Persona, visibility: Visibility): number | 'ok' {
  // Runner and job tokens only: what a user sends is not even read.
  if (rule.min === 'token') return rule.allowed as number;
  const read = op.method === 'get';
  // Credentials first (api_guard): blocked users, then the token's scopes.
  if (persona.name === 'blocked') return 403;
  const scope = persona.scopes[0];
  if (scope === 'read_api' && !read && !rule.scopes?.includes('any')) return 403;
  if (scope === 'read_user' && !(read && rule.scopes?.includes('read_user')) && !rule.scopes?.includes('any'))
    return 403;
  if (
    scope === 'read_repository' &&
    !(read && rule.scopes?.includes('read_repository')) &&
    !rule.scopes?.includes('any')
  )
    return 403;
  if (!persona.user) {
    if (op.auth === 'required' || rule.min === 'admin' || rule.signIn) return 401;
  }
  const admin = persona.user?.admin === true;
  // authenticated_as_admin! runs before the subject is loaded: 403 whatever the user may see.
  if (rule.min === 'admin') return admin ? (rule.override?.admin ?? 'ok') : 403;
  if (!sees(persona, rule, visibility)) return persona.user ? 404 : op.auth === 'required' ? 401 : 404;
  const override = rule.override?.[persona.name];
  if (override !== undefined) return override;
  const level = levelOf(persona, rule);
  // Routes on merge requests first need to read them (read_code here): 403 before anything else.
  if (rule.needsCode && !admin && visibility === 'private' && level < ROLES.reporter) return 403;
  if (admin) return 'ok';
  switch (rule.min) {
    case 'any':
      return 'ok';
    case 'signed':
      return persona.user ? 'ok' : 401;
    case 'code':
      return visibility !== 'private' || level >= ROLES.reporter ? 'ok' : 403;
    default:
      return level >= ROLE_LEVEL[rule.min] ? 'ok' : (rule.denied ?? 403);
  }
}

beforeAll(async () => {
  app = await startTestApp({ storages: ['second'] });
  const admin = await makeUser(app, { admin: true });
  const adminToken = await makeToken(app, admin);
  let count = 0;
  const groups = {} as Record<Visibility, Namespace>;
  const projects = {} as Record<Visibility, Project>;
  for (const v of VISIBILITIES) {
    groups[v] = await makeGroup(app, admin, { visibility: v });
    projects[v] = (await makeSampleProject(app, admin, { namespace: groups[v], visibility: v })).project;
  }
  const personas: Persona[] = [];
  const levels: Partial<Record<PersonaName, number>> = {
    blocked: ROLES.maintainer,
    guest: ROLES.guest,
    reporter: ROLES.reporter,
    developer: ROLES.developer,
    maintainer: ROLES.maintainer,
    owner: ROLES.owner,
    read_api: ROLES.maintainer,
    read_user: ROLES.maintainer,
    read_repository: ROLES.maintainer,
  };
  for (const name of PERSONAS) {
    if (name === 'anonymous') {
      personas.push({ name, user: null, scopes: [], token: undefined, level: 0 });
      continue;
    }
    const user = name === 'admin' ? admin : await makeUser(app);
    const level = levels[name] ?? 0;
    for (const v of VISIBILITIES) if (level > 0) await addMember(app, { type: 'group', id: groups[v].id }, user, level);
    const scopes = name.startsWith('read_') ? [name] : ['api'];
    personas.push({ name, user, scopes, token: await makeToken(app, user, scopes), level });
  }
  const target = await makeUser(app);
  world = {
    admin,
    adminToken,
    personas,
    groups,
    projects,
    target,
    values: {},
    counter: () => {
      count += 1;
      return count;
    },
  };
  const blocked = personas.find((p) => p.name === 'blocked') as Persona;
  await adminRequest(`/users/${blocked.user?.id}/block`, 'POST');
  const maintainer = personas.find((p) => p.name === 'maintainer') as Persona;
  const tokens = await app.request('/personal_access_tokens', { token: maintainer.token });
  const impersonation = await adminRequest(`/users/${target.id}/impersonation_tokens`, 'POST', {
    name: 'imp',
    scopes: ['api'],
  });
  const tree = await app.request(`/projects/${projects.public.id}/repository/tree`, { token: adminToken });
  const blob = tree.body.find((entry: { type: string }) => entry.type === 'blob');
  const commit = await app.request(`/projects/${projects.public.id}/repository/commits/main`, { token: adminToken });
  const oauthApp = await adminRequest('/applications', 'POST', {
    name: 'matrix',
    redirect_uri: 'https://example.com/cb',
    scopes: 'api',
  });
  world.values = {
    user: String(target.id),
    token: String(tokens.body[0].id),
    impersonation_token_id: String(impersonation.id),
    application: String(oauthApp.id),
    blob: blob.id,
    file_path: blob.path,
    commit: commit.body.id,
    branch: 'main',
    tag_name: 'v1.0.0',
    format: 'zip',
    repository_storage_move_id: '999',
  };
  const member = await makeUser(app, { randomPassword: false });
  const requester = await makeUser(app, { randomPassword: false });
  world.values.member = String(member.id);
  world.values.requester = String(requester.id);
  for (const v of VISIBILITIES) {
    const project = projects[v];
    await adminRequest(`/projects/${project.id}/pages/domains`, 'POST', { domain: `${v}.matrix.example` });
    await adminRequest(`/projects/${project.id}/repository/branches`, 'POST', { branch: 'matrix', ref: 'main' });
    await adminRequest(`/projects/${project.id}/error_tracking/settings`, 'PUT', { active: true, integrated: true });
    await addMember(app, { type: 'project', id: project.id }, member, ROLES.guest);
    await addMember(app, { type: 'group', id: groups[v].id }, member, ROLES.guest);
    for (const type of ['project', 'group'] as const) {
      await freshRequester(world, v, type, requester);
    }
  }
  // The MR author: a Maintainer of every group who is none of the personas (authors may not approve).
  const author = await makeUser(app, { randomPassword: false });
  for (const v of VISIBILITIES) await addMember(app, { type: 'group', id: groups[v].id }, author, ROLES.maintainer);
  world.values.author_token = await makeToken(app, author);
  // A public group the Owner persona owns: where projects are transferred and what is shared.
  const landing = await makeGroup(app, admin, { visibility: 'public' });
  const owner = personas.find((p) => p.name === 'owner') as Persona;
  await addMember(app, { type: 'group', id: landing.id }, owner.user as User, ROLES.owner);
  world.values.landing = String(landing.id);
  for (const v of VISIBILITIES) {
    const project = projects[v].id;
    world.values[`mr:${v}`] = await freshMergeRequest(world, v);
    // The administrator may satisfy it (the merge route approves as administrator before merging).
    const rule = await adminRequest(`/projects/${project}/approval_rules`, 'POST', {
      name: 'rule',
      approvals_required: 1,
      user_ids: [admin.id],
    });
    world.values[`rule:${v}`] = String(rule.id);
    const mrRule = await adminRequest(
      `/projects/${project}/merge_requests/${world.values[`mr:${v}`]}/approval_rules`,
      'POST',
      { name: 'mr rule', approvals_required: 1 },
    );
    world.values[`mr-rule:${v}`] = String(mrRule.id);
    await freshShare(world, `/projects/${project}`).then((share) => {
      world.values.landing_share = share.group_id as string;
    });
  }
  for (const v of VISIBILITIES) {
    // A CI file on the matrix branch, and a pipeline for it.
    await adminRequest(`/projects/${projects[v].id}/repository/files/.gitlab-ci.yml`, 'POST', {
      branch: 'matrix',
      content: 'a:\n  script: [x]\nm:\n  script: [x]\n  when: manual\n',
      commit_message: 'CI',
    });
    const pipeline = await adminRequest(`/projects/${projects[v].id}/pipeline`, 'POST', { ref: 'matrix' });
    world.values[`environment:${v}`] = await freshEnvironment(world, v);
    world.values[`pipeline:${v}`] = String(pipeline.id);
    const hook = await adminRequest(`/projects/${projects[v].id}/hooks`, 'POST', { url: 'https://93.184.215.14/x' });
    world.values[`hook:${v}`] = String(hook.id);
    const protectedBranch = await app.request(`/projects/${projects[v].id}/protected_branches/main`, {
      token: adminToken,
    });
    if (protectedBranch.status === 404) {
      await adminRequest(`/projects/${projects[v].id}/protected_branches`, 'POST', { name: 'main' });
    }
  }
  for (const v of VISIBILITIES) {
    const project = projects[v].id;
    // A sibling project whose runners the group's Maintainers own, to assign to the subject.
    const home = await makeProject(app, admin, { namespace: groups[v], visibility: v });
    world.values[`home:${v}`] = String(home.id);
    // The subject's own runner runs the pipeline's job `a` to success, with a log and artifacts.
    const runner = await registerRunner(app, await registrationToken(app, adminToken, `/projects/${project}`));
    world.values[`runner:${v}`] = String(runner.id);
    const claimed = await requestJob(app, runner.token);
    if (claimed.status !== 201) throw new Error(`job request: ${claimed.status} ${claimed.text}`);
    const job = claimed.body as { id: number; token: string };
    const trace = await fetch(`${app.baseUrl}/api/v4/jobs/${job.id}/trace`, {
      method: 'PATCH',
      headers: { 'JOB-TOKEN': job.token, 'Content-Range': '0-4' },
      body: 'hello',
    });
    if (trace.status !== 202) throw new Error(`trace: ${trace.status}`);
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array([0x50, 0x4b, 0x05, 0x06, ...new Array(18).fill(0)])]), 'a.zip');
    const upload = await fetch(`${app.baseUrl}/api/v4/jobs/${job.id}/artifacts`, {
      method: 'POST',
      headers: { 'JOB-TOKEN': job.token },
      body: form,
    });
    if (upload.status !== 201) throw new Error(`artifacts: ${upload.status} ${await upload.text()}`);
    const done = await app.request(`/jobs/${job.id}`, { method: 'PUT', body: { token: job.token, state: 'success' } });
    if (done.status !== 200) throw new Error(`job update: ${done.status} ${done.text}`);
    world.values[`job:${v}`] = String(job.id);
    world.values[`deployment:${v}`] = await freshDeployment(world, v, 'production', 'success');
    const redmine = INTEGRATION_KINDS.get('redmine') as IntegrationKind;
    await adminRequest(`/projects/${project}/integrations/redmine`, 'PUT', integrationBody(redmine));
  }
  world.values.runner = world.values['runner:private'] as string;
  // An LDAP-synced membership, which Owners may override (EE members.rb override).
  await app.deps.db
    .updateTable('members')
    .set({ ldap: true })
    .where('user_id', '=', member.id)
    .where('source_type', '=', 'group')
    .execute();
  const key = await adminRequest(`/projects/${projects.public.id}/error_tracking/client_keys`, 'POST');
  world.values.sentry_key = key.public_key;
}, 120_000);

afterAll(async () => {
  await app?.close();
});

/** The path of a request, its parameters filled for the subject of `visibility`. */
function fill(op: Operation, rule: Rule, visibility: Visibility, fresh: Values): string {
  const relative = op.path.slice(API_PREFIX.length);
  const resource = relative.split('/')[1] ?? '';
  const w = world;
  return relative.replace(/:([a-z_]+)/g, (_, name: string) => {
    const value = fresh[name];
    if (value !== undefined) return encodeURIComponent(value);
    if (name === 'id') {
      if (rule.on === 'project' || resource === 'projects') return String(w.projects[visibility].id);
      if (rule.on === 'group' || resource === 'groups' || resource === 'namespaces')
        return String(w.groups[visibility].id);
      const byResource: Record<string, string | undefined> = {
        users: w.values.user,
        personal_access_tokens: w.values.token,
        applications: w.values.application,
      };
      return byResource[resource] ?? '1';
    }
    if (name === 'user_id') {
      if (rule.on === 'none') return w.values.user as string;
      // A direct member of the subject, or on access request routes a user waiting for access.
      return (relative.includes('/access_requests/') ? w.values.requester : w.values.member) as string;
    }
    if (name === 'sha') return (op.path.includes('/blobs/') ? w.values.blob : w.values.commit) as string;
    if (name === 'domain') return `${visibility}.matrix.example`;
    if (name === 'merge_request_iid') return w.values[`mr:${visibility}`] as string;
    if (name === 'approval_rule_id') {
      const kind = relative.includes('/merge_requests/') ? 'mr-rule' : 'rule';
      return w.values[`${kind}:${visibility}`] as string;
    }
    if (name === 'group_id') return w.values.landing as string;
    if (name === 'name') return 'main';
    if (name === 'hook_id') return w.values[`hook:${visibility}`] as string;
    if (name === 'trigger') return 'push_events';
    if (name === 'slug') return 'redmine';
    if (name === 'pipeline_id') return w.values[`pipeline:${visibility}`] as string;
    if (name === 'environment_id') return w.values[`environment:${visibility}`] as string;
    return encodeURIComponent(w.values[name] ?? '1');
  });
}

describe('authorization matrix', () => {
  it('answers every route for every persona on public, internal and private subjects as GitLab does', async () => {
    const api = new ApiRouter(API_PREFIX);
    for (const register of API_MODULES) register(api);
    const missing = api.operations
      .map((op) => `${op.method} ${op.path.slice(API_PREFIX.length)}`)
      .filter((key) => !ruleFor(key));
    expect(missing, 'routes without a rule in the authorization matrix').toEqual([]);

    const mismatches: string[] = [];
    let checked = 0;
    for (const op of api.operations) {
      const key = `${op.method} ${op.path.slice(API_PREFIX.length)}`;
      const rule = ruleFor(key) as Rule;
      const visibilities = rule.on === 'none' ? (['public'] as Visibility[]) : (rule.visibilities ?? VISIBILITIES);
      for (const visibility of visibilities) {
        for (const persona of world.personas) {
          const want = expected(op, rule, persona, visibility);
          // Only a call that should succeed consumes its target; the others meet the shared one.
          const fresh = {
            ...rule.values?.(world, visibility),
            ...(rule.fresh && want === 'ok' ? await rule.fresh(world, visibility) : {}),
          };
          const path = fill(op, rule, visibility, fresh);
          let token = persona.token;
          if (rule.ownToken && persona.user && persona.name !== 'blocked') {
            token = await makeToken(app, persona.user, persona.scopes);
          }
          const raw = rule.raw?.();
          const res = await app.request(path, {
            headers: raw ? { 'Content-Type': raw.type } : undefined,
            method: op.method.toUpperCase(),
            token,
            body: raw ? new Blob([raw.body]) : rule.body ? rule.body(world.counter(), fresh) : undefined,
            query: path.includes('/collector/') ? { sentry_key: world.values.sentry_key as string } : rule.query,
          });
          checked += 1;
          const ok =
            want === 'ok'
              ? rule.allowed !== undefined
                ? res.status === rule.allowed
                : res.status >= 200 && res.status < 300
              : res.status === want;
          if (!ok) {
            mismatches.push(
              `${key} [${visibility}] ${persona.name}: want ${want}, got ${res.status} ${res.text.slice(0, 120)}`,
            );
          }
        }
      }
    }
    // GitLab checks administrators before the parameters (before { authenticated_as_admin! }),
    // and so do the `before { authorize_admin_project }` blocks of other routes: a
    // non-administrator (a Developer there) with no or broken parameters still gets 403, and
    // learns nothing of them.
    const developer = world.personas.find((p) => p.name === 'developer') as Persona;
    let broken = 0;
    for (const op of api.operations) {
      const key = `${op.method} ${op.path.slice(API_PREFIX.length)}`;
      const rule = ruleFor(key) as Rule;
      if ((rule.min !== 'admin' && !rule.beforeParams) || ADMIN_IN_ENDPOINT.has(key)) continue;
      const path = `${fill(op, rule, 'public', rule.values?.(world, 'public') ?? {})}?per_page=nope&page=-1`;
      const res = await app.request(path, {
        method: op.method.toUpperCase(),
        token: developer.token,
        body:
          op.method === 'get' || op.method === 'delete'
            ? undefined
            : { bogus: { nested: ['x'] }, runner_id: 'nope', active: 'nope', push_events: 'nope' },
      });
      checked += 1;
      broken += 1;
      if (res.status !== 403)
        mismatches.push(`${key} non-admin with bad parameters: want 403, got ${res.status} ${res.text.slice(0, 120)}`);
    }
    console.info(
      `authorization matrix: ${api.operations.length} routes × ${PERSONAS.length} personas on public, internal ` +
        `and private subjects, ${checked} requests checked (${broken} with broken parameters)`,
    );
    expect(mismatches, mismatches.join('\n')).toEqual([]);
    expect(checked).toBeGreaterThan(1000);
  }, 600_000);
});
