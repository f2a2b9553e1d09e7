import { markTargetsUnchecked, openMergeRequestsFrom, updateMergeRequest } from '../db/queries/merge-requests.js';
import type { Project } from '../db/schema.js';
import { moveRef } from '../git/merge.js';
import { readBranchTip } from '../git/repo-info.js';
import type { RefUpdate } from '../git/smart-http.js';
import { approvalSettings, resetApprovals } from './approvals.js';
import { syncCodeOwnerRules } from './code-owners.js';
import type { Deps } from './deps.js';

const isZero = (id: string) => /^0+$/.test(id);

/** Keeps `refs/merge-requests/<iid>/head` at the merge request's head, as GitLab keeps it. */
export async function writeMergeRequestHeadRef(gitDir: string, iid: number, sha: string): Promise<void> {
  await moveRef(gitDir, `refs/merge-requests/${iid}/head`, sha);
}

/**
 * What a branch update does to merge requests (GitLab's MergeRequests::RefreshService): open
 * merge requests from a pushed branch take its new head (their head ref too) and lose their
 * approvals when the project resets them on push; merge requests into a pushed branch have their
 * mergeability checked again. Called for every ref change, from `git push` and the API alike.
 */
export async function refreshMergeRequestsForPush(
  deps: Deps,
  project: Project,
  gitDir: string,
  updates: RefUpdate[],
): Promise<void> {
  const branches = updates.filter((u) => u.ref.startsWith('refs/heads/'));
  if (branches.length === 0) return;
  const names = branches.map((u) => u.ref.slice('refs/heads/'.length));
  await markTargetsUnchecked(deps.db, project.id, names);
  const sources = await openMergeRequestsFrom(deps.db, project.id, names);
  if (sources.length === 0) return;
  const settings = await approvalSettings(deps.db, project.id);
  for (const mr of sources) {
    const update = branches.find((u) => u.ref === `refs/heads/${mr.source_branch}`);
    if (!update || isZero(update.newId)) {
      await updateMergeRequest(deps.db, mr.id, { merge_status: 'cannot_be_merged' });
      continue;
    }
    if (update.newId === mr.sha) continue;
    const base = await readBranchTip(gitDir, mr.target_branch);
    await deps.db.transaction().execute(async (trx) => {
      await updateMergeRequest(trx, mr.id, {
        sha: update.newId,
        base_sha: base,
        merge_status: 'unchecked',
        updated_at: deps.clock.now(),
      });
      if (settings.reset_approvals_on_push) await resetApprovals(trx, mr.id);
    });
    await writeMergeRequestHeadRef(gitDir, mr.iid, update.newId);
    await syncCodeOwnerRules(deps, project, { ...mr, sha: update.newId }, gitDir);
  }
}
