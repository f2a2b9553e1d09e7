import type { Project, User } from '../db/schema.js';
import { objectInfo } from '../git/catfile.js';
import { GitError, RefNameConflictError } from '../git/errors.js';
import { createRef, deleteRef, type RefKind, writeTagObject } from '../git/ref-write.js';
import { isEmptyRepository, listMergedBranches, resolveCommitId } from '../git/refs.js';
import { readBranchTip } from '../git/repo-info.js';
import { isValidBranchName, isValidRevision, isValidTagName } from '../git/validate.js';
import { commitFiles, ZERO_OID } from '../git/write.js';
import { ApiError, notFound } from '../http/errors.js';
import type { ProjectPolicy } from '../policies/abilities.js';
import { canDeleteProtectedBranch, matchingRules } from '../policies/branch-protection.js';
import type { Deps } from './deps.js';
import {
  checkProtectedBranchCreation,
  DELETE_PROTECTED_MESSAGE,
  loadProtectedBranches,
  protectedBranchRules,
} from './protected-branches.js';
import { recordRefChanges } from './push-events.js';
import { leasedWrite } from './write-leases.js';

/** GitLab answers every refusal of these services as a 400 with the service's message. */
const fail = (message: string) => new ApiError(400, { message });

const isConflict = (error: unknown): error is GitError => error instanceof GitError && error.code === 'conflict';

const identityOf = (user: User, date: Date) => ({ name: user.name || user.username, email: user.email, date });

/**
 * GitLab's create_default_branch: a branch created in an empty repository first gets the default
 * branch, holding an empty README.md, so that the ref has something to name.
 */
async function createDefaultBranch(deps: Deps, project: Project, user: User, gitDir: string): Promise<void> {
  const branch = project.default_branch ?? 'main';
  let commit: string;
  try {
    commit = await commitFiles(gitDir, {
      branch,
      parent: null,
      files: [{ path: 'README.md', content: Buffer.alloc(0) }],
      message: 'Add README.md',
      author: identityOf(user, deps.clock.now()),
    });
  } catch (error) {
    // Someone else made the first commit meanwhile: the repository is no longer empty.
    if (isConflict(error)) return;
    throw error;
  }
  await recordRefChanges(deps, project, user, gitDir, [
    { ref: `refs/heads/${branch}`, oldId: ZERO_OID, newId: commit },
  ]);
}

/**
 * GitLab's Branches::CreateService: validates the name, resolves `ref` to a commit and creates
 * the branch with a compare-and-swap, so of two concurrent creators exactly one wins. Returns
 * the commit the branch points at.
 */
export const createBranch = leasedWrite(async function createBranch(
  deps: Deps,
  project: Project,
  policy: ProjectPolicy,
  gitDir: string,
  name: string,
  ref: string,
): Promise<string> {
  const user = policy.user as User;
  if (await isEmptyRepository(gitDir)) await createDefaultBranch(deps, project, user, gitDir);
  if (!isValidBranchName(name)) throw fail('Branch name is invalid');
  if (await readBranchTip(gitDir, name)) throw fail('Branch already exists');
  const commit = await resolveCommitId(gitDir, ref);
  if (!commit) throw fail(`Invalid reference name: ${ref}`);
  await checkProtectedBranchCreation(deps, project, policy, name);
  try {
    await createRef(gitDir, 'branch', name, commit);
  } catch (error) {
    if (error instanceof RefNameConflictError) {
      throw fail(`Failed to create branch '${name}': Branch name conflicts with existing branch hierarchy.`);
    }
    if (isConflict(error)) throw fail('Branch already exists');
    throw error;
  }
  await recordRefChanges(deps, project, user, gitDir, [{ ref: `refs/heads/${name}`, oldId: ZERO_OID, newId: commit }]);
  return commit;
});

/** Removes a ref that was found at `expected`; a concurrent change is a 404 when it is gone, else 400. */
async function removeRef(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  kind: RefKind,
  name: string,
  expected: string,
): Promise<void> {
  try {
    await deleteRef(gitDir, kind, name, expected);
  } catch (error) {
    if (!isConflict(error)) throw error;
    const ref = kind === 'branch' ? `refs/heads/${name}` : `refs/tags/${name}`;
    if (!(await objectInfo(gitDir, ref))) throw notFound(kind === 'branch' ? 'Branch' : 'Tag');
    throw fail(kind === 'branch' ? 'Failed to remove branch' : 'Failed to remove tag');
  }
  const prefix = kind === 'branch' ? 'refs/heads/' : 'refs/tags/';
  await recordRefChanges(deps, project, user, gitDir, [{ ref: `${prefix}${name}`, oldId: expected, newId: ZERO_OID }]);
}

/**
 * GitLab's Branches::DeleteService for a branch found at `tip`. The default branch is protected
 * from deletion for everyone, and a protected branch may be removed by maintainers only (GitLab's
 * pre-receive checks, answered as a 400 with their text).
 */
export const deleteBranch = leasedWrite(async function deleteBranch(
  deps: Deps,
  project: Project,
  policy: ProjectPolicy,
  gitDir: string,
  name: string,
  tip: string,
): Promise<void> {
  const user = policy.user as User;
  if (name === project.default_branch) throw fail('The default branch of a project cannot be deleted.');
  if ((await protectedBranchRules(deps, project.id, name)) && !canDeleteProtectedBranch(policy)) {
    throw fail(DELETE_PROTECTED_MESSAGE);
  }
  await removeRef(deps, project, user, gitDir, 'branch', name, tip);
});

/**
 * GitLab's Branches::DeleteMergedService: removes every branch merged into the default branch,
 * except the default branch and protected ones. Without push rights nothing happens, as
 * GitLab's worker refuses silently after the API has answered. Returns the names removed.
 */
export const deleteMergedBranches = leasedWrite(async function deleteMergedBranches(
  deps: Deps,
  project: Project,
  policy: ProjectPolicy,
  gitDir: string,
): Promise<string[]> {
  const user = policy.user;
  if (!user || !policy.can('push_code') || !project.default_branch) return [];
  const tip = await readBranchTip(gitDir, project.default_branch);
  if (!tip) return [];
  const removed: string[] = [];
  const rules = await loadProtectedBranches(deps, project.id);
  for (const branch of await listMergedBranches(gitDir, tip)) {
    if (branch.name === project.default_branch || matchingRules(rules, branch.name).length > 0) continue;
    try {
      await deleteRef(gitDir, 'branch', branch.name, branch.target);
    } catch (error) {
      // Moved or removed meanwhile: it is no longer the merged branch we found; leave it.
      if (isConflict(error)) continue;
      throw error;
    }
    removed.push(branch.name);
    await recordRefChanges(deps, project, user, gitDir, [
      {
        ref: `refs/heads/${branch.name}`,
        oldId: branch.target,
        newId: ZERO_OID,
      },
    ]);
  }
  return removed;
});

/**
 * GitLab's Tags::CreateService: a lightweight tag, or with a message an annotated tag with the
 * user as tagger. Created with a compare-and-swap, so an existing tag is never moved.
 */
export const createTag = leasedWrite(async function createTag(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  request: { name: string; ref: string; message?: string | undefined },
): Promise<void> {
  const { name, ref } = request;
  if (ref.trim() === '') throw fail('Target is empty');
  if (!isValidTagName(name)) throw fail('Tag name invalid');
  const target = isValidRevision(ref) ? await objectInfo(gitDir, ref) : null;
  if (!target) throw fail(`Target ${ref} is invalid`);
  if (await objectInfo(gitDir, `refs/tags/${name}`)) throw fail(`Tag ${name} already exists`);
  const message = request.message?.trim() ?? '';
  const tagged =
    message === ''
      ? target.oid
      : await writeTagObject(gitDir, {
          name,
          target: target.oid,
          targetType: target.type,
          tagger: identityOf(user, deps.clock.now()),
          message,
        });
  try {
    await createRef(gitDir, 'tag', name, tagged);
  } catch (error) {
    if (error instanceof RefNameConflictError) {
      throw fail(`Failed to create tag '${name}': Tag name conflicts with existing tag hierarchy.`);
    }
    if (isConflict(error)) throw fail(`Tag ${name} already exists`);
    throw error;
  }
  await recordRefChanges(deps, project, user, gitDir, [{ ref: `refs/tags/${name}`, oldId: ZERO_OID, newId: tagged }]);
});

/** GitLab's Tags::DestroyService for a tag found pointing at `target`. */
export const deleteTag = leasedWrite(async function deleteTag(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  name: string,
  target: string,
): Promise<void> {
  await removeRef(deps, project, user, gitDir, 'tag', name, target);
});
