import type { Project } from '../db/schema.js';
import type { Commit } from '../git/commit.js';
import { presentCommit } from './commit.js';
import type { PresentContext } from './user.js';

export interface BranchView {
  name: string;
  commit: Commit;
  merged: boolean;
  /** The default branch, protected as GitLab protects it by default. */
  isDefault: boolean;
  canPush: boolean;
}

/** GitLab's Branch entity. Only the default branch is protected (maintainers push, nobody forces). */
export function presentBranch(view: BranchView, project: Pick<Project, 'full_path'>, pc: PresentContext) {
  return {
    name: view.name,
    commit: presentCommit(view.commit, project, pc),
    merged: view.merged,
    protected: view.isDefault,
    developers_can_push: false,
    developers_can_merge: false,
    can_push: view.canPush,
    default: view.isDefault,
    web_url: `${pc.baseUrl}/${project.full_path}/-/tree/${view.name}`,
  };
}
