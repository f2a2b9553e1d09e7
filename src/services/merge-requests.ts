import { sql } from 'kysely';
import {
  findOpenMergeRequest,
  insertMergeRequest,
  insertMergeRequestCommits,
  updateMergeRequest,
} from '../db/queries/merge-requests.js';
import type { MergeRequest, Project, User } from '../db/schema.js';
import { gitText } from '../git/command.js';
import { GitError } from '../git/errors.js';
import { listCommits } from '../git/log.js';
import { commitTreeId, isAncestor, mergeTree, moveRef, writeCommit } from '../git/merge.js';
import { mergeBase } from '../git/merge-base.js';
import { deleteRef } from '../git/ref-write.js';
import { readBranchTip } from '../git/repo-info.js';
import { isValidBranchName } from '../git/validate.js';
import { ApiError, unauthorized } from '../http/errors.js';
import { deleteQueuedJob, enqueueJob } from '../jobs/queue.js';
import { failpoint } from '../lib/failpoints.js';
import type { ProjectPolicy } from '../policies/abilities.js';
import { mayMergeInto } from '../policies/merge-requests.js';
import { type ApprovalState, approvalState } from './approvals.js';
import { syncCodeOwnerRules } from './code-owners.js';
import type { Deps } from './deps.js';
import { type MergeRequestAction, recordMergeRequestEvent } from './merge-request-events.js';
import { writeMergeRequestHeadRef } from './merge-request-refresh.js';
import { recordRefChanges, recordRefChangesWith } from './push-events.js';
import { assertWritable } from './repository-commits.js';
import { leasedWrite, liveWritesOfKind } from './write-leases.js';

/** GitLab answers branch validation errors of a merge request with the messages in an array. */
const refused = (status: number, message: string) => new ApiError(status, { message: [message] });

/** A merge lock older than this belongs to a merge that died. */
const STALE_MERGE_LOCK_MS = 10 * 60 * 1000;

/** At most this many commits of a merge request are recorded for the changelog. */
const MAX_RECORDED_COMMITS = 10_000;

const DRAFT = /^\s*(\[draft\]|\(draft\)|draft:|draft\s+-|\[wip\]|wip:)/i;

/** Whether the title marks the merge request as a draft (GitLab's draft prefixes). */
export const isDraft = (mr: Pick<MergeRequest, 'title'>) => DRAFT.test(mr.title);

const recordEvent = (deps: Deps, db: Deps['db'], action: MergeRequestAction, user: User, mr: MergeRequest) =>
  recordMergeRequestEvent(db, action, user, mr, deps.clock.now());

export interface CreateMergeRequestInput {
  sourceBranch: string;
  targetBranch: string;
  title: string;
  description?: string | undefined;
  assigneeIds?: number[] | undefined;
  reviewerIds?: number[] | undefined;
  removeSourceBranch?: boolean | undefined;
  squash?: boolean | undefined;
}

/** GitLab's Issuable limits on titles and descriptions (characters). */
const MAX_TITLE_CHARS = 255;
const MAX_DESCRIPTION_CHARS = 1_048_576;

/** The model validations of title and description, as GitLab's 400 with field messages. */
function checkText(title: string | undefined, description: string | undefined): void {
  const errors: Record<string, string[]> = {};
  if (title !== undefined && title.trim() === '') errors.title = ["can't be blank"];
  else if (title !== undefined && [...title].length > MAX_TITLE_CHARS) {
    errors.title = [`is too long (maximum is ${MAX_TITLE_CHARS} characters)`];
  }
  if (description !== undefined && [...description].length > MAX_DESCRIPTION_CHARS) {
    errors.description = [`is too long (maximum is ${MAX_DESCRIPTION_CHARS} characters)`];
  }
  if (Object.keys(errors).length > 0) throw new ApiError(400, { message: errors });
}

/** Ids of existing users among `ids` (GitLab drops the others silently). */
async function existingUserIds(deps: Deps, ids: number[] | undefined): Promise<number[] | undefined> {
  if (ids === undefined) return undefined;
  const unique = [...new Set(ids.filter((id) => id > 0))];
  if (unique.length === 0) return [];
  const rows = await deps.db.selectFrom('users').select('id').where('id', 'in', unique).execute();
  return unique.filter((id) => rows.some((r) => r.id === id));
}

/**
 * GitLab's MergeRequests::CreateService for a merge request within one project: the branches
 * must differ and exist (422), and no other open merge request may join them (409). Records the
 * `created` event with the row, then the head ref and the mergeability.
 */
export async function createMergeRequest(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  input: CreateMergeRequestInput,
): Promise<MergeRequest> {
  checkText(input.title, input.description);
  if (input.sourceBranch === input.targetBranch) {
    throw refused(422, "You can't use same project/branch for source and target");
  }
  const sourceTip = isValidBranchName(input.sourceBranch) ? await readBranchTip(gitDir, input.sourceBranch) : null;
  if (!sourceTip) throw refused(422, `Source branch "${input.sourceBranch}" does not exist`);
  const targetTip = isValidBranchName(input.targetBranch) ? await readBranchTip(gitDir, input.targetBranch) : null;
  if (!targetTip) throw refused(422, `Target branch "${input.targetBranch}" does not exist`);
  const assignees = (await existingUserIds(deps, input.assigneeIds)) ?? [];
  const reviewers = (await existingUserIds(deps, input.reviewerIds)) ?? [];
  const now = deps.clock.now();
  const mr = await deps.db.transaction().execute(async (trx) => {
    const other = await findOpenMergeRequest(trx, project.id, input.sourceBranch, input.targetBranch);
    if (other) {
      throw refused(409, `Another open merge request already exists for this source branch: !${other.iid}`);
    }
    const row = await insertMergeRequest(trx, {
      target_project_id: project.id,
      source_project_id: project.id,
      source_branch: input.sourceBranch,
      target_branch: input.targetBranch,
      title: input.title,
      description: input.description ?? null,
      author_id: user.id,
      assignee_ids: assignees,
      reviewer_ids: reviewers,
      sha: sourceTip,
      base_sha: targetTip,
      squash: input.squash ?? false,
      remove_source_branch: input.removeSourceBranch ?? false,
      created_at: now,
      updated_at: now,
    });
    await recordEvent(deps, trx, 'created', user, row);
    return row;
  });
  await writeMergeRequestHeadRef(gitDir, mr.iid, sourceTip);
  await syncCodeOwnerRules(deps, project, mr, gitDir);
  return checkMergeability(deps, project, gitDir, mr);
}

/**
 * The merge request's mergeability when it is unchecked: `git merge-tree --write-tree` of the
 * target tip and the head decides `can_be_merged` or `cannot_be_merged`. Also takes up a source
 * head that moved without a recorded push (a missing branch cannot be merged).
 */
export async function checkMergeability(
  deps: Deps,
  project: Project,
  gitDir: string,
  mr: MergeRequest,
): Promise<MergeRequest> {
  if (mr.state !== 'opened' || mr.merge_status !== 'unchecked') return mr;
  void project;
  const source = isValidBranchName(mr.source_branch) ? await readBranchTip(gitDir, mr.source_branch) : null;
  const target = isValidBranchName(mr.target_branch) ? await readBranchTip(gitDir, mr.target_branch) : null;
  let status = 'cannot_be_merged';
  if (source && target) {
    const result = await mergeTree(gitDir, target, source);
    status = result.clean ? 'can_be_merged' : 'cannot_be_merged';
  }
  const changes: Parameters<typeof updateMergeRequest>[2] = { merge_status: status };
  if (source && source !== mr.sha) {
    changes.sha = source;
    await writeMergeRequestHeadRef(gitDir, mr.iid, source);
  }
  return (await updateMergeRequest(deps.db, mr.id, changes)) ?? mr;
}

export interface UpdateMergeRequestInput {
  title?: string | undefined;
  description?: string | undefined;
  targetBranch?: string | undefined;
  stateEvent?: 'close' | 'reopen' | undefined;
  assigneeIds?: number[] | undefined;
  reviewerIds?: number[] | undefined;
  removeSourceBranch?: boolean | undefined;
  squash?: boolean | undefined;
}

/** GitLab's MergeRequests::UpdateService with `state_event` close and reopen and their events. */
export async function updateMergeRequestFields(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  mr: MergeRequest,
  input: UpdateMergeRequestInput,
): Promise<MergeRequest> {
  const now = deps.clock.now();
  const changes: Parameters<typeof updateMergeRequest>[2] = {};
  checkText(input.title, input.description);
  if (input.title !== undefined) changes.title = input.title;
  if (input.description !== undefined) changes.description = input.description;
  if (input.targetBranch !== undefined && input.targetBranch !== mr.target_branch) {
    if (input.targetBranch === mr.source_branch) {
      throw refused(422, "You can't use same project/branch for source and target");
    }
    const tip = isValidBranchName(input.targetBranch) ? await readBranchTip(gitDir, input.targetBranch) : null;
    if (!tip) throw refused(422, `Target branch "${input.targetBranch}" does not exist`);
    changes.target_branch = input.targetBranch;
    changes.base_sha = tip;
    changes.merge_status = 'unchecked';
  }
  const assignees = await existingUserIds(deps, input.assigneeIds);
  if (assignees !== undefined) changes.assignee_ids = assignees;
  const reviewers = await existingUserIds(deps, input.reviewerIds);
  if (reviewers !== undefined) changes.reviewer_ids = reviewers;
  if (input.removeSourceBranch !== undefined) changes.remove_source_branch = input.removeSourceBranch;
  if (input.squash !== undefined) changes.squash = input.squash;
  let action: 'closed' | 'reopened' | null = null;
  if (input.stateEvent === 'close' && mr.state === 'opened') {
    Object.assign(changes, { state: 'closed', closed_by_id: user.id, closed_at: now });
    action = 'closed';
  } else if (input.stateEvent === 'reopen' && mr.state === 'closed') {
    Object.assign(changes, { state: 'opened', closed_by_id: null, closed_at: null, merge_status: 'unchecked' });
    action = 'reopened';
  }
  changes.updated_at = now;
  const updated = await deps.db.transaction().execute(async (trx) => {
    if (changes.target_branch !== undefined || action === 'reopened') {
      const branch = changes.target_branch ?? mr.target_branch;
      const other = await findOpenMergeRequest(trx, project.id, mr.source_branch, branch);
      if (other && other.id !== mr.id) {
        throw refused(409, `Another open merge request already exists for this source branch: !${other.iid}`);
      }
    }
    const row = (await updateMergeRequest(trx, mr.id, changes)) as MergeRequest;
    if (action) await recordEvent(deps, trx, action, user, row);
    return row;
  });
  if (changes.target_branch !== undefined) await syncCodeOwnerRules(deps, project, updated, gitDir);
  return checkMergeability(deps, project, gitDir, updated);
}

/** GitLab's detailed_merge_status, from the state, the checks and the approvals. */
export async function detailedMergeStatus(
  deps: Deps,
  project: Project,
  gitDir: string,
  mr: MergeRequest,
  state?: ApprovalState,
): Promise<string> {
  if (mr.state !== 'opened') return 'not_open';
  if (isDraft(mr)) return 'draft';
  if (mr.merge_status === 'unchecked' || mr.merge_status === 'checking') return 'checking';
  if (mr.merge_status === 'cannot_be_merged') return 'conflict';
  if (await needsRebase(project, gitDir, mr)) return 'need_rebase';
  const approvals = state ?? (await approvalState(deps, project, mr, gitDir));
  if (approvals.approvalsLeft > 0) return 'not_approved';
  return 'mergeable';
}

/** Fast-forward and semi-linear projects need the head to contain the target tip. */
async function needsRebase(project: Project, gitDir: string, mr: MergeRequest): Promise<boolean> {
  const method = (project.settings as { merge_method?: string }).merge_method ?? 'merge';
  if (method === 'merge' || !mr.sha) return false;
  const target = await readBranchTip(gitDir, mr.target_branch);
  return target !== null && !(await isAncestor(gitDir, target, mr.sha));
}

export interface MergeInput {
  sha?: string | undefined;
  mergeCommitMessage?: string | undefined;
  squashCommitMessage?: string | undefined;
  squash?: boolean | undefined;
  shouldRemoveSourceBranch?: boolean | undefined;
}

/** GitLab's default merge commit message. */
function defaultMergeMessage(project: Project, mr: MergeRequest): string {
  const parts = [`Merge branch '${mr.source_branch}' into '${mr.target_branch}'`, mr.title];
  if (mr.description) parts.push(mr.description);
  parts.push(`See merge request ${project.full_path}!${mr.iid}`);
  return parts.join('\n\n');
}

/**
 * `PUT …/merge` (GitLab's API checks, then MergeRequests::MergeService): 401 when the user may
 * not merge into the target branch, 405 when the merge request is not open, a draft or missing
 * approvals, 406 when it cannot be merged (conflicts, or a fast-forward project that needs a
 * rebase), 409 when `sha` is not the head. Writes a merge commit, or moves the target for
 * fast-forward projects, with a compare-and-swap on the target branch.
 *
 * A merge that died (a crashed process) leaves its merge request locked: the next merge takes
 * the lock over, and finishes the merge when its commit already reached the target branch
 * (GitLab's StuckMergeJobsWorker), or merges again when it did not.
 */
export const mergeMergeRequest = leasedWrite(async function mergeMergeRequest(
  deps: Deps,
  project: Project,
  policy: ProjectPolicy,
  gitDir: string,
  given: MergeRequest,
  input: MergeInput,
): Promise<MergeRequest> {
  const user = policy.user as User;
  if (!(await mayMergeInto(deps, project, policy, given.target_branch))) throw unauthorized();
  let mr = await checkMergeability(deps, project, gitDir, given);
  const deadLock = mr.state === 'locked' && (await mergeLockIsDead(deps, project, mr));
  if (deadLock) {
    const finished = await finishLandedMerge(deps, project, user, gitDir, mr, input);
    if (finished) return finished;
    // The dead merge never moved the target: its commits are garbage, and the merge starts over.
    if (mr.merge_commit_sha !== null || mr.squash_commit_sha !== null) {
      mr = (await updateMergeRequest(deps.db, mr.id, { merge_commit_sha: null, squash_commit_sha: null })) ?? mr;
    }
  }
  const state = await approvalState(deps, project, mr, gitDir);
  if ((mr.state !== 'opened' && !deadLock) || isDraft(mr) || state.approvalsLeft > 0) {
    throw new ApiError(405, { message: '405 Method Not Allowed' });
  }
  if (mr.merge_status !== 'can_be_merged' || (await needsRebase(project, gitDir, mr))) {
    throw new ApiError(406, { message: 'Branch cannot be merged' });
  }
  const head = mr.sha as string;
  if (input.sha !== undefined && input.sha !== head) {
    throw new ApiError(409, { message: `SHA does not match HEAD of source branch: ${head}` });
  }
  assertWritable(project);
  // GitLab locks the merge request while it merges: of concurrent merges only one gets past here.
  // A dead lock is taken over only as it was read (a compare-and-swap on its time).
  const now = deps.clock.now();
  const lockedAt = new Date(mr.updated_at.getTime() + 1);
  const claimed = await deps.db
    .updateTable('merge_requests')
    .set({ state: 'locked', updated_at: now })
    .where('id', '=', mr.id)
    .where((eb) =>
      deadLock ? eb.and([eb('state', '=', 'locked'), eb('updated_at', '<', lockedAt)]) : eb('state', '=', 'opened'),
    )
    .returning('id')
    .executeTakeFirst();
  if (!claimed) throw new ApiError(405, { message: '405 Method Not Allowed' });
  failpoint('merge:after-lock');
  const progress = { targetMoved: false };
  try {
    return await performMerge(deps, project, user, gitDir, mr, input, progress);
  } catch (error) {
    // Once the target moved, the merge happened: the lock stays, with the commits recorded, for
    // the next merge to finish it (the database may be what failed).
    if (!progress.targetMoved) {
      await updateMergeRequest(deps.db, mr.id, { state: 'opened', merge_commit_sha: null, squash_commit_sha: null });
    }
    throw error;
  }
}, 'merge');

/**
 * Whether a locked merge request's lock belongs to a merge that died: older than
 * STALE_MERGE_LOCK_MS, or no other merge into the repository is under way (a merge holds a
 * `merge` write lease until it ends, and the leases of dead processes are not counted).
 */
async function mergeLockIsDead(deps: Deps, project: Project, mr: MergeRequest): Promise<boolean> {
  if (deps.clock.now().getTime() - mr.updated_at.getTime() > STALE_MERGE_LOCK_MS) return true;
  // This request's own lease is one of them.
  return (await liveWritesOfKind(deps, project.id, 'merge')) <= 1;
}

/** The first parent of a commit, or null (a root commit). */
async function firstParent(gitDir: string, commit: string): Promise<string | null> {
  const out = await gitText({
    gitDir,
    subcommand: 'rev-parse',
    flags: ['--verify', '-q'],
    args: [`${commit}^1`],
  }).catch(() => '');
  return out.trim() || null;
}

/**
 * Finishes the merge a dead merge left half done: when the commit it recorded before moving the
 * target (its merge commit, else its squash commit, else the head for a fast-forward) is in the
 * target branch, the merge happened, and what followed the ref update is done now. Null when the
 * target does not hold it (the merge never happened).
 */
async function finishLandedMerge(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  mr: MergeRequest,
  input: MergeInput,
): Promise<MergeRequest | null> {
  const head = mr.sha;
  const target = await readBranchTip(gitDir, mr.target_branch);
  if (!head || !target) return null;
  const landed = mr.merge_commit_sha ?? mr.squash_commit_sha ?? head;
  if (!(await isAncestor(gitDir, landed, target))) return null;
  // The target before the merge: a merge commit's first parent; for a fast-forward, the commit
  // the moved-to commit stands on (exact for a squash, the nearest guess otherwise).
  const before = (await firstParent(gitDir, landed)) ?? target;
  deps.logger.warn({ project: project.id, mr: mr.iid, commit: landed }, 'finishing a merge that a crash interrupted');
  return completeMerge(deps, project, user, gitDir, mr, input, {
    before,
    after: target,
    mergeCommit: mr.merge_commit_sha,
    squashSha: mr.squash_commit_sha,
    squash: mr.squash_commit_sha !== null,
  });
}

/** The merge itself, for a merge request this request locked. */
async function performMerge(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  mr: MergeRequest,
  input: MergeInput,
  progress: { targetMoved: boolean },
): Promise<MergeRequest> {
  const head = mr.sha as string;
  const target = await readBranchTip(gitDir, mr.target_branch);
  if (!target) throw new ApiError(406, { message: 'Branch cannot be merged' });
  const now = deps.clock.now();
  const identity = { name: user.name || user.username, email: user.email, date: now };
  const method = (project.settings as { merge_method?: string }).merge_method ?? 'merge';
  const squash = input.squash ?? mr.squash;

  let sourceSide = head;
  let squashSha: string | null = null;
  if (squash) {
    const base = (await mergeBase(gitDir, [target, head])) ?? target;
    squashSha = await writeCommit(gitDir, {
      tree: await commitTreeId(gitDir, head),
      parents: [base],
      message: input.squashCommitMessage ?? mr.title,
      author: identity,
      committer: identity,
    });
    sourceSide = squashSha;
    failpoint('merge:after-squash-commit');
  }
  let newTip: string;
  let mergeCommit: string | null = null;
  if (method === 'ff' && (await isAncestor(gitDir, target, sourceSide))) {
    newTip = sourceSide;
  } else {
    const merged = await mergeTree(gitDir, target, sourceSide);
    if (!merged.clean) throw new ApiError(406, { message: 'Branch cannot be merged' });
    mergeCommit = await writeCommit(gitDir, {
      tree: merged.tree,
      parents: [target, sourceSide],
      message: input.mergeCommitMessage ?? defaultMergeMessage(project, mr),
      author: identity,
      committer: identity,
    });
    newTip = mergeCommit;
    failpoint('merge:after-merge-commit');
  }
  // What is about to reach the target, recorded first (GitLab's in_progress_merge_commit_sha):
  // after a crash, the next merge tells from it whether this one happened.
  if (mergeCommit !== null || squashSha !== null) {
    await updateMergeRequest(deps.db, mr.id, { merge_commit_sha: mergeCommit, squash_commit_sha: squashSha });
    failpoint('merge:after-intent');
  }
  try {
    await moveRef(gitDir, `refs/heads/${mr.target_branch}`, newTip, target);
  } catch (error) {
    // The target moved meanwhile: nothing was merged; the client may try again.
    if (error instanceof GitError && error.code === 'conflict') {
      throw new ApiError(409, { message: 'Merge request is not mergeable' });
    }
    throw error;
  }
  progress.targetMoved = true;
  failpoint('merge:after-ref-update');
  return completeMerge(deps, project, user, gitDir, mr, input, {
    before: target,
    after: newTip,
    mergeCommit,
    squashSha,
    squash,
  });
}

/**
 * What follows the target's move: the merge request merged, its `merged` event and the push to
 * the target (events, hooks, pipeline) in one transaction; then the source branch removed when
 * asked.
 */
async function completeMerge(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  mr: MergeRequest,
  input: MergeInput,
  result: { before: string; after: string; mergeCommit: string | null; squashSha: string | null; squash: boolean },
): Promise<MergeRequest> {
  const head = mr.sha as string;
  const now = deps.clock.now();
  // The commits it brought, for the changelog (GitLab's merge request diff commits).
  const brought = await listCommits(gitDir, {
    include: [head],
    exclude: [result.before],
    maxCount: MAX_RECORDED_COMMITS,
  });
  const push = [{ ref: `refs/heads/${mr.target_branch}`, oldId: result.before, newId: result.after }];
  const removeSource =
    (input.shouldRemoveSourceBranch ?? mr.remove_source_branch) && mr.source_branch !== project.default_branch;
  const removal = { project_id: project.id, user_id: user.id, branch: mr.source_branch, head };
  let removalJob: number | undefined;
  const merged = await recordRefChangesWith(deps, project, user, gitDir, push, async (trx) => {
    await insertMergeRequestCommits(
      trx,
      mr,
      brought.map((c) => c.id),
    );
    const row = (await updateMergeRequest(trx, mr.id, {
      state: 'merged',
      merged_by_id: user.id,
      merged_at: now,
      merge_commit_sha: result.mergeCommit,
      squash_commit_sha: result.squashSha,
      squash: result.squash,
      merge_status: 'can_be_merged',
      updated_at: now,
    })) as MergeRequest;
    await recordEvent(deps, trx, 'merged', user, row);
    // The source branch's removal, queued with the merge: done below at once, and by the job
    // only when this process dies before that (GitLab removes it in a worker too).
    if (removeSource) removalJob = (await enqueueJob(trx, REMOVE_SOURCE_BRANCH_JOB, removal)).id;
    return row;
  });
  failpoint('merge:after-db');
  if (removeSource) {
    await removeMergedSourceBranch(deps, project, user, gitDir, removal.branch, head);
    if (removalJob !== undefined) await deleteQueuedJob(deps.db, removalJob);
  }
  return merged;
}

/** The job kind that removes a merged merge request's source branch (src/jobs/merge-requests.ts). */
export const REMOVE_SOURCE_BRANCH_JOB = 'merge_request_remove_source_branch';

/**
 * Removes the source branch of a merge that asked for it, if it is still at the merged head (a
 * branch that moved keeps its new commits; one already gone is left so), with its push event.
 */
export async function removeMergedSourceBranch(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  branch: string,
  head: string,
  options: { afterCrash?: boolean } = {},
): Promise<void> {
  if (!isValidBranchName(branch)) return;
  const removal = [{ ref: `refs/heads/${branch}`, oldId: head, newId: '0'.repeat(head.length) }];
  try {
    await deleteRef(gitDir, 'branch', branch, head);
  } catch (error) {
    if (!(error instanceof GitError && (error.code === 'conflict' || error.code === 'not_found'))) throw error;
    // After a crash, a branch already gone may be the merge's own removal whose push event the
    // crash lost: recorded now, unless an event of that removal exists.
    if (options.afterCrash && (await readBranchTip(gitDir, branch)) === null) {
      if (!(await removalRecorded(deps, project.id, branch, head))) {
        await recordRefChanges(deps, project, user, gitDir, removal);
      }
    }
    return;
  }
  failpoint('merge:after-source-branch-removal');
  await recordRefChanges(deps, project, user, gitDir, removal);
}

/** Whether a `pushed` event records the removal of `branch` from `head`. */
async function removalRecorded(deps: Deps, projectId: number, branch: string, head: string): Promise<boolean> {
  const row = await deps.db
    .selectFrom('events')
    .select('id')
    .where('project_id', '=', projectId)
    .where('action', '=', 'pushed')
    .where(sql<boolean>`push_data->>'action' = 'removed'`)
    .where(sql<boolean>`push_data->>'ref_type' = 'branch'`)
    .where(sql<boolean>`push_data->>'ref' = ${branch}`)
    .where(sql<boolean>`push_data->>'commit_from' = ${head}`)
    .executeTakeFirst();
  return row !== undefined;
}
