import type { MergeRequest, Project, User } from '../db/schema.js';
import type { Deps } from '../services/deps.js';
import type { ProjectPolicy } from './abilities.js';
import { AccessLevel } from './access-levels.js';
import { isProtectedBranch, pushLevelFor } from './branch-protection.js';

/**
 * THE one place that answers "may this user merge into this branch". Until protected branches
 * (issue 18 part 1) land it reads src/policies/branch-protection.ts: the level that may push to
 * the branch may merge into it. The integrator switches this to the protected branch's
 * merge_access_level.
 */
export async function mayMergeInto(_deps: Deps, project: Project, policy: ProjectPolicy, branch: string) {
  return policy.can('push_code') && policy.level >= pushLevelFor(project, branch);
}

/**
 * Whether merge requests into `branch` need code-owner approval (the protected branch's
 * `code_owner_approval_required`). False until protected branches land: the integrator switches
 * this to the protected branch rules.
 */
export async function codeOwnerApprovalRequired(_deps: Deps, project: Project, branch: string): Promise<boolean> {
  void isProtectedBranch(project, branch);
  return false;
}

/**
 * The ids of the protected branches that cover `branch`, for project approval rules scoped by
 * protected branches. None until protected branches land (the integrator fills this in).
 */
export async function protectedBranchIdsFor(_deps: Deps, _project: Project, _branch: string): Promise<number[]> {
  return [];
}

/** Whether protected branch ids exist on the project (used to refuse unknown ids in rules). */
export async function existingProtectedBranchIds(_deps: Deps, _project: Project, _ids: number[]): Promise<number[]> {
  return [];
}

/**
 * read_merge_request: whoever may read the project's code, unless the merge requests feature is
 * disabled (for everyone) or private (members only).
 */
export function canReadMergeRequests(policy: ProjectPolicy): boolean {
  const feature = policy.project.features.merge_requests;
  if (feature === 'disabled') return false;
  if (feature === 'private' && policy.level < AccessLevel.GUEST) return false;
  return policy.can('read_code');
}

/** create_merge_request_in / _from (same project): developers, where merge requests are on. */
export const canCreateMergeRequest = (policy: ProjectPolicy) => canReadMergeRequests(policy) && policy.can('push_code');

/** update_merge_request: the author (still a member able to read) or a developer. */
export function canUpdateMergeRequest(policy: ProjectPolicy, mr: MergeRequest): boolean {
  if (policy.can('push_code')) return true;
  return policy.user !== null && mr.author_id === policy.user.id && policy.level >= AccessLevel.GUEST;
}

/** Project approval settings and project rules: maintainers (admin_project). */
export const canAdminApprovals = (policy: ProjectPolicy) => policy.can('admin_project');

/** Whether `user` may approve at all (before the author and committer rules): developers. */
export const mayApproveAsMember = (policy: ProjectPolicy, _user: User) => policy.level >= AccessLevel.DEVELOPER;
