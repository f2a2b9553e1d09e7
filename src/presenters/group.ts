import type { Namespace } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';
import { namespaceWebUrl } from './namespace.js';
import type { PresentContext } from './user.js';

/** GitLab's Group entity. `fullName` is the names from the root down, joined with ` / `. */
export function presentGroup(group: Namespace, pc: PresentContext, fullName: string) {
  return {
    id: group.id,
    web_url: namespaceWebUrl(group, pc),
    name: group.name,
    path: group.path,
    description: group.description,
    visibility: group.visibility,
    share_with_group_lock: group.share_with_group_lock,
    require_two_factor_authentication: group.require_two_factor_authentication,
    two_factor_grace_period: group.two_factor_grace_period,
    project_creation_level: group.project_creation_level,
    auto_devops_enabled: null,
    subgroup_creation_level: group.subgroup_creation_level,
    emails_disabled: !group.emails_enabled,
    emails_enabled: group.emails_enabled,
    show_diff_preview_in_email: true,
    mentions_disabled: group.mentions_disabled,
    lfs_enabled: group.lfs_enabled,
    archived: false,
    math_rendering_limits_enabled: true,
    lock_math_rendering_limits_enabled: false,
    default_branch: group.default_branch,
    default_branch_protection: 2,
    default_branch_protection_defaults: {
      allowed_to_push: [{ access_level: 40 }],
      allow_force_push: false,
      allowed_to_merge: [{ access_level: 40 }],
      developer_can_initial_push: false,
    },
    avatar_url: null,
    request_access_enabled: group.request_access_enabled,
    full_name: fullName,
    full_path: group.full_path,
    created_at: isoTime(group.created_at),
    parent_id: group.parent_id,
    organization_id: 1,
    shared_runners_setting: 'enabled',
    max_artifacts_size: null,
    marked_for_deletion_on: null,
  };
}

/** GitLab's GroupDetail entity: Group plus sharing, and projects when asked for. */
export function presentGroupDetail(
  group: Namespace,
  pc: PresentContext,
  fullName: string,
  options: { projects?: unknown[]; runnersToken?: string },
) {
  return {
    ...presentGroup(group, pc, fullName),
    shared_with_groups: [],
    // For those who administer the group (GitLab's user_can_admin_group).
    ...(options.runnersToken !== undefined ? { runners_token: options.runnersToken } : {}),
    ...(group.parent_id === null ? { prevent_sharing_groups_outside_hierarchy: false } : {}),
    ...(options.projects ? { projects: options.projects, shared_projects: [] } : {}),
  };
}
