import type { MergeRequest, Project, User } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';
import { type PresentContext, presentUserBasic } from './user.js';

export interface MergeRequestView {
  mr: MergeRequest;
  project: Pick<Project, 'id' | 'full_path'>;
  /** Users the merge request names (author, assignees, reviewers, merged_by, closed_by), by id. */
  users: Map<number, User>;
  detailedMergeStatus: string;
}

export interface MergeRequestDetail {
  changesCount: string | null;
  diffRefs: { base_sha: string | null; head_sha: string | null; start_sha: string | null };
  canMerge: boolean;
}

const time = (date: Date | null) => (date ? isoTime(date) : null);

/** GitLab's MergeRequestBasic entity (lib/api/entities/merge_request_basic.rb). */
export function presentMergeRequestBasic(view: MergeRequestView, pc: PresentContext) {
  const { mr, project, users } = view;
  const user = (id: number | null) => {
    const found = id !== null ? users.get(id) : undefined;
    return found ? presentUserBasic(found, pc) : null;
  };
  const list = (ids: number[]) =>
    ids.flatMap((id) => (users.has(id) ? [presentUserBasic(users.get(id) as User, pc)] : []));
  const assignees = list(mr.assignee_ids);
  const draft = /^\s*(\[draft\]|\(draft\)|draft:|draft\s+-|\[wip\]|wip:)/i.test(mr.title);
  const reference = `!${mr.iid}`;
  return {
    id: mr.id,
    iid: mr.iid,
    project_id: mr.target_project_id,
    title: mr.title,
    description: mr.description,
    state: mr.state,
    created_at: isoTime(mr.created_at),
    updated_at: isoTime(mr.updated_at),
    merged_by: user(mr.merged_by_id),
    merge_user: user(mr.merged_by_id),
    merged_at: time(mr.merged_at),
    closed_by: user(mr.closed_by_id),
    closed_at: time(mr.closed_at),
    target_branch: mr.target_branch,
    source_branch: mr.source_branch,
    user_notes_count: 0,
    upvotes: 0,
    downvotes: 0,
    author: user(mr.author_id),
    assignees,
    assignee: assignees[0] ?? null,
    reviewers: list(mr.reviewer_ids),
    source_project_id: mr.source_project_id,
    target_project_id: mr.target_project_id,
    labels: [] as string[],
    draft,
    imported: false,
    imported_from: 'none',
    work_in_progress: draft,
    milestone: null,
    merge_when_pipeline_succeeds: false,
    merge_status: mr.merge_status,
    detailed_merge_status: view.detailedMergeStatus,
    sha: mr.sha,
    merge_commit_sha: mr.merge_commit_sha,
    squash_commit_sha: mr.squash_commit_sha,
    discussion_locked: null,
    should_remove_source_branch: mr.state === 'merged' ? mr.remove_source_branch : null,
    force_remove_source_branch: mr.remove_source_branch,
    prepared_at: isoTime(mr.created_at),
    reference,
    references: { short: reference, relative: reference, full: `${project.full_path}!${mr.iid}` },
    web_url: `${pc.baseUrl}/${project.full_path}/-/merge_requests/${mr.iid}`,
    time_stats: { time_estimate: 0, total_time_spent: 0, human_time_estimate: null, human_total_time_spent: null },
    squash: mr.squash,
    squash_on_merge: mr.squash,
    task_completion_status: { count: 0, completed_count: 0 },
    has_conflicts: mr.merge_status === 'cannot_be_merged',
    blocking_discussions_resolved: true,
  };
}

/** GitLab's MergeRequest entity: the basic one plus what the single view adds. */
export function presentMergeRequest(view: MergeRequestView, detail: MergeRequestDetail, pc: PresentContext) {
  return {
    ...presentMergeRequestBasic(view, pc),
    subscribed: false,
    changes_count: detail.changesCount,
    latest_build_started_at: null,
    latest_build_finished_at: null,
    first_deployed_to_production_at: null,
    pipeline: null,
    head_pipeline: null,
    diff_refs: detail.diffRefs,
    merge_error: null,
    first_contribution: false,
    user: { can_merge: detail.canMerge },
  };
}
