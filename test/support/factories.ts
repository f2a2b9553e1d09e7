import fs from 'node:fs/promises';
import { expect, inject } from 'vitest';
import { insertMember } from '../../src/db/queries/members.js';
import { findUserNamespace } from '../../src/db/queries/namespaces.js';
import type { MemberSource, Namespace, Project, User, Visibility } from '../../src/db/schema.js';
import { createGroup } from '../../src/services/groups.js';
import { type CreateProjectInput, createProject } from '../../src/services/projects.js';
import { createPersonalAccessToken } from '../../src/services/tokens.js';
import { type CreateUserInput, createUser } from '../../src/services/users.js';
import type { TestApp } from './app.js';

let sequence = 0;
const next = () => {
  sequence += 1;
  return `${process.pid.toString(36)}${sequence}`;
};

/** A user with a unique username; no password unless given (scrypt is slow on purpose). */
export async function makeUser(app: TestApp, overrides: Partial<CreateUserInput> = {}): Promise<User> {
  const n = next();
  return createUser(
    app.deps,
    { username: `user${n}`, email: `user${n}@example.com`, name: `User ${n}`, randomPassword: true, ...overrides },
    null,
  );
}

export async function makeAdmin(app: TestApp, overrides: Partial<CreateUserInput> = {}): Promise<User> {
  return makeUser(app, { admin: true, ...overrides });
}

/** A personal access token's plaintext for `user`. */
export async function makeToken(
  app: TestApp,
  user: User,
  scopes: string[] = ['api'],
  extra: { expiresAt?: string | null; name?: string } = {},
): Promise<string> {
  const { plaintext } = await createPersonalAccessToken(app.deps, user, {
    name: extra.name ?? 'test token',
    scopes,
    expiresAt: extra.expiresAt ?? null,
  });
  return plaintext;
}

/** A user and a token for them, in one step. */
export async function makeUserWithToken(app: TestApp, overrides: Partial<CreateUserInput> = {}, scopes = ['api']) {
  const user = await makeUser(app, overrides);
  return { user, token: await makeToken(app, user, scopes) };
}

export async function makeGroup(
  app: TestApp,
  owner: User,
  options: { visibility?: Visibility; parent?: Namespace; path?: string } = {},
): Promise<Namespace> {
  const path = options.path ?? `group${next()}`;
  return createGroup(
    app.deps,
    owner,
    { name: path, path, visibility: options.visibility ?? 'private' },
    options.parent ?? null,
  );
}

export async function makeProject(
  app: TestApp,
  creator: User,
  options: Partial<CreateProjectInput> & { namespace?: Namespace } = {},
): Promise<Project> {
  const namespace = options.namespace ?? (await findUserNamespace(app.deps.db, creator.id));
  if (!namespace) throw new Error('no namespace');
  const path = options.path ?? `project${next()}`;
  return createProject(app.deps, creator, { name: path, path, visibility: 'private', ...options }, namespace);
}

/**
 * A project whose repository is a copy of the fixture repository (fixtures/sample-repo.ts);
 * `inject('sampleCommits')` names its commits. Public unless told otherwise.
 */
export async function makeSampleProject(
  app: TestApp,
  creator: User,
  options: Partial<CreateProjectInput> & { namespace?: Namespace } = {},
): Promise<{ project: Project; gitDir: string }> {
  const project = await makeProject(app, creator, { visibility: 'public', ...options });
  const gitDir = app.deps.storages.repositoryPath(project.repository_storage, project.id);
  await fs.rm(gitDir, { recursive: true, force: true });
  await fs.cp(inject('sampleRepository'), gitDir, { recursive: true });
  return { project, gitDir };
}

export async function addMember(
  app: TestApp,
  source: { type: MemberSource; id: number },
  user: User,
  accessLevel: number,
  expiresAt: string | null = null,
): Promise<void> {
  const now = app.deps.clock.now();
  await insertMember(app.deps.db, {
    source_type: source.type,
    source_id: source.id,
    user_id: user.id,
    access_level: accessLevel,
    expires_at: expiresAt,
    created_at: now,
    updated_at: now,
  });
}

export const ROLES = {
  guest: 10,
  reporter: 20,
  developer: 30,
  maintainer: 40,
  owner: 50,
} as const;
export type Role = keyof typeof ROLES;

/** A new user with `role` on a project, and a personal access token of theirs with `scopes`. */
export async function makeProjectMember(
  app: TestApp,
  project: { id: number },
  role: Role,
  scopes = ['api'],
): Promise<{ user: User; token: string }> {
  const user = await makeUser(app);
  await addMember(app, { type: 'project', id: project.id }, user, ROLES[role]);
  return { user, token: await makeToken(app, user, scopes) };
}

export interface Persona {
  name: 'anonymous' | 'non-member' | Role | 'admin';
  user: User | null;
  token: string | undefined;
}

type Member = Persona & { name: Role; user: User; token: string };

/** One new member per role (with a token), in order; projects have no owners. */
export async function makeMembers(
  app: TestApp,
  source: { type: MemberSource; id: number },
  roles: Role[],
): Promise<Member[]> {
  const members: Member[] = [];
  for (const role of roles) {
    if (role === 'owner' && source.type === 'project') continue;
    const member = await makeUserWithToken(app);
    await addMember(app, source, member.user, ROLES[role]);
    members.push({ name: role, ...member });
  }
  return members;
}

/**
 * One user per persona for a subject: anonymous, a signed-in non-member, one member per role
 * (on the project, or on the group for groups) and an administrator.
 */
export async function makePersonas(
  app: TestApp,
  source: { type: MemberSource; id: number },
  roles: Role[] = ['guest', 'reporter', 'developer', 'maintainer', 'owner'],
): Promise<Persona[]> {
  const personas: Persona[] = [{ name: 'anonymous', user: null, token: undefined }];
  const outsider = await makeUserWithToken(app);
  personas.push({ name: 'non-member', ...outsider });
  personas.push(...(await makeMembers(app, source, roles)));
  const admin = await makeUserWithToken(app, { admin: true });
  personas.push({ name: 'admin', ...admin });
  return personas;
}

/** Changes application settings as an administrator; anything but 200 fails the test. */
export async function putSettings(app: TestApp, adminToken: string, body: Record<string, unknown>) {
  const res = await app.request('/application/settings', { method: 'PUT', token: adminToken, body });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

/** Every application setting back to its default (the instance's own row stays). */
export async function resetSettings(app: TestApp): Promise<void> {
  await app.deps.db.deleteFrom('application_settings').where('key', '<>', 'instance').execute();
}
