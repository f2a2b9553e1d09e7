import type { Project, User } from '../db/schema.js';
import { readObject } from '../git/catfile.js';
import { type Commit, parseCommitObject } from '../git/commit.js';
import { GitError } from '../git/errors.js';
import {
  cherryPickPlan,
  moveBranch,
  PickError,
  type PickFailure,
  type PickIdentity,
  pickTree,
  revertPlan,
  writePickCommit,
} from '../git/pick.js';
import { ApiError } from '../http/errors.js';
import type { Deps } from './deps.js';
import { recordRefChanges } from './push-events.js';
import { leasedWrite } from './write-leases.js';

export type ChangeAction = 'cherry_pick' | 'revert';

export interface ChangeRequest {
  action: ChangeAction;
  commit: Commit;
  branch: string;
  /** The branch tip the caller found (find_branch!). */
  tip: string;
  dryRun: boolean;
  /** A custom message (cherry-pick only); GitLab's default otherwise. */
  message?: string | undefined;
}

const FAILED: Record<ChangeAction, string> = {
  cherry_pick: 'Commit cherry-pick failed',
  revert: 'Commit revert failed',
};

/**
 * Commits::ChangeService's refusal: a 400 with GitLab's message and `error_code`, and
 * `dry_run: "error"` when the caller only asked whether it would apply.
 */
export function changeFailed(action: ChangeAction, reason: PickFailure, dryRun: boolean): ApiError {
  const message =
    `${FAILED[action]}: Can't perform this action automatically. It may have already been done, ` +
    'or a more recent commit may have updated some of this content. Please perform this action locally.';
  return new ApiError(400, { message, error_code: reason, ...(dryRun ? { dry_run: 'error' } : {}) });
}

/** Commit#cherry_pick_message: the message, a blank line and where it was picked from. */
export function cherryPickMessage(commit: Commit): string {
  return `${commit.message}\n\n(cherry-picked from commit ${commit.id})`;
}

/** Commit#revert_message: `Revert "<title>"` and the commit it reverts. */
export function revertMessage(commit: Commit): string {
  const title = commit.message.trim() === '' ? 'No commit message' : commitTitleForRevert(commit.message);
  return `Revert "${title.trim()}"\n\nThis reverts commit ${commit.id}`;
}

/** Commit#title: the first line, cut after 80 characters at a word with `...` past 99. */
function commitTitleForRevert(message: string): string {
  const full = message.split(/[\r\n]/, 1)[0] ?? '';
  if (full.length < 100) return full;
  const space = full.lastIndexOf(' ', 78);
  return `${full.slice(0, space > 0 ? space : 78)}...`;
}

const identity = (user: User, now: Date): PickIdentity => ({
  name: user.name || user.username,
  email: user.email,
  time: Math.floor(now.getTime() / 1000),
  tzMinutes: 0,
});

/**
 * GitLab's Commits::CherryPickService / RevertService: the change is merged onto the branch tip
 * in the bare repository; a dry run stops there. Otherwise the commit is written and the branch
 * moved with a compare-and-swap from the tip the caller found, and the push is recorded.
 * Returns the new commit id (null for a dry run). Refusals are GitLab's 400s.
 */
export const applyCommitChange = leasedWrite(async function applyCommitChange(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  request: ChangeRequest,
): Promise<string | null> {
  const { commit, branch, tip, action } = request;
  const tipObject = await readObject(gitDir, tip);
  if (!tipObject) throw new GitError('not_found', 'branch tip vanished');
  const tipCommit = parseCommitObject(tip, tipObject.data);
  const plan = action === 'cherry_pick' ? cherryPickPlan(commit) : await revertPlan(gitDir, commit);
  let tree: string;
  try {
    tree = await pickTree(gitDir, tip, tipCommit.tree, plan);
  } catch (error) {
    if (error instanceof PickError) throw changeFailed(action, error.reason, request.dryRun);
    throw error;
  }
  if (request.dryRun) return null;

  const now = deps.clock.now();
  const committer = identity(user, now);
  const author = action === 'cherry_pick' ? commit.author : committer;
  const message = action === 'cherry_pick' ? (request.message ?? cherryPickMessage(commit)) : revertMessage(commit);
  const created = await writePickCommit(gitDir, { tree, parent: tip, message, author, committer });
  try {
    await moveBranch(gitDir, branch, created, tip);
  } catch (error) {
    if (error instanceof GitError && error.code === 'conflict') {
      throw new ApiError(400, { message: `Could not update ${branch}. Please refresh and try again.` });
    }
    throw error;
  }
  await recordRefChanges(deps, project, user, gitDir, [{ ref: `refs/heads/${branch}`, oldId: tip, newId: created }]);
  return created;
});
