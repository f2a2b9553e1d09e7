import { sql, type Updateable } from 'kysely';
import { pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import { deleteMembersOfSources, insertMember } from '../db/queries/members.js';
import {
  findNamespaceByFullPath,
  findNamespaceById,
  insertNamespace,
  renameDescendantPaths,
  subtreeIds,
  updateNamespace,
} from '../db/queries/namespaces.js';
import { findProjectByFullPath, projectsInSubtree } from '../db/queries/projects.js';
import type { Namespace, NamespacesTable, User, Visibility } from '../db/schema.js';
import { removeRepository } from '../git/repository.js';
import { isValidBranchName } from '../git/validate.js';
import { toDbId } from '../lib/ids.js';
import { AccessLevel, PROJECT_CREATION_LEVELS, SUBGROUP_CREATION_LEVELS } from '../policies/access-levels.js';
import type { Deps } from './deps.js';
import { Validation } from './errors.js';
import {
  GROUP_NAME_MESSAGE,
  isReservedChild,
  isReservedTopLevel,
  isValidGroupName,
  isValidPath,
  PATH_FORMAT_MESSAGE,
} from './paths.js';
import { fitsWithin } from './visibility.js';

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
    ns = dbId === null ? undefined : await findNamespaceById(deps.db, dbId);
  } else {
    ns = await findNamespaceByFullPath(deps.db, id);
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

async function checkGroupFields(
  deps: Deps,
  v: Validation,
  input: GroupInput,
  parent: Namespace | null,
  self: Namespace | null,
): Promise<void> {
  if (input.name !== undefined) {
    if (input.name.trim() === '') v.add('name', "can't be blank");
    else if (!isValidGroupName(input.name)) v.add('name', GROUP_NAME_MESSAGE);
  }
  if (input.path !== undefined) {
    if (input.path === '') v.add('path', "can't be blank");
    else if (!isValidPath(input.path)) v.add('path', PATH_FORMAT_MESSAGE);
    else if (parent === null ? isReservedTopLevel(input.path) : isReservedChild(input.path)) {
      v.add('path', `${input.path} is a reserved name`);
    } else if (self === null || input.path.toLowerCase() !== self.path.toLowerCase()) {
      const fullPath = parent ? `${parent.full_path}/${input.path}` : input.path;
      if ((await findNamespaceByFullPath(deps.db, fullPath)) || (await findProjectByFullPath(deps.db, fullPath))) {
        v.add('path', 'has already been taken');
      }
    }
  }
  if (input.visibility !== undefined) {
    if (parent && !fitsWithin(input.visibility, parent.visibility)) {
      v.add(
        'visibility_level',
        `${input.visibility} is not allowed since the parent group has a ${parent.visibility} visibility.`,
      );
    }
    if (self && (await hasMoreVisibleChildren(deps, self, input.visibility))) {
      v.add(
        'visibility_level',
        `${input.visibility} is not allowed since there are sub-groups or projects with higher visibility.`,
      );
    }
  }
  if (input.project_creation_level !== undefined && !(input.project_creation_level in PROJECT_CREATION_LEVELS)) {
    v.add('project_creation_level', 'is not included in the list');
  }
  if (input.subgroup_creation_level !== undefined && !(input.subgroup_creation_level in SUBGROUP_CREATION_LEVELS)) {
    v.add('subgroup_creation_level', 'is not included in the list');
  }
  if (input.default_branch && !isValidBranchName(input.default_branch)) v.add('default_branch', 'is invalid');
  if (input.description !== undefined && input.description.length > 500) {
    v.add('description', 'is too long (maximum is 500 characters)');
  }
}

async function hasMoreVisibleChildren(deps: Deps, group: Namespace, visibility: Visibility): Promise<boolean> {
  const allowed = visibility === 'private' ? ['private'] : visibility === 'internal' ? ['private', 'internal'] : null;
  if (allowed === null) return false;
  const { rows } = await sql<{ found: boolean }>`SELECT EXISTS (
      SELECT 1 FROM namespaces WHERE parent_id = ${group.id} AND NOT (visibility = ANY(${sql.val(allowed)}::text[]))
    ) OR EXISTS (
      SELECT 1 FROM projects WHERE namespace_id = ${group.id} AND NOT (visibility = ANY(${sql.val(allowed)}::text[]))
    ) AS found`.execute(deps.db);
  return rows[0]?.found ?? false;
}

/** Creates a group (or a subgroup of `parent`); the creator becomes its Owner. */
export async function createGroup(
  deps: Deps,
  user: User,
  input: GroupInput & { name: string; path: string },
  parent: Namespace | null,
) {
  const v = new Validation();
  await checkGroupFields(deps, v, input, parent, null);
  v.throwIfAny();
  const now = deps.clock.now();
  try {
    return await deps.db.transaction().execute(async (tx) => {
      const group = await insertNamespace(
        tx,
        {
          ...columns(input),
          kind: 'group',
          name: input.name,
          path: input.path,
          full_path: parent ? `${parent.full_path}/${input.path}` : input.path,
          parent_id: parent?.id ?? null,
          owner_id: null,
          visibility: input.visibility ?? parent?.visibility ?? 'private',
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
export async function updateGroup(deps: Deps, group: Namespace, input: GroupInput): Promise<Namespace> {
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

/** Deletes a group with its subgroups and their projects (rows, then repositories on disk). */
export async function deleteGroup(deps: Deps, group: Namespace): Promise<void> {
  const projects = await projectsInSubtree(deps.db, group.id);
  const namespaceIds = await subtreeIds(deps.db, group.id);
  await deps.db.transaction().execute(async (tx) => {
    await deleteMembersOfSources(
      tx,
      'project',
      projects.map((p) => p.id),
    );
    if (projects.length > 0)
      await tx
        .deleteFrom('projects')
        .where(
          'id',
          'in',
          projects.map((p) => p.id),
        )
        .execute();
    await deleteMembersOfSources(tx, 'group', namespaceIds);
    // Children first: traversal_ids are longest for the deepest namespaces.
    await tx.deleteFrom('namespaces').where('id', 'in', namespaceIds).execute();
  });
  for (const project of projects) {
    await removeRepository(deps.storages.repositoryPath(project.repository_storage, project.id));
  }
}
