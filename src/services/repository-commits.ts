import type { Project, User } from '../db/schema.js';
import { objectInfo } from '../git/catfile.js';
import { GitError } from '../git/errors.js';
import { listCommits } from '../git/log.js';
import { mergeBase } from '../git/merge-base.js';
import { readBranchTip } from '../git/repo-info.js';
import { isValidBranchName } from '../git/validate.js';
import { ActionError, commitTree, type FileAction, treeWithActions, ZERO_OID } from '../git/write.js';
import { ApiError, forbidden } from '../http/errors.js';
import type { Deps } from './deps.js';
import { FORCE_PUSH_PROTECTED_MESSAGE, protectedBranchRules } from './protected-branches.js';
import { recordRefChanges } from './push-events.js';
import { leasedWrite, READ_ONLY_MESSAGE } from './write-leases.js';

export interface CommitRequest {
  branch: string;
  message: string;
  actions: (FileAction & { lastCommitId?: string | undefined })[];
  startBranch?: string | undefined;
  startSha?: string | undefined;
  authorName?: string | undefined;
  authorEmail?: string | undefined;
  force: boolean;
  /** The files API words a stale last_commit_id differently from the commits API. */
  changedMessage?: (path: string) => string;
  /**
   * The branch tip the caller computed the actions from: any other tip is a conflict. Cheaper
   * than a lastCommitId (which walks the file's history) for a caller that read the tip itself.
   */
  expectedTip?: string | undefined;
}

const fail = (message: string) => new ApiError(400, { message });
/** The branch is not where the commit was built on: a concurrent writer moved it. */
const branchMoved = (branch: string) => fail(`Could not update ${branch}. Please refresh and try again.`);

/**
 * An early refusal while a storage move holds the repository read-only, for a service that works
 * before it writes; the write itself runs under a write lease (leasedWrite), which decides.
 */
export function assertWritable(project: Project): void {
  if (project.repository_read_only) throw forbidden(READ_ONLY_MESSAGE);
}

async function lastCommitFor(gitDir: string, commitId: string, path: string): Promise<string | null> {
  const [commit] = await listCommits(gitDir, { include: [commitId], paths: [path], maxCount: 1 });
  return commit?.id ?? null;
}

/**
 * GitLab's Commits::CreateService + Files::MultiService: validates in GitLab's order, applies
 * the actions on the start point, and moves the branch with a compare-and-swap. Returns the new
 * commit id; every refusal is a 400 with GitLab's message.
 */
export const createCommit = leasedWrite(async function createCommit(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  request: CommitRequest,
): Promise<string> {
  const startSha = request.startSha;
  const startBranch = request.startBranch ?? (startSha ? undefined : request.branch);
  if (startSha !== undefined && request.startBranch !== undefined) {
    throw fail("You can't pass both start_branch and start_sha");
  }
  if (startSha !== undefined && !/^[0-9a-f]{40}$/.test(startSha)) throw fail(`Invalid start_sha '${startSha}'`);
  const startCommit = startSha ? await objectInfo(gitDir, `${startSha}^{commit}`) : null;
  if (startSha && !startCommit) throw fail(`Cannot find start_sha '${startSha}'`);

  const branchTip = isValidBranchName(request.branch) ? await readBranchTip(gitDir, request.branch) : null;
  if (request.expectedTip !== undefined && branchTip !== request.expectedTip) {
    throw branchMoved(request.branch);
  }
  // Asked only when it matters (a missing start branch, a branch created from another): it
  // costs a git command.
  const emptyRepo = async () => !(await hasAnyCommit(gitDir));
  let parent: string | null = startSha ?? null;
  if (startBranch !== undefined) {
    const tip = isValidBranchName(startBranch) ? await readBranchTip(gitDir, startBranch) : null;
    if (!tip && !(await emptyRepo())) throw fail('You can only create or edit files when you are on a branch');
    parent = tip;
  }
  const differentBranch = startBranch !== request.branch || startSha !== undefined;
  if (differentBranch && branchTip && !request.force && !(await emptyRepo())) {
    throw fail(`A branch called '${request.branch}' already exists. Switch to that branch in order to make changes`);
  }
  if (differentBranch && !isValidBranchName(request.branch)) {
    throw fail(`Something went wrong when we tried to create '${request.branch}' for you: Branch name is invalid`);
  }
  if (!differentBranch && !isValidBranchName(request.branch)) throw fail('Branch name is invalid');

  for (const action of request.actions) {
    if (action.action === 'create' || !action.lastCommitId || !parent) continue;
    const file = action.action === 'move' ? action.previousPath : action.path;
    if ((await lastCommitFor(gitDir, parent, file)) !== action.lastCommitId) {
      throw fail(request.changedMessage?.(file) ?? `The file has changed since you started editing it: ${file}`);
    }
  }

  // Overwriting a branch with history that leaves out its tip is a force push: a protected
  // branch refuses it unless a rule allows force pushes (GitLab's pre-receive check, as a 400).
  if (differentBranch && branchTip && request.force) {
    const rewinds = !parent || (await mergeBase(gitDir, [branchTip, parent])) !== branchTip;
    const rules = rewinds ? await protectedBranchRules(deps, project.id, request.branch) : null;
    if (rules && !rules.allowForcePush) throw fail(FORCE_PUSH_PROTECTED_MESSAGE);
  }

  let tree: string;
  try {
    tree = await treeWithActions(gitDir, parent, request.actions);
  } catch (error) {
    if (error instanceof ActionError) throw fail(error.message);
    throw error;
  }
  const now = deps.clock.now();
  const committer = { name: user.name, email: user.email, date: now };
  const author = {
    name: request.authorName || user.name,
    email: request.authorEmail || user.email,
    date: now,
  };
  const expectedOld = branchTip ?? ZERO_OID;
  let commitId: string;
  try {
    commitId = await commitTree(gitDir, {
      tree,
      parent,
      branch: request.branch,
      expectedOld,
      message: request.message,
      author,
      committer,
    });
  } catch (error) {
    if (error instanceof GitError && error.code === 'conflict') {
      throw branchMoved(request.branch);
    }
    throw error;
  }
  await recordRefChanges(deps, project, user, gitDir, [
    { ref: `refs/heads/${request.branch}`, oldId: expectedOld, newId: commitId },
  ]);
  return commitId;
});

async function hasAnyCommit(gitDir: string): Promise<boolean> {
  const [commit] = await listCommits(gitDir, { include: [], all: true, maxCount: 1 }).catch(() => []);
  return commit !== undefined;
}
