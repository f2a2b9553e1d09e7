import type { AccessRow, ProtectedAction, ProtectedBranchRow } from '../db/queries/protected-branches.js';
import type { ProjectPolicy } from './abilities.js';
import { AccessLevel } from './access-levels.js';

/** GitLab's default_branch_protection levels (Gitlab::Access::PROTECTION_*). */
export const DefaultBranchProtection = {
  /** Not protected: developers push and force push. */
  none: 0,
  /** Protected; developers may push, nobody force pushes. */
  developersCanPush: 1,
  /** Protected; only maintainers push, nobody force pushes. */
  full: 2,
} as const;

/** The roles a push or merge access row may name (ProtectedRefAccess.allowed_access_levels). */
export const PUSH_MERGE_ACCESS_LEVELS = [
  AccessLevel.NO_ACCESS,
  AccessLevel.DEVELOPER,
  AccessLevel.MAINTAINER,
  AccessLevel.ADMIN,
] as const;
/** The roles an unprotect access row may name (no "No one": somebody must be able to unprotect). */
export const UNPROTECT_ACCESS_LEVELS = [AccessLevel.DEVELOPER, AccessLevel.MAINTAINER, AccessLevel.ADMIN] as const;

/**
 * The access rows GitLab's ProtectDefaultBranchService gives the default branch for a
 * default_branch_protection level (push and merge; no unprotect rows, so maintainers may
 * unprotect it), or null when that level protects nothing.
 */
export function defaultBranchAccess(level: number): { push: number; merge: number } | null {
  if (level === DefaultBranchProtection.none) return null;
  return {
    push: level === DefaultBranchProtection.developersCanPush ? AccessLevel.DEVELOPER : AccessLevel.MAINTAINER,
    merge: AccessLevel.MAINTAINER,
  };
}

/** Whether a protected branch name holds a wildcard (GitLab's ProtectedRef wildcard?). */
export const isWildcard = (name: string) => name.includes('*');

const patterns = new Map<string, RegExp>();

/**
 * GitLab's RefMatcher: a name without `*` matches itself only; with `*`, each `*` matches any
 * run of characters (slashes included) and the rest is literal, anchored at both ends.
 */
export function branchMatches(name: string, branch: string): boolean {
  if (!isWildcard(name)) return name === branch;
  let regex = patterns.get(name);
  if (!regex) {
    const source = name
      .split('*')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&'))
      .join('.*?');
    regex = new RegExp(`^${source}$`, 's');
    if (patterns.size > 10_000) patterns.clear();
    patterns.set(name, regex);
  }
  return regex.test(branch);
}

/** The protected branches among `rules` whose name or wildcard matches `branch`. */
export function matchingRules(rules: readonly ProtectedBranchRow[], branch: string): ProtectedBranchRow[] {
  return rules.filter((rule) => branchMatches(rule.name, branch));
}

/** Who is asking: their level on the project (ADMIN for administrators) and identity. */
export interface Accessor {
  userId: number | null;
  level: number;
  /** Groups the user belongs to, asked only when a matching row names a group. */
  inGroup?: (groupId: number) => boolean;
}

/**
 * GitLab's ProtectedRefAccess#check_access for one row: "No one" admits nobody, the
 * administrator role administrators only, a role whoever has it (administrators have every
 * role); a user row that user and a group row the group's members, if they may write code.
 */
export function accessRowAllows(row: AccessRow, who: Accessor): boolean {
  if (who.userId === null) return false;
  if (row.access_level !== null) {
    if (row.access_level === AccessLevel.NO_ACCESS) return false;
    return who.level >= row.access_level;
  }
  if (who.level < AccessLevel.DEVELOPER) return false;
  if (row.user_id !== null) return row.user_id === who.userId;
  if (row.group_id !== null) return who.inGroup?.(row.group_id) ?? false;
  return false;
}

/** Whether any matching rule admits `who` for `action` (GitLab's protected_ref_accessible_to?). */
export function rulesAllow(matching: readonly ProtectedBranchRow[], action: ProtectedAction, who: Accessor): boolean {
  return matching.some((rule) => rule[action].some((row) => accessRowAllows(row, who)));
}

/**
 * The lowest role a set of matching rules lets act (60 administrators only), or 0 when no role
 * may (only listed users or groups, or "No one").
 */
export function lowestRole(matching: readonly ProtectedBranchRow[], action: ProtectedAction): number {
  let lowest = Number.POSITIVE_INFINITY;
  for (const rule of matching) {
    for (const row of rule[action]) {
      if (row.access_level !== null && row.access_level > 0) lowest = Math.min(lowest, row.access_level);
    }
  }
  return Number.isFinite(lowest) ? lowest : AccessLevel.NO_ACCESS;
}

/** GitLab's can_delete_branch? for a protected branch: push_to_delete_protected_branch (maintainers). */
export const canDeleteProtectedBranch = (policy: ProjectPolicy) =>
  policy.can('push_code') && policy.level >= AccessLevel.MAINTAINER;

/** GitLab's Branch entity flags: protected, developers_can_push, developers_can_merge. */
export interface BranchProtectionView {
  protected: boolean;
  developersCanPush: boolean;
  developersCanMerge: boolean;
}

const developerRow = (row: AccessRow) => row.access_level === AccessLevel.DEVELOPER;

/** What a branch's entry in the branches API says of its protection. */
export function protectionView(rules: readonly ProtectedBranchRow[], branch: string): BranchProtectionView {
  const matching = matchingRules(rules, branch);
  return {
    protected: matching.length > 0,
    developersCanPush: matching.some((rule) => rule.push.some(developerRow)),
    developersCanMerge: matching.some((rule) => rule.merge.some(developerRow)),
  };
}
