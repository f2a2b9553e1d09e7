import type { AccessRow, ProtectedAction, ProtectedBranchRow } from '../db/queries/protected-branches.js';
import { AccessLevel } from '../policies/access-levels.js';

/** Names of the users and groups access rows point at, for access_level_description. */
export interface GranteeNames {
  users: Map<number, string>;
  groups: Map<number, string>;
}

/** GitLab's ProtectedRefAccess#humanize. */
const ROLE_DESCRIPTIONS: Record<number, string> = {
  [AccessLevel.NO_ACCESS]: 'No one',
  [AccessLevel.DEVELOPER]: 'Developers + Maintainers',
  [AccessLevel.MAINTAINER]: 'Maintainers',
  [AccessLevel.ADMIN]: 'Administrators',
};

function describe(row: AccessRow, names: GranteeNames): string | null {
  if (row.user_id !== null) return names.users.get(row.user_id) ?? null;
  if (row.group_id !== null) return names.groups.get(row.group_id) ?? null;
  if (row.access_level !== null) return ROLE_DESCRIPTIONS[row.access_level] ?? null;
  return null;
}

/** GitLab's ProtectedRefAccess entity (with EE's user_id and group_id; deploy_key_id on push rows). */
function presentAccess(row: AccessRow, action: ProtectedAction, names: GranteeNames) {
  return {
    id: row.id,
    access_level: row.access_level,
    access_level_description: describe(row, names),
    ...(action === 'push' ? { deploy_key_id: row.deploy_key_id } : {}),
    user_id: row.user_id,
    group_id: row.group_id,
  };
}

/** GitLab's ProtectedBranch entity (with EE's unprotect_access_levels and code_owner_approval_required). */
export function presentProtectedBranch(rule: ProtectedBranchRow, names: GranteeNames) {
  return {
    id: rule.id,
    name: rule.name,
    push_access_levels: rule.push.map((row) => presentAccess(row, 'push', names)),
    merge_access_levels: rule.merge.map((row) => presentAccess(row, 'merge', names)),
    allow_force_push: rule.allow_force_push,
    unprotect_access_levels: rule.unprotect.map((row) => presentAccess(row, 'unprotect', names)),
    code_owner_approval_required: rule.code_owner_approval_required,
  };
}

/** Users and groups every access row of `rules` names. */
export function granteesOf(rules: readonly ProtectedBranchRow[]): { userIds: number[]; groupIds: number[] } {
  const rows = rules.flatMap((rule) => [...rule.push, ...rule.merge, ...rule.unprotect]);
  return {
    userIds: [...new Set(rows.flatMap((row) => (row.user_id !== null ? [row.user_id] : [])))],
    groupIds: [...new Set(rows.flatMap((row) => (row.group_id !== null ? [row.group_id] : [])))],
  };
}
