import { pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import {
  deleteGroupGroupLink,
  deleteProjectGroupLink,
  findGroupGroupLink,
  findProjectGroupLink,
  insertGroupGroupLink,
  insertProjectGroupLink,
} from '../db/queries/group-links.js';
import { findNamespaceById } from '../db/queries/namespaces.js';
import type { GroupGroupLink, Namespace, Project, ProjectGroupLink, User } from '../db/schema.js';
import { ApiError, badRequestMessage, forbidden } from '../http/errors.js';
import { loadGroupPolicy, loadProjectPolicy } from '../policies/abilities.js';
import { AccessLevel } from '../policies/access-levels.js';
import type { Deps } from './deps.js';

/** The largest value of an int4 id column: larger ids name no row. */
const MAX_ID = 2147483647;

/** GitLab's `error('Not Found', 404)` of the group-link create services. */
const linkNotFound = () => new ApiError(404, { message: 'Not Found' });

/** A link's validation failure: GitLab's 409 with the full messages as one sentence. */
const linkConflict = (message: string) => new ApiError(409, { message });

export interface ShareInput {
  groupAccess: number;
  /** `YYYY-MM-DD`, or null for a link that does not expire. */
  expiresAt: string | null;
}

/**
 * Shares a project with a group (GitLab's Projects::GroupLinks::CreateService): the caller must
 * administer the project (checked by the route) and belong to the group (or be an administrator);
 * only Owners may give Owner access.
 */
export async function shareProject(
  deps: Deps,
  user: User,
  project: Project,
  namespace: Namespace,
  groupId: number,
  input: ShareInput,
): Promise<ProjectGroupLink> {
  // GitLab's allowed_to_share_with_group?: the project's group may lock sharing.
  if (namespace.kind === 'group' && namespace.share_with_group_lock) {
    throw badRequestMessage('The project sharing with group is disabled');
  }
  const policy = await loadProjectPolicy(deps, user, project, namespace);
  if (input.groupAccess === AccessLevel.OWNER && !policy.can('remove_project')) throw forbidden();
  const found = groupId >= 1 && groupId <= MAX_ID ? await findNamespaceById(deps.db, groupId) : undefined;
  const group = found?.kind === 'group' ? found : undefined;
  // GitLab's read_namespace_via_membership: a member of the group (or of an ancestor), or an admin.
  // (Depot has no `prevent_sharing_groups_outside_hierarchy` setting: sharing is always allowed.)
  if (!group || (await loadGroupPolicy(deps, user, group)).level < AccessLevel.GUEST) throw linkNotFound();
  const errors: string[] = [];
  if (await findProjectGroupLink(deps.db, project.id, group.id)) errors.push('Project already shared with this group');
  if (namespace.kind === 'group' && namespace.traversal_ids.includes(group.id)) {
    errors.push('Project cannot be shared with the group it is in or one of its ancestors.');
  }
  if (errors.length > 0) throw linkConflict(errors.join(' and '));
  const now = deps.clock.now();
  try {
    return await insertProjectGroupLink(deps.db, {
      project_id: project.id,
      group_id: group.id,
      group_access: input.groupAccess,
      expires_at: input.expiresAt,
      created_at: now,
      updated_at: now,
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) throw linkConflict('Project already shared with this group');
    throw error;
  }
}

/**
 * Removes a project's link to a group; false when there was none. A link giving Owner access
 * goes only by an Owner's hand (GitLab's destroy_project_group_link): 403 `Forbidden`.
 */
export async function unshareProject(
  deps: Deps,
  user: User,
  project: Project,
  namespace: Namespace,
  groupId: number,
): Promise<boolean> {
  if (groupId < 1 || groupId > MAX_ID) return false;
  const link = await findProjectGroupLink(deps.db, project.id, groupId);
  if (!link) return false;
  if (link.group_access === AccessLevel.OWNER) {
    const policy = await loadProjectPolicy(deps, user, project, namespace);
    if (!policy.can('remove_project')) throw new ApiError(403, { message: 'Forbidden' });
  }
  await deleteProjectGroupLink(deps.db, link.id);
  return true;
}

/**
 * Shares `group` with `invited` (GitLab's Groups::GroupLinks::CreateService): the caller must
 * administer the group's members and see the invited group.
 */
export async function shareGroup(
  deps: Deps,
  user: User,
  group: Namespace,
  invited: Namespace,
  input: ShareInput,
): Promise<GroupGroupLink> {
  const policy = await loadGroupPolicy(deps, user, group);
  const invitedPolicy = await loadGroupPolicy(deps, user, invited);
  if (!policy.can('admin_member') || !invitedPolicy.can('read_group')) throw linkNotFound();
  if (await findGroupGroupLink(deps.db, group.id, invited.id)) {
    throw linkConflict('Shared group The group has already been shared with this group');
  }
  const now = deps.clock.now();
  try {
    return await insertGroupGroupLink(deps.db, {
      shared_group_id: group.id,
      shared_with_group_id: invited.id,
      group_access: input.groupAccess,
      expires_at: input.expiresAt,
      created_at: now,
      updated_at: now,
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) {
      throw linkConflict('Shared group The group has already been shared with this group');
    }
    throw error;
  }
}

/** Removes a group's link to another group; false when there was none. */
export async function unshareGroup(deps: Deps, group: Namespace, sharedWithGroupId: number): Promise<boolean> {
  if (sharedWithGroupId < 1 || sharedWithGroupId > MAX_ID) return false;
  const link = await findGroupGroupLink(deps.db, group.id, sharedWithGroupId);
  if (!link) return false;
  await deleteGroupGroupLink(deps.db, link.id);
  return true;
}
