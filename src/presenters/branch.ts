import type { Project } from '../db/schema.js';
import type { Commit } from '../git/commit.js';
import type { BranchProtectionView } from '../policies/branch-protection.js';
import { presentCommit } from './commit.js';
import type { PresentContext } from './user.js';

export interface BranchView {
  name: string;
  commit: Commit;
  merged: boolean;
  isDefault: boolean;
  canPush: boolean;
  /** What the project's protected branches say of this one (src/policies/branch-protection.ts). */
  protection: BranchProtectionView;
}

/** GitLab's Branch entity. */
export function presentBranch(
  view: BranchView,
  project: Pick<Project, 'full_path' | 'default_branch'>,
  pc: PresentContext,
) {
  return {
    name: view.name,
    commit: presentCommit(view.commit, project, pc),
    merged: view.merged,
    protected: view.protection.protected,
    developers_can_push: view.protection.developersCanPush,
    developers_can_merge: view.protection.developersCanMerge,
    can_push: view.canPush,
    default: view.isDefault,
    web_url: `${pc.baseUrl}/${project.full_path}/-/tree/${view.name}`,
  };
}
