import type { Project } from '../db/schema.js';
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

type Protected = Pick<Project, 'default_branch' | 'default_branch_protection'>;

/** Whether `branch` is protected: only the default branch is, unless its protection is none. */
export function isProtectedBranch(project: Protected, branch: string): boolean {
  return branch === project.default_branch && project.default_branch_protection !== DefaultBranchProtection.none;
}

/** The access level needed to push to `branch` (push_code, Developer, for unprotected ones). */
export function pushLevelFor(project: Protected, branch: string): number {
  return isProtectedBranch(project, branch) && project.default_branch_protection === DefaultBranchProtection.full
    ? AccessLevel.MAINTAINER
    : AccessLevel.DEVELOPER;
}
