import type { Project } from '../db/schema.js';
import type { Commit } from '../git/commit.js';
import { DefaultBranchProtection, isProtectedBranch } from '../policies/branch-protection.js';
import { presentCommit } from './commit.js';
import type { PresentContext } from './user.js';

export interface BranchView {
  name: string;
  commit: Commit;
  merged: boolean;
  isDefault: boolean;
  canPush: boolean;
}

/**
 * GitLab's Branch entity. Only the default branch is protected, as the project's
 * default_branch_protection says (src/policies/branch-protection.ts).
 */
export function presentBranch(
  view: BranchView,
  project: Pick<Project, 'full_path' | 'default_branch' | 'default_branch_protection'>,
  pc: PresentContext,
) {
  const isProtected = isProtectedBranch(project, view.name);
  return {
    name: view.name,
    commit: presentCommit(view.commit, project, pc),
    merged: view.merged,
    protected: isProtected,
    developers_can_push: isProtected && project.default_branch_protection === DefaultBranchProtection.developersCanPush,
    developers_can_merge: false,
    can_push: view.canPush,
    default: view.isDefault,
    web_url: `${pc.baseUrl}/${project.full_path}/-/tree/${view.name}`,
  };
}
