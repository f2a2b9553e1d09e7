import type { Kysely } from 'kysely';
import { findProjectWithNamespace } from '../db/queries/projects.js';
import { findUserById } from '../db/queries/users.js';
import type { DB, MergeRequest, User } from '../db/schema.js';
import { commitTitle } from '../git/commit.js';
import { readCommit } from '../git/refs.js';
import { enqueueJob } from '../jobs/queue.js';
import { isoTime } from '../lib/clock.js';
import type { Deps } from './deps.js';
import { fanOutHooks } from './hook-delivery.js';
import { projectHookAttrs, userHookAttrs, xmlSchemaTime } from './hook-payloads.js';
import type { MergeRequestAction } from './merge-request-events.js';
import { hasListeners } from './webhooks.js';

export const MERGE_REQUEST_HOOKS_JOB = 'merge_request_hooks';

/** The `object_attributes.action` of GitLab's merge request hook for each recorded event. */
const HOOK_ACTIONS: Record<MergeRequestAction, string> = {
  created: 'open',
  closed: 'close',
  reopened: 'reopen',
  merged: 'merge',
  approved: 'approved',
};

/**
 * Tells the target project's webhooks and integrations about a merge request event: call it in
 * the transaction of the change (recordMergeRequestEvent does). The payload is built in the
 * background from the merge request as it then is.
 */
export async function queueMergeRequestHooks(
  db: Kysely<DB>,
  action: MergeRequestAction,
  user: User,
  mr: MergeRequest,
): Promise<void> {
  if (!(await hasListeners(db, mr.target_project_id))) return;
  await enqueueJob(db, MERGE_REQUEST_HOOKS_JOB, {
    merge_request_id: mr.id,
    action: HOOK_ACTIONS[action],
    user_id: user.id,
  });
}

/** GitLab's merge request hook payload (Gitlab::HookData::MergeRequestBuilder), the fields Depot has. */
export async function buildMergeRequestPayload(
  deps: Deps,
  mr: MergeRequest,
  action: string,
  user: User,
): Promise<Record<string, unknown> | null> {
  const target = await findProjectWithNamespace(deps.db, { id: mr.target_project_id });
  const source =
    mr.source_project_id === mr.target_project_id
      ? target
      : await findProjectWithNamespace(deps.db, { id: mr.source_project_id });
  if (!target || !source) return null;
  const baseUrl = deps.config.baseUrl;
  const targetAttrs = projectHookAttrs(baseUrl, target.project, target.namespace);
  const sourceAttrs = projectHookAttrs(baseUrl, source.project, source.namespace);
  const gitDir = deps.storages.repositoryPath(source.project.repository_storage, source.project.id);
  const head = mr.sha ? await readCommit(gitDir, mr.sha).catch(() => null) : null;
  const draft = /^\s*(\[draft\]|\(draft\)|draft:|draft\s+-|\[wip\]|wip:)/i.test(mr.title);
  return {
    object_kind: 'merge_request',
    event_type: 'merge_request',
    user: userHookAttrs(user),
    project: targetAttrs,
    object_attributes: {
      id: mr.id,
      iid: mr.iid,
      target_branch: mr.target_branch,
      source_branch: mr.source_branch,
      source_project_id: mr.source_project_id,
      target_project_id: mr.target_project_id,
      author_id: mr.author_id,
      assignee_ids: mr.assignee_ids,
      assignee_id: mr.assignee_ids[0] ?? null,
      reviewer_ids: mr.reviewer_ids,
      title: mr.title,
      description: mr.description ?? '',
      created_at: isoTime(mr.created_at),
      updated_at: isoTime(mr.updated_at),
      merged_at: isoTime(mr.merged_at),
      closed_at: isoTime(mr.closed_at),
      state: mr.state,
      merge_status: mr.merge_status,
      merge_commit_sha: mr.merge_commit_sha,
      merge_user_id: mr.merged_by_id,
      url: `${targetAttrs.web_url}/-/merge_requests/${mr.iid}`,
      source: sourceAttrs,
      target: targetAttrs,
      last_commit: head
        ? {
            id: head.id,
            message: head.message,
            title: commitTitle(head.message),
            timestamp: xmlSchemaTime(head.committer.time, head.committer.tzMinutes),
            url: `${sourceAttrs.web_url}/-/commit/${head.id}`,
            author: { name: head.author.name, email: head.author.email },
          }
        : null,
      work_in_progress: draft,
      draft,
      head_pipeline_id: null,
      blocking_discussions_resolved: true,
      labels: [],
      action,
    },
    labels: [],
    changes: {},
    repository: {
      name: targetAttrs.name,
      url: targetAttrs.url,
      description: targetAttrs.description,
      homepage: targetAttrs.homepage,
    },
    assignees: [],
    reviewers: [],
  };
}

/** The background half of queueMergeRequestHooks: build the payload, then fan it out. */
export async function runMergeRequestHooks(deps: Deps, mergeRequestId: number, action: string, userId: number) {
  const mr = await deps.db.selectFrom('merge_requests').selectAll().where('id', '=', mergeRequestId).executeTakeFirst();
  const user = await findUserById(deps.db, userId);
  if (!mr || !user) return;
  const data = await buildMergeRequestPayload(deps, mr, action, user);
  if (!data) return;
  await fanOutHooks(deps, mr.target_project_id, [{ trigger: 'merge_requests_events', data, branch: mr.target_branch }]);
}
