import { z } from 'zod';
import { findMergeRequestByIid } from '../db/queries/merge-requests.js';
import { findNamespacesByIds } from '../db/queries/namespaces.js';
import { findUserByUsername, findUsersByIds } from '../db/queries/users.js';
import type { ApprovalProjectRule } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, forbidden } from '../http/errors.js';
import { p, toInteger } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { canAdminApprovals, canUpdateMergeRequest } from '../policies/merge-requests.js';
import {
  type ApprovalLookups,
  presentApprovalSettings,
  presentApprovalState,
  presentMergeRequestApprovals,
  presentMergeRequestRule,
  presentProjectRule,
} from '../presenters/approval.js';
import { presentProtectedBranch } from '../presenters/protected-branch.js';
import {
  approvalSettings,
  approvalState,
  approveMergeRequest,
  createMergeRequestRule,
  createProjectRule,
  deleteMergeRequestRule,
  deleteProjectRule,
  describeRules,
  findMergeRequestRule,
  findProjectRule,
  listMergeRequestRules,
  listProjectRules,
  mayApprove,
  setMergeRequestApprovalsRequired,
  unapproveMergeRequest,
  updateApprovalSettings,
  updateMergeRequestRule,
  updateProjectRule,
  type WrappedRule,
} from '../services/approvals.js';
import { granteeNamesFor, protectedBranchesByIds } from '../services/protected-branches.js';
import { created, currentUser, loadProject, noContent } from './helpers.js';
import { type LoadedMergeRequest, loadMergeRequest } from './merge-requests.js';

/** Database ids (int4): larger numbers are refused as invalid rather than failing in SQL. */
const ids = () => p.array(p.id()).optional();
/** An approvals count: any integer the database holds; negative ones are the service's 400. */
const count = () => z.preprocess(toInteger, z.number().int().min(-2147483648).max(2147483647));
const iidParams = { id: p.string(), merge_request_iid: p.id() };
const mrBase = '/projects/:id/merge_requests/:merge_request_iid';

async function lookupsFor(ctx: AppContext, rules: WrappedRule[], extraUsers: number[] = []): Promise<ApprovalLookups> {
  const db = ctx.state.deps.db;
  const userIds = [
    ...new Set([...rules.flatMap((r) => [...r.userIds, ...r.eligibleIds, ...r.approvedByIds]), ...extraUsers]),
  ];
  const groupIds = [...new Set(rules.flatMap((r) => r.groupIds))];
  const users = userIds.length ? await findUsersByIds(db, userIds) : [];
  const groups = groupIds.length ? await findNamespacesByIds(db, groupIds) : [];
  return {
    users: new Map(users.map((u) => [u.id, u])),
    groups: new Map(groups.map((g) => [g.id, g])),
    protectedBranches: new Map(),
  };
}

const pcOf = (ctx: AppContext) => ({ baseUrl: ctx.state.deps.config.baseUrl });

/** `user_ids` plus the users named in `usernames` (an unknown name is a 400 like an unknown id). */
async function ruleUserIds(ctx: AppContext, userIds?: number[], usernames?: string[]): Promise<number[] | undefined> {
  if (usernames === undefined || usernames.length === 0) return userIds;
  const ids = [...(userIds ?? [])];
  for (const name of usernames) {
    const user = await findUserByUsername(ctx.state.deps.db, name);
    if (!user) throw new ApiError(400, { message: { usernames: [`contain unknown users: ${name}`] } });
    ids.push(user.id);
  }
  return ids;
}

async function presentProjectRules(ctx: AppContext, rules: ApprovalProjectRule[]) {
  const wrapped = await describeRules(ctx.state.deps, rules);
  const lookups = await lookupsFor(ctx, wrapped);
  const named = [...new Set(rules.flatMap((rule) => rule.protected_branch_ids))];
  const projectId = rules[0]?.project_id;
  if (named.length > 0 && projectId !== undefined) {
    const branches = await protectedBranchesByIds(ctx.state.deps, projectId, named);
    const names = await granteeNamesFor(ctx.state.deps, branches);
    for (const branch of branches) lookups.protectedBranches.set(branch.id, presentProtectedBranch(branch, names));
  }
  return wrapped.map((rule, i) =>
    presentProjectRule(rule, (rules[i] as ApprovalProjectRule).protected_branch_ids, lookups, pcOf(ctx)),
  );
}

async function approvalsAnswer(ctx: AppContext, loaded: LoadedMergeRequest) {
  const deps = ctx.state.deps;
  const mr = (await findMergeRequestByIid(deps.db, loaded.project.id, loaded.mr.iid)) ?? loaded.mr;
  const state = await approvalState(deps, loaded.project, mr, loaded.gitDir);
  const lookups = await lookupsFor(
    ctx,
    state.rules,
    state.approvals.map((a) => a.userId),
  );
  const user = ctx.state.actor.user;
  return presentMergeRequestApprovals(
    mr,
    state,
    { user, canApprove: user !== null && mr.state === 'opened' && mayApprove(loaded.policy, state) },
    lookups,
    pcOf(ctx),
  );
}

const ruleParams = {
  name: p.string(),
  approvals_required: count(),
  user_ids: ids(),
  group_ids: ids(),
  usernames: p.array(p.string()).optional(),
};

/** Approval settings, rules and approvals (ee/lib/api/*approval*.rb). Every call is authenticated. */
export function registerApprovalRoutes(api: ApiRouter): void {
  // Project configuration.
  api.get(
    '/projects/:id/approvals',
    {
      summary: 'Project approval configuration',
      auth: 'required',
      params: z.object({ id: p.string() }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const { project } = await loadProject(ctx, params.id);
      ctx.body = presentApprovalSettings(await approvalSettings(ctx.state.deps.db, project.id));
    },
  );
  api.post(
    '/projects/:id/approvals',
    {
      summary: 'Change the project approval configuration',
      auth: 'required',
      params: z.object({
        id: p.string(),
        approvals_before_merge: count().optional(),
        reset_approvals_on_push: p.bool().optional(),
        disable_overriding_approvers_per_merge_request: p.bool().optional(),
        merge_requests_author_approval: p.bool().optional(),
        merge_requests_disable_committers_approval: p.bool().optional(),
        require_password_to_approve: p.bool().optional(),
      }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      if (!canAdminApprovals(policy)) throw forbidden();
      const { id: _id, ...change } = params;
      ctx.status = 201;
      ctx.body = presentApprovalSettings(await updateApprovalSettings(ctx.state.deps, project, change));
    },
  );

  // Project rules.
  api.get(
    '/projects/:id/approval_rules',
    { summary: 'Project approval rules', auth: 'required', params: z.object({ id: p.string() }), tags: ['approvals'] },
    async (ctx, params) => {
      const { project } = await loadProject(ctx, params.id);
      ctx.body = await presentProjectRules(ctx, await listProjectRules(ctx.state.deps.db, project.id));
    },
  );
  api.get(
    '/projects/:id/approval_rules/:approval_rule_id',
    {
      summary: 'A project approval rule',
      auth: 'required',
      params: z.object({ id: p.string(), approval_rule_id: p.id() }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const { project } = await loadProject(ctx, params.id);
      const rule = await findProjectRule(ctx.state.deps.db, project.id, params.approval_rule_id);
      ctx.body = (await presentProjectRules(ctx, [rule]))[0];
    },
  );
  api.post(
    '/projects/:id/approval_rules',
    {
      summary: 'Create a project approval rule',
      auth: 'required',
      params: z.object({ id: p.string(), ...ruleParams, protected_branch_ids: ids() }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      if (!canAdminApprovals(policy)) throw forbidden();
      const rule = await createProjectRule(ctx.state.deps, project, {
        name: params.name,
        approvalsRequired: params.approvals_required,
        userIds: await ruleUserIds(ctx, params.user_ids, params.usernames),
        groupIds: params.group_ids,
        protectedBranchIds: params.protected_branch_ids,
      });
      created(ctx, (await presentProjectRules(ctx, [rule]))[0]);
    },
  );
  api.put(
    '/projects/:id/approval_rules/:approval_rule_id',
    {
      summary: 'Change a project approval rule',
      auth: 'required',
      params: z.object({
        id: p.string(),
        approval_rule_id: p.id(),
        name: p.string(),
        approvals_required: count(),
        user_ids: ids(),
        usernames: p.array(p.string()).optional(),
        group_ids: ids(),
        protected_branch_ids: ids(),
      }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      if (!canAdminApprovals(policy)) throw forbidden();
      const rule = await findProjectRule(ctx.state.deps.db, project.id, params.approval_rule_id);
      const updated = await updateProjectRule(ctx.state.deps, project, rule, {
        name: params.name,
        approvalsRequired: params.approvals_required,
        userIds: await ruleUserIds(ctx, params.user_ids, params.usernames),
        groupIds: params.group_ids,
        protectedBranchIds: params.protected_branch_ids,
      });
      ctx.body = (await presentProjectRules(ctx, [updated]))[0];
    },
  );
  api.delete(
    '/projects/:id/approval_rules/:approval_rule_id',
    {
      summary: 'Delete a project approval rule',
      auth: 'required',
      params: z.object({ id: p.string(), approval_rule_id: p.id() }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      if (!canAdminApprovals(policy)) throw forbidden();
      const rule = await findProjectRule(ctx.state.deps.db, project.id, params.approval_rule_id);
      await deleteProjectRule(ctx.state.deps, rule);
      noContent(ctx);
    },
  );

  // Merge request approvals.
  api.get(
    `${mrBase}/approvals`,
    { summary: 'Approvals of a merge request', auth: 'required', params: z.object(iidParams), tags: ['approvals'] },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      ctx.body = await approvalsAnswer(ctx, loaded);
    },
  );
  api.post(
    `${mrBase}/approvals`,
    {
      summary: 'Change the approvals a merge request needs (deprecated)',
      auth: 'required',
      params: z.object({ ...iidParams, approvals_required: count() }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      if (!canUpdateMergeRequest(loaded.policy, loaded.mr)) throw forbidden();
      await setMergeRequestApprovalsRequired(ctx.state.deps, loaded.project, loaded.mr, params.approvals_required);
      created(ctx, await approvalsAnswer(ctx, loaded));
    },
  );
  api.get(
    `${mrBase}/approval_state`,
    {
      summary: 'Approval state of a merge request',
      auth: 'required',
      params: z.object(iidParams),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      const state = await approvalState(ctx.state.deps, loaded.project, loaded.mr, loaded.gitDir);
      ctx.body = presentApprovalState(state, await lookupsFor(ctx, state.rules), pcOf(ctx));
    },
  );

  // Merge request rules.
  const presentMrRules = async (ctx: AppContext, loaded: LoadedMergeRequest, ruleIds?: number[]) => {
    const deps = ctx.state.deps;
    let rules = await listMergeRequestRules(deps.db, loaded.mr.id);
    if (ruleIds) rules = rules.filter((r) => ruleIds.includes(r.id));
    const wrapped = await describeRules(deps, rules, await listProjectRules(deps.db, loaded.project.id));
    const lookups = await lookupsFor(ctx, wrapped);
    return wrapped.map((rule) => presentMergeRequestRule(rule, lookups, pcOf(ctx)));
  };
  api.get(
    `${mrBase}/approval_rules`,
    {
      summary: 'Approval rules of a merge request',
      auth: 'required',
      params: z.object(iidParams),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      ctx.body = await presentMrRules(ctx, loaded);
    },
  );
  api.post(
    `${mrBase}/approval_rules`,
    {
      summary: 'Create a merge request approval rule',
      auth: 'required',
      params: z.object({ ...iidParams, ...ruleParams, approval_project_rule_id: p.id().optional() }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      if (!canUpdateMergeRequest(loaded.policy, loaded.mr)) throw forbidden();
      const rule = await createMergeRequestRule(ctx.state.deps, loaded.project, loaded.mr, {
        name: params.name,
        approvalsRequired: params.approvals_required,
        userIds: await ruleUserIds(ctx, params.user_ids, params.usernames),
        groupIds: params.group_ids,
        approvalProjectRuleId: params.approval_project_rule_id,
      });
      created(ctx, (await presentMrRules(ctx, loaded, [rule.id]))[0]);
    },
  );
  api.put(
    `${mrBase}/approval_rules/:approval_rule_id`,
    {
      summary: 'Change a merge request approval rule',
      auth: 'required',
      params: z.object({
        ...iidParams,
        approval_rule_id: p.id(),
        name: p.string(),
        approvals_required: count(),
        user_ids: ids(),
        usernames: p.array(p.string()).optional(),
        group_ids: ids(),
      }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      if (!canUpdateMergeRequest(loaded.policy, loaded.mr)) throw forbidden();
      const rule = await findMergeRequestRule(ctx.state.deps.db, loaded.mr, params.approval_rule_id);
      await updateMergeRequestRule(ctx.state.deps, loaded.project, rule, {
        name: params.name,
        approvalsRequired: params.approvals_required,
        userIds: await ruleUserIds(ctx, params.user_ids, params.usernames),
        groupIds: params.group_ids,
      });
      ctx.body = (await presentMrRules(ctx, loaded, [rule.id]))[0];
    },
  );
  api.delete(
    `${mrBase}/approval_rules/:approval_rule_id`,
    {
      summary: 'Delete a merge request approval rule',
      auth: 'required',
      params: z.object({ ...iidParams, approval_rule_id: p.id() }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      if (!canUpdateMergeRequest(loaded.policy, loaded.mr)) throw forbidden();
      const rule = await findMergeRequestRule(ctx.state.deps.db, loaded.mr, params.approval_rule_id);
      await deleteMergeRequestRule(ctx.state.deps, loaded.project, rule);
      noContent(ctx);
    },
  );

  // Approve and unapprove.
  api.post(
    `${mrBase}/approve`,
    {
      summary: 'Approve a merge request',
      auth: 'required',
      params: z.object({ ...iidParams, sha: p.string().optional(), approval_password: p.string().optional() }),
      tags: ['approvals'],
    },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      currentUser(ctx);
      await approveMergeRequest(ctx.state.deps, loaded.project, loaded.policy, loaded.mr, loaded.gitDir, {
        sha: params.sha,
        password: params.approval_password,
      });
      created(ctx, await approvalsAnswer(ctx, loaded));
    },
  );
  api.post(
    `${mrBase}/unapprove`,
    { summary: 'Withdraw an approval', auth: 'required', params: z.object(iidParams), tags: ['approvals'] },
    async (ctx, params) => {
      const loaded = await loadMergeRequest(ctx, params.id, params.merge_request_iid);
      const user = currentUser(ctx);
      await unapproveMergeRequest(ctx.state.deps, loaded.project, loaded.policy, loaded.mr, loaded.gitDir, user);
      created(ctx, await approvalsAnswer(ctx, loaded));
    },
  );
}
