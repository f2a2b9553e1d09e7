import { z } from 'zod';
import { countMergeRequests, findMergeRequestByIid, listMergeRequests } from '../db/queries/merge-requests.js';
import { findUserByUsername, findUsersByIds } from '../db/queries/users.js';
import type { MergeRequest, User } from '../db/schema.js';
import { diffCommits } from '../git/diff.js';
import { listCommits } from '../git/log.js';
import { changedPaths } from '../git/merge.js';
import { mergeBase } from '../git/merge-base.js';
import { readBranchTip } from '../git/repo-info.js';
import type { AppContext } from '../http/context.js';
import { forbidden, notFound } from '../http/errors.js';
import { paginateArray, paginateQuery } from '../http/pagination.js';
import { atLeastOneOf, p, pagination, toInteger } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import {
  canCreateMergeRequest,
  canReadMergeRequests,
  canUpdateMergeRequest,
  mayMergeInto,
} from '../policies/merge-requests.js';
import { presentCommit } from '../presenters/commit.js';
import { presentDiff } from '../presenters/diff.js';
import { type MergeRequestView, presentMergeRequest, presentMergeRequestBasic } from '../presenters/merge-request.js';
import {
  checkMergeability,
  createMergeRequest,
  detailedMergeStatus,
  mergeMergeRequest,
  updateMergeRequestFields,
} from '../services/merge-requests.js';
import { created, currentUser, type LoadedRepository, loadRepository } from './helpers.js';

/** Grape's `allow_blank: false`. */
const present = () => p.string().refine((v) => v.trim() !== '', { message: 'is empty' });
/** User ids (0 clears, as in GitLab); beyond int4 they are invalid rather than failing in SQL. */
const userId = () => z.preprocess(toInteger, z.number().int().min(0).max(2147483647));
const ids = () => p.array(userId()).optional();
const mrPath = '/projects/:id/merge_requests/:merge_request_iid';
const iidParams = { id: p.string(), merge_request_iid: p.id() };

export interface LoadedMergeRequest extends LoadedRepository {
  mr: MergeRequest;
}

/** The project (404 when invisible, 403 without read access to merge requests) and `:merge_request_iid`. */
export async function loadMergeRequest(ctx: AppContext, id: string, iid: number): Promise<LoadedMergeRequest> {
  const loaded = await loadRepository(ctx, id);
  if (!canReadMergeRequests(loaded.policy)) throw forbidden();
  const mr = await findMergeRequestByIid(ctx.state.deps.db, loaded.project.id, iid);
  if (!mr) throw notFound('Merge Request');
  return { ...loaded, mr };
}

async function usersOf(ctx: AppContext, mrs: MergeRequest[]): Promise<Map<number, User>> {
  const wanted = new Set<number>();
  for (const mr of mrs) {
    for (const id of [mr.author_id, mr.merged_by_id, mr.closed_by_id, ...mr.assignee_ids, ...mr.reviewer_ids]) {
      if (id !== null) wanted.add(id);
    }
  }
  const users = wanted.size ? await findUsersByIds(ctx.state.deps.db, [...wanted]) : [];
  return new Map(users.map((u) => [u.id, u]));
}

async function views(ctx: AppContext, loaded: LoadedRepository, mrs: MergeRequest[]): Promise<MergeRequestView[]> {
  const users = await usersOf(ctx, mrs);
  const deps = ctx.state.deps;
  const result: MergeRequestView[] = [];
  for (const mr of mrs) {
    result.push({
      mr,
      project: loaded.project,
      users,
      detailedMergeStatus: await detailedMergeStatus(deps, loaded.project, loaded.gitDir, mr),
    });
  }
  return result;
}

/** The single merge request: checked for mergeability first, with diff refs and the caller's can_merge. */
async function presentSingle(ctx: AppContext, loaded: LoadedRepository, given: MergeRequest) {
  const deps = ctx.state.deps;
  const { project, gitDir, policy } = loaded;
  const mr = await checkMergeability(deps, project, gitDir, given);
  const [view] = await views(ctx, loaded, [mr]);
  const startSha =
    mr.state === 'opened' ? ((await readBranchTip(gitDir, mr.target_branch)) ?? mr.base_sha) : mr.base_sha;
  const baseSha = startSha && mr.sha ? await mergeBase(gitDir, [startSha, mr.sha]).catch(() => null) : null;
  const changes = baseSha && mr.sha ? await changedPaths(gitDir, baseSha, mr.sha).catch(() => null) : null;
  const canMerge = policy.user !== null && (await mayMergeInto(deps, project, policy, mr.target_branch));
  return presentMergeRequest(
    view as MergeRequestView,
    {
      changesCount: changes === null ? null : String(changes.length),
      diffRefs: { base_sha: baseSha, head_sha: mr.sha, start_sha: startSha },
      canMerge,
    },
    { baseUrl: deps.config.baseUrl },
  );
}

const listParams = z.object({
  id: p.string(),
  state: p.enum(['opened', 'closed', 'locked', 'merged', 'all']).default('all'),
  scope: p
    .enum(['created_by_me', 'assigned_to_me', 'created-by-me', 'assigned-to-me', 'reviews_for_me', 'all'])
    .optional(),
  author_id: userId().optional(),
  author_username: p.string().optional(),
  assignee_id: userId().optional(),
  reviewer_id: userId().optional(),
  source_branch: p.string().optional(),
  target_branch: p.string().optional(),
  search: p.string().optional(),
  iids: p.array(userId()).optional(),
  order_by: p.enum(['created_at', 'updated_at', 'title', 'merged_at']).default('created_at'),
  sort: p.enum(['asc', 'desc']).default('desc'),
  view: p.enum(['simple']).optional(),
  ...pagination(),
});

const createParams = z.object({
  id: p.string(),
  source_branch: present(),
  target_branch: present(),
  title: present(),
  description: p.string().optional(),
  assignee_id: userId().optional(),
  assignee_ids: ids(),
  reviewer_ids: ids(),
  remove_source_branch: p.bool().optional(),
  squash: p.bool().optional(),
  target_project_id: userId().optional(),
});

const UPDATE_FIELDS = [
  'target_branch',
  'title',
  'assignee_id',
  'assignee_ids',
  'reviewer_ids',
  'description',
  'state_event',
  'remove_source_branch',
  'squash',
  'discussion_locked',
  'labels',
  'milestone_id',
];

const updateParams = z
  .object({
    ...iidParams,
    target_branch: present().optional(),
    title: present().optional(),
    description: p.string().optional(),
    assignee_id: userId().optional(),
    assignee_ids: ids(),
    reviewer_ids: ids(),
    state_event: p.enum(['close', 'reopen']).optional(),
    remove_source_branch: p.bool().optional(),
    squash: p.bool().optional(),
    discussion_locked: p.bool().optional(),
    labels: p.string().optional(),
    milestone_id: userId().optional(),
  })
  .superRefine((input, ctx) => atLeastOneOf(input, UPDATE_FIELDS, ctx));

const mergeParams = z.object({
  ...iidParams,
  sha: p.string().optional(),
  merge_commit_message: p.string().optional(),
  squash_commit_message: p.string().optional(),
  squash: p.bool().optional(),
  should_remove_source_branch: p.bool().optional(),
  merge_when_pipeline_succeeds: p.bool().optional(),
  auto_merge: p.bool().optional(),
});

/** Merge requests (lib/api/merge_requests.rb): the part approvals need. */
export function registerMergeRequestRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/merge_requests',
    { summary: 'List merge requests of a project', params: listParams, tags: ['merge_requests'] },
    async (ctx, params) => {
      const loaded = await loadRepository(ctx, params.id);
      if (!canReadMergeRequests(loaded.policy)) throw forbidden();
      const deps = ctx.state.deps;
      const me = ctx.state.actor.user;
      let authorId = params.author_id;
      if (params.author_username !== undefined) {
        authorId = (await findUserByUsername(deps.db, params.author_username))?.id ?? -1;
      }
      let assigneeId = params.assignee_id;
      let reviewerId = params.reviewer_id;
      const scope = params.scope?.replace(/-/g, '_');
      // An anonymous caller has created, been assigned or asked to review nothing.
      const mine = me?.id ?? -1;
      if (scope === 'created_by_me') authorId = mine;
      if (scope === 'assigned_to_me') assigneeId = mine;
      if (scope === 'reviews_for_me') reviewerId = mine;
      const filter = {
        projectId: loaded.project.id,
        state: params.state,
        authorId,
        assigneeId,
        reviewerId,
        sourceBranch: params.source_branch,
        targetBranch: params.target_branch,
        search: params.search,
        iids: params.iids,
        orderBy: params.order_by,
        sort: params.sort,
      };
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listMergeRequests(deps.db, filter, w),
        (cap) => countMergeRequests(deps.db, filter, cap),
      );
      const pc = { baseUrl: deps.config.baseUrl };
      if (params.view === 'simple') {
        ctx.body = rows.map((mr) => ({
          id: mr.id,
          iid: mr.iid,
          project_id: mr.target_project_id,
          title: mr.title,
          description: mr.description,
          state: mr.state,
          created_at: mr.created_at.toISOString(),
          updated_at: mr.updated_at.toISOString(),
          web_url: `${pc.baseUrl}/${loaded.project.full_path}/-/merge_requests/${mr.iid}`,
        }));
        return;
      }
      ctx.body = (await views(ctx, loaded, rows)).map((view) => presentMergeRequestBasic(view, pc));
    },
  );

  api.post(
    '/projects/:id/merge_requests',
    { summary: 'Create a merge request', auth: 'required', params: createParams, tags: ['merge_requests'] },
    async (ctx, params) => {
      const loaded = await loadRepository(ctx, params.id);
      if (!canCreateMergeRequest(loaded.policy)) throw forbidden();
      if (params.target_project_id !== undefined && params.target_project_id !== loaded.project.id) {
        // Merge requests across projects need forks, which Depot does not have.
        throw notFound('Project');
      }
      const user = currentUser(ctx);
      const assigneeIds = params.assignee_ids ?? (params.assignee_id !== undefined ? [params.assignee_id] : undefined);
      const mr = await createMergeRequest(ctx.state.deps, loaded.project, user, loaded.gitDir, {
        sourceBranch: params.source_branch,
        targetBranch: params.target_branch,
        title: params.title,
        description: params.description,
        assigneeIds,
        reviewerIds: params.reviewer_ids,
        removeSourceBranch: params.remove_source_branch,
        squash: params.squash,
      });
      created(ctx, await presentSingle(ctx, loaded, mr));
    },
  );

  api.get(
    mrPath,
    { summary: 'A merge request', params: z.object(iidParams), tags: ['merge_requests'] },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      ctx.body = await presentSingle(ctx, loaded, loaded.mr);
    },
  );

  api.put(
    mrPath,
    { summary: 'Update a merge request', auth: 'required', params: updateParams, tags: ['merge_requests'] },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      if (!canUpdateMergeRequest(loaded.policy, loaded.mr)) throw forbidden();
      const assigneeIds = params.assignee_ids ?? (params.assignee_id !== undefined ? [params.assignee_id] : undefined);
      const mr = await updateMergeRequestFields(
        ctx.state.deps,
        loaded.project,
        currentUser(ctx),
        loaded.gitDir,
        loaded.mr,
        {
          title: params.title,
          description: params.description,
          targetBranch: params.target_branch,
          stateEvent: params.state_event,
          assigneeIds,
          reviewerIds: params.reviewer_ids,
          removeSourceBranch: params.remove_source_branch,
          squash: params.squash,
        },
      );
      ctx.body = await presentSingle(ctx, loaded, mr);
    },
  );

  api.get(
    `${mrPath}/commits`,
    {
      summary: 'Commits of a merge request',
      params: z.object({ ...iidParams, ...pagination() }),
      tags: ['merge_requests'],
    },
    async (ctx, params) => {
      const { project, gitDir, mr } = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      const commits = mr.sha
        ? await listCommits(gitDir, { include: [mr.sha], exclude: mr.base_sha ? [mr.base_sha] : [], maxCount: 1000 })
        : [];
      const pc = { baseUrl: ctx.state.deps.config.baseUrl };
      ctx.body = paginateArray(ctx, pc.baseUrl, params, commits).map((c) => presentCommit(c, project, pc));
    },
  );

  const diffsOf = async (loaded: LoadedMergeRequest) => {
    const { gitDir, mr } = loaded;
    if (!mr.sha) return { files: [], overflow: false };
    const start =
      mr.state === 'opened' ? ((await readBranchTip(gitDir, mr.target_branch)) ?? mr.base_sha) : mr.base_sha;
    const base = start ? ((await mergeBase(gitDir, [start, mr.sha])) ?? start) : null;
    if (!base) return { files: [], overflow: false };
    return diffCommits(gitDir, base, mr.sha);
  };

  api.get(
    `${mrPath}/changes`,
    {
      summary: 'A merge request with its changes',
      params: z.object({ ...iidParams, access_raw_diffs: p.bool().optional(), unidiff: p.bool().optional() }),
      tags: ['merge_requests'],
    },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      const diff = await diffsOf(loaded);
      ctx.body = {
        ...(await presentSingle(ctx, loaded, loaded.mr)),
        changes: diff.files.map((f) => presentDiff(f, { unidiff: params.unidiff === true })),
        overflow: diff.overflow,
      };
    },
  );

  api.get(
    `${mrPath}/diffs`,
    {
      summary: 'Diffs of a merge request',
      params: z.object({ ...iidParams, unidiff: p.bool().optional(), ...pagination() }),
      tags: ['merge_requests'],
    },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      const diff = await diffsOf(loaded);
      ctx.body = paginateArray(ctx, ctx.state.deps.config.baseUrl, params, diff.files).map((f) =>
        presentDiff(f, { unidiff: params.unidiff === true }),
      );
    },
  );

  api.put(
    `${mrPath}/merge`,
    { summary: 'Merge a merge request', auth: 'required', params: mergeParams, tags: ['merge_requests'] },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      const mr = await mergeMergeRequest(ctx.state.deps, loaded.project, loaded.policy, loaded.gitDir, loaded.mr, {
        sha: params.sha,
        mergeCommitMessage: params.merge_commit_message,
        squashCommitMessage: params.squash_commit_message,
        squash: params.squash,
        shouldRemoveSourceBranch: params.should_remove_source_branch,
      });
      ctx.body = await presentSingle(ctx, loaded, mr);
    },
  );
}
