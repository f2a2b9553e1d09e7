import type { MergeRequest, Project, User } from '../db/schema.js';
import type { Deps } from '../services/deps.js';
import { canMerge, loadProtectedBranches, protectedBranchRules } from '../services/protected-branches.js';
import type { ProjectPolicy } from './abilities.js';
import { AccessLevel } from './access-levels.js';

/** THE one place that answers "may this user merge into this branch": the protected branch's merge rows. */
export async function mayMergeInto(deps: Deps, project: Project, policy: ProjectPolicy, branch: string) {
  return canMerge(deps, project, policy.user, branch, policy);
}

/** Whether merge requests into `branch` need code-owner approval (a matching protected branch says so). */
export async function codeOwnerApprovalRequired(deps: Deps, project: Project, branch: string): Promise<boolean> {
  return (await protectedBranchRules(deps, project.id, branch))?.codeOwnerApprovalRequired ?? false;
}

/** The ids of the protected branches (names or wildcards) that cover `branch`, for rules scoped by them. */
export async function protectedBranchIdsFor(deps: Deps, project: Project, branch: string): Promise<number[]> {
  return ((await protectedBranchRules(deps, project.id, branch))?.rules ?? []).map((rule) => rule.id);
}

/** Which of `ids` are protected branches of the project (unknown ids in rules are refused). */
export async function existingProtectedBranchIds(deps: Deps, project: Project, ids: number[]): Promise<number[]> {
  const known = new Set((await loadProtectedBranches(deps, project.id)).map((rule) => rule.id));
  return ids.filter((id) => known.has(id));
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
