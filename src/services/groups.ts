import type { Updateable } from 'kysely';
import { pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import { deleteMembersOfSources, insertMember } from '../db/queries/members.js';
import {
  findNamespaceByFullPath,
  findNamespaceById,
  insertNamespace,
  renameDescendantPaths,
  siblingNameTaken,
  subtreeIds,
  updateNamespace,
} from '../db/queries/namespaces.js';
import {
  deleteProject as deleteProjectRows,
  findProjectByFullPath,
  projectsInSubtree,
} from '../db/queries/projects.js';
import type { Namespace, NamespacesTable, User, Visibility } from '../db/schema.js';
import { removeRepository } from '../git/repository.js';
import { isValidBranchName } from '../git/validate.js';
import { purgeCachedArchivesLater } from '../jobs/archive-cache.js';
import { purgeProjectEventsLater } from '../jobs/events.js';
import { toDbId } from '../lib/ids.js';
import {
  AccessLevel,
  PROJECT_CREATION_LEVEL_NAMES,
  PROJECT_CREATION_LEVELS,
  SUBGROUP_CREATION_LEVELS,
} from '../policies/access-levels.js';
import { getApplicationSettings } from './application-settings.js';
import { cachedLookup, type Deps } from './deps.js';
import { Validation } from './errors.js';
import { GROUP_NAME_MESSAGE, isReservedChild, isReservedTopLevel, isValidGroupName } from './paths.js';
import { cappedBy, fitsWithin, restrictedVisibilityMessage, visibilityAllowedFor } from './visibility.js';

export interface GroupInput {
  name?: string;
  path?: string;
  description?: string;
  visibility?: Visibility;
  request_access_enabled?: boolean;
  project_creation_level?: string;
  subgroup_creation_level?: string;
  lfs_enabled?: boolean;
  share_with_group_lock?: boolean;
  require_two_factor_authentication?: boolean;
  two_factor_grace_period?: number;
  emails_enabled?: boolean;
  mentions_disabled?: boolean;
  default_branch?: string | null;
}

/** Looks up a group by numeric id or full path. */
export async function findGroup(deps: Deps, id: string): Promise<Namespace | undefined> {
  let ns: Namespace | undefined;
  if (/^-?\d+$/.test(id)) {
    const dbId = toDbId(id);
    ns =
      dbId === null
        ? undefined
        : await cachedLookup(deps, 'namespace', `#${dbId}`, () => findNamespaceById(deps.db, dbId));
  } else {
    ns = await cachedLookup(deps, 'namespace', id.toLowerCase(), () => findNamespaceByFullPath(deps.db, id));
  }
  return ns?.kind === 'group' ? ns : undefined;
}

/** Looks up any namespace (user or group) by numeric id or full path. */
export async function findNamespace(deps: Deps, id: string): Promise<Namespace | undefined> {
  if (/^-?\d+$/.test(id)) {
    const dbId = toDbId(id);
    return dbId === null ? undefined : findNamespaceById(deps.db, dbId);
  }
  return findNamespaceByFullPath(deps.db, id);
}

/** GitLab's oci_repository_path_regex: alphanumeric runs joined by single `.`, `_` or `-`. */
const GROUP_PATH_OCI = /^[a-zA-Z0-9]+([._-][a-zA-Z0-9]+)*$/;
const GROUP_PATH_OCI_MESSAGE =
  "can only include non-accented letters, digits, '_', '-' and '.'. It must not start with '-', '_', or '.', nor end with '-', '_', '.', '.git', or '.atom'.";
/** GitLab's namespace_format_regex (PathRegex::NAMESPACE_FORMAT_REGEX) and its message. */
const NAMESPACE_FORMAT = /^(?:[a-zA-Z0-9_.][a-zA-Z0-9_.-]{0,254}[a-zA-Z0-9_-]|[a-zA-Z0-9_])$/;
const NAMESPACE_FORMAT_MESSAGE =
  "can contain only letters, digits, '_', '-' and '.'. Cannot start with '-' or end in '.', '.git' or '.atom'.";
/** Namespace length limits (app/models/namespace.rb). */
const NAME_MAX_CHARS = 255;
const PATH_MAX_CHARS = 255;
const PATH_MIN_CHARS = 2;
const DESCRIPTION_MAX_CHARS = 255;
/** Namespace::NUMBER_OF_ANCESTORS_ALLOWED: how deep groups may nest. */
const MAX_ANCESTORS = 20;

/** The largest value an `integer` column holds. */
const MAX_INT4 = 2147483647;

const charLength = (text: string) => [...text].length;

/**
 * Model validations of a group being created (`self` null) or updated, in the order GitLab's
 * Namespace and Group models run them, so the errors hash lists fields as GitLab does.
 */
async function checkGroupFields(
  deps: Deps,
  v: Validation,
  input: GroupInput,
  parent: Namespace | null,
  self: Namespace | null,
): Promise<void> {
  const name = input.name;
  if (name !== undefined) {
    if (name.trim() === '') v.add('name', "can't be blank");
    if (charLength(name) > NAME_MAX_CHARS) v.add('name', `is too long (maximum is ${NAME_MAX_CHARS} characters)`);
    if (parent && name !== self?.name && (await siblingNameTaken(deps.db, parent.id, name, self?.id ?? null))) {
      v.add('name', 'has already been taken');
    }
  }
  const path = input.path;
  const pathChanged = path !== undefined && path !== self?.path;
  if (path !== undefined && pathChanged) {
    if (path === '') v.add('path', "can't be blank");
    if (charLength(path) > PATH_MAX_CHARS) v.add('path', `is too long (maximum is ${PATH_MAX_CHARS} characters)`);
    if (!GROUP_PATH_OCI.test(path)) v.add('path', GROUP_PATH_OCI_MESSAGE);
    if (!NAMESPACE_FORMAT.test(path) || /\.(git|atom)$/i.test(path)) v.add('path', NAMESPACE_FORMAT_MESSAGE);
    else if (parent === null ? isReservedTopLevel(path) : isReservedChild(path))
      v.add('path', `${path} is a reserved name`);
    if (charLength(path) < PATH_MIN_CHARS) {
      v.add('path', `is too short (minimum is ${PATH_MIN_CHARS} characters)`);
    }
  }
  // The new group's ancestors are its parent's traversal ids.
  if (self === null && parent && parent.traversal_ids.length > MAX_ANCESTORS) {
    v.add('parent_id', 'has too deep level of nesting');
  }
  if (input.description !== undefined && charLength(input.description) > DESCRIPTION_MAX_CHARS) {
    v.add('description', `is too long (maximum is ${DESCRIPTION_MAX_CHARS} characters)`);
  }
  const visibility = input.visibility ?? self?.visibility ?? 'private';
  if (self && input.visibility !== undefined) {
    if (await hasMoreVisibleProjects(deps, self, visibility)) {
      v.add(
        'visibility_level',
        `${visibility} is not allowed since this group contains projects with higher visibility.`,
      );
    }
    if (await hasMoreVisibleSubgroups(deps, self, visibility)) {
      v.add('visibility_level', `${visibility} is not allowed since there are sub-groups with higher visibility.`);
    }
  }
  if (parent && !fitsWithin(visibility, parent.visibility)) {
    v.add(
      'visibility_level',
      `${visibility} is not allowed since the parent group has a ${parent.visibility} visibility.`,
    );
  }
  // Group's own name format check runs after the Namespace validations (over-long names: length only).
  if (name !== undefined && name !== self?.name && charLength(name) <= NAME_MAX_CHARS && !isValidGroupName(name)) {
    v.add('name', GROUP_NAME_MESSAGE);
  }
  if (input.project_creation_level !== undefined && !(input.project_creation_level in PROJECT_CREATION_LEVELS)) {
    v.add('project_creation_level', 'is not included in the list');
  }
  if (input.subgroup_creation_level !== undefined && !(input.subgroup_creation_level in SUBGROUP_CREATION_LEVELS)) {
    v.add('subgroup_creation_level', 'is not included in the list');
  }
  if (input.two_factor_grace_period !== undefined && input.two_factor_grace_period < 0) {
    v.add('two_factor_grace_period', 'must be greater than or equal to 0');
  }
  if (input.two_factor_grace_period !== undefined && input.two_factor_grace_period > MAX_INT4) {
    v.add('two_factor_grace_period', `must be less than or equal to ${MAX_INT4}`);
  }
  if (input.default_branch && !isValidBranchName(input.default_branch)) v.add('default_branch', 'is invalid');
  // Routes are unique across groups, users and projects; GitLab reports a taken route on `path`.
  if (path !== undefined && pathChanged && v.empty) {
    const fullPath = parent ? `${parent.full_path}/${path}` : path;
    const taken = await findNamespaceByFullPath(deps.db, fullPath);
    if ((taken && taken.id !== self?.id) || (await findProjectByFullPath(deps.db, fullPath))) {
      v.add('path', 'has already been taken');
    }
  }
}

/** Levels at or below `visibility`, for the checks against children. */
const levelsUpTo = (visibility: Visibility): Visibility[] =>
  visibility === 'private'
    ? ['private']
    : visibility === 'internal'
      ? ['private', 'internal']
      : ['private', 'internal', 'public'];

async function hasMoreVisibleProjects(deps: Deps, group: Namespace, visibility: Visibility): Promise<boolean> {
  const row = await deps.db
    .selectFrom('projects')
    .select('id')
    .where('namespace_id', '=', group.id)
    .where('visibility', 'not in', levelsUpTo(visibility))
    .executeTakeFirst();
  return row !== undefined;
}

async function hasMoreVisibleSubgroups(deps: Deps, group: Namespace, visibility: Visibility): Promise<boolean> {
  const row = await deps.db
    .selectFrom('namespaces')
    .select('id')
    .where('parent_id', '=', group.id)
    .where('visibility', 'not in', levelsUpTo(visibility))
    .executeTakeFirst();
  return row !== undefined;
}

/** Creates a group (or a subgroup of `parent`); the creator becomes its Owner. */
export async function createGroup(
  deps: Deps,
  user: User,
  input: GroupInput & { name: string; path: string },
  parent: Namespace | null,
) {
  const settings = (await getApplicationSettings(deps)).values;
  // Without a visibility the instance default applies (not the parent's), lowered to what the
  // parent allows.
  const defaultVisibility = settings.default_group_visibility as Visibility;
  const visibility = input.visibility ?? (parent ? cappedBy(defaultVisibility, parent.visibility) : defaultVisibility);
  // GitLab's create service refuses a restricted level before the model validates anything else.
  if (!visibilityAllowedFor(user, visibility, settings.restricted_visibility_levels as string[])) {
    new Validation().add('visibility_level', restrictedVisibilityMessage(visibility)).throwIfAny();
  }
  const v = new Validation();
  await checkGroupFields(deps, v, { ...input, visibility }, parent, null);
  v.throwIfAny();
  const projectCreationLevel =
    input.project_creation_level ?? PROJECT_CREATION_LEVEL_NAMES[settings.default_project_creation as number];
  const now = deps.clock.now();
  try {
    return await deps.db.transaction().execute(async (tx) => {
      const group = await insertNamespace(
        tx,
        {
          ...columns(input),
          ...(projectCreationLevel !== undefined ? { project_creation_level: projectCreationLevel } : {}),
          kind: 'group',
          name: input.name,
          path: input.path,
          full_path: parent ? `${parent.full_path}/${input.path}` : input.path,
          parent_id: parent?.id ?? null,
          owner_id: null,
          visibility,
          created_at: now,
          updated_at: now,
        },
        parent?.traversal_ids ?? [],
      );
      await insertMember(tx, {
        source_type: 'group',
        source_id: group.id,
        user_id: user.id,
        access_level: AccessLevel.OWNER,
        created_by_id: user.id,
        created_at: now,
        updated_at: now,
      });
      return group;
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) new Validation().add('path', 'has already been taken').throwIfAny();
    throw error;
  }
}

function columns(input: GroupInput): Updateable<NamespacesTable> {
  const out: Updateable<NamespacesTable> = {};
  const keys = [
    'description',
    'request_access_enabled',
    'project_creation_level',
    'subgroup_creation_level',
    'lfs_enabled',
    'share_with_group_lock',
    'require_two_factor_authentication',
    'two_factor_grace_period',
    'emails_enabled',
    'mentions_disabled',
    'default_branch',
  ] as const;
  for (const key of keys) if (input[key] !== undefined) (out as Record<string, unknown>)[key] = input[key];
  return out;
}

/** Updates a group; a new path moves the full paths of everything below it. */
export async function updateGroup(
  deps: Deps,
  group: Namespace,
  input: GroupInput,
  actor: Pick<User, 'admin'>,
): Promise<Namespace> {
  // GitLab's valid_visibility_level_change?: only a change to a restricted level is refused.
  if (input.visibility !== undefined && input.visibility !== group.visibility) {
    const restricted = (await getApplicationSettings(deps)).values.restricted_visibility_levels as string[];
    if (!visibilityAllowedFor(actor, input.visibility, restricted)) {
      new Validation().add('visibility_level', restrictedVisibilityMessage(input.visibility)).throwIfAny();
    }
  }
  const parent = group.parent_id ? ((await findNamespaceById(deps.db, group.parent_id)) ?? null) : null;
  const v = new Validation();
  await checkGroupFields(deps, v, input, parent, group);
  v.throwIfAny();
  const changes: Updateable<NamespacesTable> = { ...columns(input), updated_at: deps.clock.now() };
  if (input.name !== undefined) changes.name = input.name;
  if (input.visibility !== undefined) changes.visibility = input.visibility;
  const newFullPath =
    input.path !== undefined ? (parent ? `${parent.full_path}/${input.path}` : input.path) : group.full_path;
  if (input.path !== undefined) {
    changes.path = input.path;
    changes.full_path = newFullPath;
  }
  try {
    return await deps.db.transaction().execute(async (tx) => {
      const updated = (await updateNamespace(tx, group.id, changes)) as Namespace;
      if (newFullPath !== group.full_path) await renameDescendantPaths(tx, group.id, group.full_path, newFullPath);
      return updated;
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) new Validation().add('path', 'has already been taken').throwIfAny();
    throw error;
  }
}

/**
 * Deletes a group with its subgroups and their projects: the rows in one transaction (each
 * project the way a project deletion removes it), then the repositories on disk.
 */
export async function deleteGroup(deps: Deps, group: Namespace): Promise<void> {
  const projects = await projectsInSubtree(deps.db, group.id);
  const namespaceIds = await subtreeIds(deps.db, group.id);
  await deps.db.transaction().execute(async (tx) => {
    for (const project of projects) await deleteProjectRows(tx, project.id);
    await purgeCachedArchivesLater(
      tx,
      projects.map((project) => project.id),
    );
    await purgeProjectEventsLater(
      tx,
      projects.map((project) => project.id),
    );
    await deleteMembersOfSources(tx, 'group', namespaceIds);
    // One statement: the database checks the parent_id references once it has removed them all.
    await tx.deleteFrom('namespaces').where('id', 'in', namespaceIds).execute();
  });
  for (const project of projects) {
    await removeRepository(deps.storages.repositoryPath(project.repository_storage, project.id));
  }
}
