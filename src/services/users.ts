import { sql } from 'kysely';
import { type Db, pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import {
  findNamespaceByFullPath,
  findUserNamespace,
  insertNamespace,
  updateNamespace,
} from '../db/queries/namespaces.js';
import {
  findUserByEmail,
  findUserByIdOrUsername,
  findUserByUsername,
  insertUser,
  updateUser,
} from '../db/queries/users.js';
import type { NewUser, User, UserUpdate } from '../db/schema.js';
import { conflict, notFound } from '../http/errors.js';
import { hashPassword, randomPassword } from '../lib/crypto.js';
import { getApplicationSettings } from './application-settings.js';
import type { Deps } from './deps.js';
import { Validation } from './errors.js';
import { EMAIL_FORMAT, isReservedTopLevel, isValidPath, PATH_FORMAT_MESSAGE } from './paths.js';

export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 128;

/** Profile fields any of the user endpoints may set. */
export interface UserProfile {
  name?: string;
  bio?: string;
  location?: string;
  public_email?: string | null;
  website_url?: string;
  organization?: string;
  job_title?: string;
  pronouns?: string | null;
  linkedin?: string;
  twitter?: string;
  discord?: string;
  skype?: string;
  note?: string | null;
  private_profile?: boolean;
  theme_id?: number;
  color_scheme_id?: number;
}

/** Fields only administrators set. */
export interface UserAdminFields {
  admin?: boolean;
  can_create_group?: boolean;
  projects_limit?: number;
  external?: boolean;
}

export interface CreateUserInput extends UserProfile, UserAdminFields {
  username: string;
  email: string;
  name: string;
  /** Omitted with `randomPassword` for accounts that sign in another way. */
  password?: string;
  randomPassword?: boolean;
  skipConfirmation?: boolean;
  bot?: boolean;
  /** `blocked_pending_approval` for a sign-up that awaits an administrator; active otherwise. */
  state?: 'active' | 'blocked_pending_approval';
}

export interface UpdateUserInput extends UserProfile, UserAdminFields {
  username?: string;
  email?: string;
  password?: string;
}

function checkPassword(v: Validation, password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH) {
    v.add('password', `is too short (minimum is ${MIN_PASSWORD_LENGTH} characters)`);
  } else if (password.length > MAX_PASSWORD_LENGTH) {
    v.add('password', `is too long (maximum is ${MAX_PASSWORD_LENGTH} characters)`);
  }
}

function checkUsername(v: Validation, username: string): void {
  if (!isValidPath(username)) v.add('username', PATH_FORMAT_MESSAGE);
  else if (isReservedTopLevel(username)) v.add('username', `${username} is a reserved name`);
}

function checkProfile(v: Validation, input: UserProfile & { email?: string }): void {
  if (input.name !== undefined) {
    if (input.name.trim() === '') v.add('name', "can't be blank");
    else if (input.name.length > 255) v.add('name', 'is too long (maximum is 255 characters)');
  }
  if (input.email !== undefined && !EMAIL_FORMAT.test(input.email)) v.add('email', 'is invalid');
  if (input.public_email && !EMAIL_FORMAT.test(input.public_email)) v.add('public_email', 'is invalid');
  if (input.website_url !== undefined && input.website_url !== '' && !/^https?:\/\/\S+$/i.test(input.website_url)) {
    v.add('website_url', 'is not a valid URL');
  }
  if (input.bio !== undefined && input.bio.length > 255) v.add('bio', 'is too long (maximum is 255 characters)');
}

/** Username and email must be free among users (and the username among namespaces). */
async function checkTaken(db: Db, username: string | undefined, email: string | undefined, selfId?: number) {
  if (email !== undefined) {
    const other = await findUserByEmail(db, email);
    if (other && other.id !== selfId) throw conflict('Email has already been taken');
  }
  if (username !== undefined) {
    const other = await findUserByUsername(db, username);
    if (other && other.id !== selfId) throw conflict('Username has already been taken');
    const ns = await findNamespaceByFullPath(db, username);
    if (ns && !(ns.kind === 'user' && ns.owner_id === selfId)) throw conflict('Username has already been taken');
  }
}

/** Creates a user with their personal namespace. Duplicate username or email → 409. */
export async function createUser(deps: Deps, input: CreateUserInput, createdBy: User | null): Promise<User> {
  const v = new Validation();
  checkUsername(v, input.username);
  checkProfile(v, input);
  if (input.password !== undefined) checkPassword(v, input.password);
  // GitLab answers 409 for a taken email (then username) before any other validation error.
  await checkTaken(deps.db, input.username, input.email);
  v.throwIfAny();
  const password = input.password ?? (input.randomPassword ? randomPassword() : undefined);
  const digest = password === undefined ? null : await hashPassword(password);
  const now = deps.clock.now();
  // A new user's limit is the instance's `default_projects_limit` unless one is given.
  const projectsLimit =
    input.projects_limit ?? ((await getApplicationSettings(deps)).values.default_projects_limit as number);
  const values: NewUser = {
    ...profileColumns(input),
    ...adminColumns(input),
    projects_limit: projectsLimit,
    username: input.username,
    email: input.email,
    name: input.name,
    password_digest: digest,
    bot: input.bot ?? false,
    ...(input.state ? { state: input.state } : {}),
    created_by_id: createdBy?.id ?? null,
    confirmed_at: input.skipConfirmation === false ? null : now,
    created_at: now,
    updated_at: now,
  };
  try {
    return await deps.db.transaction().execute(async (tx) => {
      const user = await insertUser(tx, values);
      await insertNamespace(
        tx,
        {
          kind: 'user',
          name: user.name,
          path: user.username,
          full_path: user.username,
          parent_id: null,
          owner_id: user.id,
          visibility: 'public',
          created_at: now,
          updated_at: now,
        },
        [],
      );
      return user;
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) {
      // Lost a race with a concurrent create of the same username or email.
      await checkTaken(deps.db, input.username, input.email);
      throw conflict('Username has already been taken');
    }
    throw error;
  }
}

/** Updates a user; renaming moves their namespace path too. */
export async function updateUserProfile(deps: Deps, user: User, input: UpdateUserInput): Promise<User> {
  const v = new Validation();
  if (input.username !== undefined) checkUsername(v, input.username);
  checkProfile(v, input);
  if (input.password !== undefined) checkPassword(v, input.password);
  await checkTaken(deps.db, input.username, input.email, user.id);
  v.throwIfAny();
  const now = deps.clock.now();
  const changes: UserUpdate = { ...profileColumns(input), ...adminColumns(input), updated_at: now };
  if (input.username !== undefined) changes.username = input.username;
  if (input.email !== undefined) changes.email = input.email;
  if (input.password !== undefined) changes.password_digest = await hashPassword(input.password);
  return deps.db.transaction().execute(async (tx) => {
    const updated = (await updateUser(tx, user.id, changes)) as User;
    if (input.username !== undefined && input.username !== user.username) {
      const ns = await findUserNamespace(tx, user.id);
      if (ns) {
        await updateNamespace(tx, ns.id, { path: updated.username, full_path: updated.username, updated_at: now });
        await sql`UPDATE projects SET full_path = ${updated.username} || substr(full_path, ${ns.full_path.length + 1})
          WHERE namespace_id = ${ns.id}`.execute(tx);
      }
    }
    if (input.name !== undefined) {
      const ns = await findUserNamespace(tx, user.id);
      if (ns) await updateNamespace(tx, ns.id, { name: updated.name, updated_at: now });
    }
    return updated;
  });
}

function profileColumns(input: UserProfile): UserUpdate {
  const out: UserUpdate = {};
  const keys: (keyof UserProfile)[] = [
    'name',
    'bio',
    'location',
    'public_email',
    'website_url',
    'organization',
    'job_title',
    'pronouns',
    'linkedin',
    'twitter',
    'discord',
    'skype',
    'note',
    'private_profile',
    'theme_id',
    'color_scheme_id',
  ];
  for (const key of keys) {
    if (input[key] !== undefined) (out as Record<string, unknown>)[key] = input[key];
  }
  return out;
}

function adminColumns(input: UserAdminFields): UserUpdate {
  const out: UserUpdate = {};
  if (input.admin !== undefined) out.admin = input.admin;
  if (input.can_create_group !== undefined) out.can_create_group = input.can_create_group;
  if (input.projects_limit !== undefined) out.projects_limit = input.projects_limit;
  if (input.external !== undefined) out.external = input.external;
  return out;
}

/** The user named by `/users/:id`, or 404 `User Not Found`. */
export async function requireUser(db: Db, identifier: string): Promise<User> {
  const user = await findUserByIdOrUsername(db, identifier);
  // A user whose deletion is under way answers as if already gone.
  if (!user || user.deleting_at !== null) throw notFound('User');
  return user;
}
