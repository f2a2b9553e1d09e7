import { type SqlBool, sql } from 'kysely';
import { pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import { groupOwnerIds, insertMember } from '../db/queries/members.js';
import {
  childPathTaken,
  findNamespaceByFullPath,
  renameDescendantPaths,
  siblingNameTaken,
} from '../db/queries/namespaces.js';
import { findProjectByFullPath, findProjectByName } from '../db/queries/projects.js';
import type { Namespace, Project, User, Visibility } from '../db/schema.js';
import { badRequestMessage } from '../http/errors.js';
import { rubyInspectErrors } from '../lib/ruby-inspect.js';
import { canCreateProjectIn, loadGroupPolicy } from '../policies/abilities.js';
import { AccessLevel } from '../policies/access-levels.js';
import { type Deps, today } from './deps.js';
import { fitsWithin, visibilityLevel } from './visibility.js';

/** GitLab's project transfer refusal: the errors hash on `new_namespace`, inspected. */
const projectTransferError = (message: string) =>
  badRequestMessage(`Failed to transfer project ${rubyInspectErrors({ new_namespace: [message] })}`);

const PROJECT_TAKEN = 'Project with same name or path in target namespace already exists';

/**
 * Moves a project into another namespace (GitLab's Projects::TransferService). The caller may
 * change the project's namespace (checked by the route) and must be able to create projects in
 * the target. The repository stays where it is: storage paths are hashed by project id, not by
 * path. A visibility the new group does not allow is lowered to the group's.
 */
export async function transferProject(deps: Deps, user: User, project: Project, target: Namespace): Promise<Project> {
  if (target.id === project.namespace_id) throw projectTransferError('Project is already in this namespace.');
  if (!(await canCreateProjectIn(deps, user, target))) {
    throw projectTransferError("You don't have permission to transfer projects into that namespace.");
  }
  const fullPath = `${target.full_path}/${project.path}`;
  const taken =
    (await findProjectByName(deps.db, target.id, project.name)) !== undefined ||
    (await findProjectByFullPath(deps.db, fullPath)) !== undefined ||
    (await findNamespaceByFullPath(deps.db, fullPath)) !== undefined;
  if (taken) throw projectTransferError(PROJECT_TAKEN);
  const visibility =
    target.kind === 'group' && !fitsWithin(project.visibility, target.visibility)
      ? target.visibility
      : project.visibility;
  try {
    return await deps.db
      .updateTable('projects')
      .set({ namespace_id: target.id, full_path: fullPath, visibility, updated_at: deps.clock.now() })
      .where('id', '=', project.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) throw projectTransferError(PROJECT_TAKEN);
    throw error;
  }
}

/** GitLab's group transfer refusal: `Transfer failed: <reason>`. */
const groupTransferError = (message: string) => badRequestMessage(`Transfer failed: ${message}`);

/** Namespace::NUMBER_OF_ANCESTORS_ALLOWED: how deep groups may nest. */
const MAX_ANCESTORS = 20;

/**
 * Moves a group under `newParent`, or to the top level (null), with its subgroups and projects
 * (GitLab's Groups::TransferService): traversal ids and full paths follow; what is more visible
 * than the new parent is lowered to its visibility; a group left at the top level without an
 * Owner gets the caller as its Owner.
 */
export async function transferGroup(
  deps: Deps,
  user: User,
  group: Namespace,
  newParent: Namespace | null,
): Promise<Namespace> {
  if (newParent === null && group.parent_id === null) throw groupTransferError('Group is already a root group.');
  if (newParent !== null && newParent.id === group.parent_id) {
    throw groupTransferError('Group is already associated to the parent group.');
  }
  const allowed =
    newParent === null
      ? user.admin || user.can_create_group
      : (await loadGroupPolicy(deps, user, newParent)).can('create_subgroup');
  if (!allowed) throw groupTransferError("You don't have enough permissions.");
  if (newParent?.traversal_ids.includes(group.id)) {
    throw groupTransferError('Cannot transfer group to one of its subgroup.');
  }
  const pathTaken =
    (await childPathTaken(deps.db, newParent?.id ?? null, group.path)) ||
    (newParent !== null &&
      (await findProjectByFullPath(deps.db, `${newParent.full_path}/${group.path}`)) !== undefined);
  if (pathTaken) {
    throw groupTransferError('The parent group already has a subgroup or a project with the same path.');
  }
  // The model's own validation, which GitLab's transfer reports as it fails to save.
  if (newParent && (await siblingNameTaken(deps.db, newParent.id, group.name, group.id))) {
    throw groupTransferError('Validation failed: Name has already been taken');
  }
  const depthBelow = await subtreeDepth(deps, group);
  if ((newParent?.traversal_ids.length ?? 0) + depthBelow > MAX_ANCESTORS + 1) {
    throw groupTransferError('Parent has too deep level of nesting');
  }
  const newFullPath = newParent ? `${newParent.full_path}/${group.path}` : group.path;
  const prefix = newParent?.traversal_ids ?? [];
  const now = deps.clock.now();
  try {
    return await deps.db.transaction().execute(async (tx) => {
      await sql`UPDATE namespaces
        SET traversal_ids = ${sql.val(prefix)}::int[] || traversal_ids[array_position(traversal_ids, ${group.id}::int):]
        WHERE ${group.id} = ANY(traversal_ids)`.execute(tx);
      await renameDescendantPaths(tx, group.id, group.full_path, newFullPath);
      if (newParent && visibilityLevel(group.visibility) > visibilityLevel(newParent.visibility)) {
        await lowerVisibility(tx, group.id, newParent.visibility);
      }
      const updated = await tx
        .updateTable('namespaces')
        .set({ parent_id: newParent?.id ?? null, full_path: newFullPath, updated_at: now })
        .where('id', '=', group.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      if (newParent === null && (await groupOwnerIds(tx, [group.id], today(deps))).length === 0) {
        await insertMember(tx, {
          source_type: 'group',
          source_id: group.id,
          user_id: user.id,
          access_level: AccessLevel.OWNER,
          created_by_id: user.id,
          created_at: now,
          updated_at: now,
        });
      }
      return updated;
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) {
      throw groupTransferError('The parent group already has a subgroup or a project with the same path.');
    }
    throw error;
  }
}

/** Levels of groups in the subtree of `group`, itself counted as 1. */
async function subtreeDepth(deps: Deps, group: Namespace): Promise<number> {
  const { rows } = await sql<{ depth: number | null }>`
    SELECT max(cardinality(traversal_ids) - ${group.traversal_ids.length})::int + 1 AS depth
    FROM namespaces WHERE ${group.id} = ANY(traversal_ids)`.execute(deps.db);
  return rows[0]?.depth ?? 1;
}

/** Lowers the subtree's groups and projects that are more visible than `visibility` to it. */
async function lowerVisibility(db: Deps['db'], groupId: number, visibility: Visibility): Promise<void> {
  const allowed = (['private', 'internal', 'public'] as const).filter((v) => fitsWithin(v, visibility));
  const inSubtree = sql<SqlBool>`${groupId} = ANY(traversal_ids)`;
  await db
    .updateTable('namespaces')
    .set({ visibility })
    .where(inSubtree)
    .where('visibility', 'not in', allowed)
    .execute();
  await db
    .updateTable('projects')
    .set({ visibility })
    .where('namespace_id', 'in', db.selectFrom('namespaces').select('id').where(inSubtree))
    .where('visibility', 'not in', allowed)
    .execute();
}
