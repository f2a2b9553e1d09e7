import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type {
  ApprovalMergeRequestRule,
  ApprovalProjectRule,
  ApprovalRuleType,
  MergeRequest,
  Namespace,
  Project,
  ProjectApprovalSettings,
  User,
} from '../db/schema.js';
import { listCommits } from '../git/log.js';
import { ApiError, conflict, forbidden, notFound, unauthorized } from '../http/errors.js';
import { verifyPassword } from '../lib/crypto.js';
import type { ProjectPolicy } from '../policies/abilities.js';
import { AccessLevel } from '../policies/access-levels.js';
import { existingProtectedBranchIds, protectedBranchIdsFor } from '../policies/merge-requests.js';
import type { Deps } from './deps.js';
import { recordMergeRequestEvent } from './merge-request-events.js';

/** GitLab's defaults for a project that never changed its approval settings. */
const DEFAULT_SETTINGS = {
  approvals_before_merge: 0,
  reset_approvals_on_push: true,
  disable_overriding_approvers_per_merge_request: false,
  merge_requests_author_approval: false,
  merge_requests_disable_committers_approval: false,
  require_password_to_approve: false,
};

export type ApprovalSettings = typeof DEFAULT_SETTINGS;
export type ApprovalSettingsChange = Partial<ApprovalSettings>;

/** A project's approval configuration, GitLab's defaults where it has none. */
export async function approvalSettings(db: Db, projectId: number): Promise<ApprovalSettings> {
  const row: ProjectApprovalSettings | undefined = await db
    .selectFrom('project_approval_settings')
    .selectAll()
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  if (!row) return { ...DEFAULT_SETTINGS };
  const { project_id: _p, updated_at: _u, ...settings } = row;
  return settings;
}

/** Changes the settings given; the others keep their values. */
export async function updateApprovalSettings(
  deps: Deps,
  project: Project,
  change: ApprovalSettingsChange,
): Promise<ApprovalSettings> {
  if (change.approvals_before_merge !== undefined && change.approvals_before_merge < 0) {
    throw new ApiError(400, { message: { approvals_before_merge: ['must be greater than or equal to 0'] } });
  }
  const values = Object.fromEntries(Object.entries(change).filter(([, v]) => v !== undefined));
  const now = deps.clock.now();
  await deps.db
    .insertInto('project_approval_settings')
    .values({ project_id: project.id, ...values, updated_at: now })
    .onConflict((oc) => oc.column('project_id').doUpdateSet({ ...values, updated_at: now }))
    .execute();
  return approvalSettings(deps.db, project.id);
}

// ---------------------------------------------------------------------------------------------
// Rules

export interface RuleInput {
  name: string;
  approvalsRequired: number;
  userIds?: number[] | undefined;
  groupIds?: number[] | undefined;
  protectedBranchIds?: number[] | undefined;
}

const invalid = (field: string, message: string) => new ApiError(400, { message: { [field]: [message] } });

/** Refuses negative counts and ids of users, groups or protected branches that do not exist. */
async function checkRuleInput(deps: Deps, project: Project, input: RuleInput): Promise<void> {
  if (input.name.trim() === '') throw invalid('name', "can't be blank");
  if (input.approvalsRequired < 0) throw invalid('approvals_required', 'must be greater than or equal to 0');
  const users = [...new Set(input.userIds ?? [])];
  if (users.length > 0) {
    const found = await deps.db.selectFrom('users').select('id').where('id', 'in', users).execute();
    const missing = users.filter((id) => !found.some((u) => u.id === id));
    if (missing.length > 0) throw invalid('user_ids', `contain unknown ids: ${missing.join(', ')}`);
  }
  const groups = [...new Set(input.groupIds ?? [])];
  if (groups.length > 0) {
    const found = await deps.db
      .selectFrom('namespaces')
      .select('id')
      .where('id', 'in', groups)
      .where('kind', '=', 'group')
      .execute();
    const missing = groups.filter((id) => !found.some((g) => g.id === id));
    if (missing.length > 0) throw invalid('group_ids', `contain unknown ids: ${missing.join(', ')}`);
  }
  const branches = [...new Set(input.protectedBranchIds ?? [])];
  if (branches.length > 0) {
    const found = await existingProtectedBranchIds(deps, project, branches);
    const missing = branches.filter((id) => !found.includes(id));
    if (missing.length > 0) throw invalid('protected_branch_ids', `contain unknown ids: ${missing.join(', ')}`);
  }
}

const isUniqueViolation = (error: unknown) => (error as { code?: string }).code === '23505';

export function listProjectRules(db: Db, projectId: number): Promise<ApprovalProjectRule[]> {
  return db
    .selectFrom('approval_project_rules')
    .selectAll()
    .where('project_id', '=', projectId)
    .orderBy('id')
    .execute();
}

export async function findProjectRule(db: Db, projectId: number, id: number): Promise<ApprovalProjectRule> {
  const rule = await db
    .selectFrom('approval_project_rules')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!rule) throw notFound();
  return rule;
}

export async function createProjectRule(deps: Deps, project: Project, input: RuleInput): Promise<ApprovalProjectRule> {
  await checkRuleInput(deps, project, input);
  const now = deps.clock.now();
  try {
    return await deps.db
      .insertInto('approval_project_rules')
      .values({
        project_id: project.id,
        name: input.name,
        approvals_required: input.approvalsRequired,
        user_ids: [...new Set(input.userIds ?? [])],
        group_ids: [...new Set(input.groupIds ?? [])],
        protected_branch_ids: [...new Set(input.protectedBranchIds ?? [])],
        created_at: now,
        updated_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  } catch (error) {
    if (isUniqueViolation(error)) throw invalid('name', 'has already been taken');
    throw error;
  }
}

/** GitLab's update: users, groups and branches not listed are removed (when the list is given). */
export async function updateProjectRule(
  deps: Deps,
  project: Project,
  rule: ApprovalProjectRule,
  input: Partial<RuleInput>,
): Promise<ApprovalProjectRule> {
  const merged: RuleInput = {
    name: input.name ?? rule.name,
    approvalsRequired: input.approvalsRequired ?? rule.approvals_required,
    userIds: input.userIds ?? rule.user_ids,
    groupIds: input.groupIds ?? rule.group_ids,
    protectedBranchIds: input.protectedBranchIds ?? rule.protected_branch_ids,
  };
  await checkRuleInput(deps, project, {
    ...merged,
    userIds: input.userIds,
    groupIds: input.groupIds,
    protectedBranchIds: input.protectedBranchIds,
  });
  try {
    return (await deps.db
      .updateTable('approval_project_rules')
      .set({
        name: merged.name,
        approvals_required: merged.approvalsRequired,
        user_ids: [...new Set(merged.userIds)],
        group_ids: [...new Set(merged.groupIds)],
        protected_branch_ids: [...new Set(merged.protectedBranchIds)],
        updated_at: deps.clock.now(),
      })
      .where('id', '=', rule.id)
      .returningAll()
      .executeTakeFirstOrThrow()) as ApprovalProjectRule;
  } catch (error) {
    if (isUniqueViolation(error)) throw invalid('name', 'has already been taken');
    throw error;
  }
}

export async function deleteProjectRule(deps: Deps, rule: ApprovalProjectRule): Promise<void> {
  await deps.db.deleteFrom('approval_project_rules').where('id', '=', rule.id).execute();
}

export function listMergeRequestRules(db: Db, mergeRequestId: number): Promise<ApprovalMergeRequestRule[]> {
  return db
    .selectFrom('approval_merge_request_rules')
    .selectAll()
    .where('merge_request_id', '=', mergeRequestId)
    .orderBy('id')
    .execute();
}

export async function findMergeRequestRule(db: Db, mr: MergeRequest, id: number): Promise<ApprovalMergeRequestRule> {
  const rule = await db
    .selectFrom('approval_merge_request_rules')
    .selectAll()
    .where('merge_request_id', '=', mr.id)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!rule) throw notFound();
  return rule;
}

/** Merge request rules may be changed unless the project forbids overriding them. */
async function assertOverridable(deps: Deps, project: Project): Promise<void> {
  const settings = await approvalSettings(deps.db, project.id);
  if (settings.disable_overriding_approvers_per_merge_request) throw forbidden();
}

export async function createMergeRequestRule(
  deps: Deps,
  project: Project,
  mr: MergeRequest,
  input: RuleInput & { approvalProjectRuleId?: number | undefined },
): Promise<ApprovalMergeRequestRule> {
  await assertOverridable(deps, project);
  let userIds = input.userIds;
  let groupIds = input.groupIds;
  let name = input.name;
  if (input.approvalProjectRuleId !== undefined) {
    const source = await deps.db
      .selectFrom('approval_project_rules')
      .selectAll()
      .where('project_id', '=', project.id)
      .where('id', '=', input.approvalProjectRuleId)
      .executeTakeFirst();
    if (!source) throw invalid('approval_project_rule_id', 'is invalid');
    // GitLab copies the project rule's name, users and groups; the count is the request's.
    name = source.name;
    userIds = source.user_ids;
    groupIds = source.group_ids;
  }
  await checkRuleInput(deps, project, { name, approvalsRequired: input.approvalsRequired, userIds, groupIds });
  const now = deps.clock.now();
  return deps.db
    .insertInto('approval_merge_request_rules')
    .values({
      merge_request_id: mr.id,
      name,
      approvals_required: input.approvalsRequired,
      user_ids: [...new Set(userIds ?? [])],
      group_ids: [...new Set(groupIds ?? [])],
      approval_project_rule_id: input.approvalProjectRuleId ?? null,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** System rules (report_approver, code_owner) are not the user's to change: 403 as GitLab answers. */
function assertUserRule(rule: ApprovalMergeRequestRule): void {
  if (rule.rule_type === 'report_approver' || rule.rule_type === 'code_owner') throw forbidden();
}

export async function updateMergeRequestRule(
  deps: Deps,
  project: Project,
  rule: ApprovalMergeRequestRule,
  input: Partial<RuleInput>,
): Promise<ApprovalMergeRequestRule> {
  assertUserRule(rule);
  await assertOverridable(deps, project);
  const name = input.name ?? rule.name;
  const approvalsRequired = input.approvalsRequired ?? rule.approvals_required;
  await checkRuleInput(deps, project, { name, approvalsRequired, userIds: input.userIds, groupIds: input.groupIds });
  return (await deps.db
    .updateTable('approval_merge_request_rules')
    .set({
      name,
      approvals_required: approvalsRequired,
      user_ids: [...new Set(input.userIds ?? rule.user_ids)],
      group_ids: [...new Set(input.groupIds ?? rule.group_ids)],
      updated_at: deps.clock.now(),
    })
    .where('id', '=', rule.id)
    .returningAll()
    .executeTakeFirstOrThrow()) as ApprovalMergeRequestRule;
}

export async function deleteMergeRequestRule(
  deps: Deps,
  project: Project,
  rule: ApprovalMergeRequestRule,
): Promise<void> {
  assertUserRule(rule);
  await assertOverridable(deps, project);
  await deps.db.deleteFrom('approval_merge_request_rules').where('id', '=', rule.id).execute();
}

/**
 * The deprecated `POST …/approvals` with `approvals_required`: the merge request's any-approver
 * rule ("All Members") holds the count.
 */
export async function setMergeRequestApprovalsRequired(
  deps: Deps,
  project: Project,
  mr: MergeRequest,
  count: number,
): Promise<void> {
  if (count < 0) throw invalid('approvals_required', 'must be greater than or equal to 0');
  await assertOverridable(deps, project);
  const now = deps.clock.now();
  await deps.db.transaction().execute(async (trx) => {
    const existing = await trx
      .selectFrom('approval_merge_request_rules')
      .select('id')
      .where('merge_request_id', '=', mr.id)
      .where('rule_type', '=', 'any_approver')
      .forUpdate()
      .executeTakeFirst();
    if (existing) {
      await trx
        .updateTable('approval_merge_request_rules')
        .set({ approvals_required: count, updated_at: now })
        .where('id', '=', existing.id)
        .execute();
    } else {
      await trx
        .insertInto('approval_merge_request_rules')
        .values({
          merge_request_id: mr.id,
          name: 'All Members',
          rule_type: 'any_approver',
          approvals_required: count,
          created_at: now,
          updated_at: now,
        })
        .execute();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Approval state

/** A rule as the approval state sees it, project or merge request level. */
export interface WrappedRule {
  id: number;
  name: string;
  ruleType: ApprovalRuleType;
  approvalsRequired: number;
  userIds: number[];
  groupIds: number[];
  section: string | null;
  /** The project rule, for merge request rules that copy one. */
  sourceRule: ApprovalProjectRule | null;
  /** True for merge request rules whose project rule says otherwise. */
  overridden: boolean;
  /** Eligible approvers (rule users and group members, author and committers taken out). */
  eligibleIds: number[];
  approvedByIds: number[];
  approvalsLeft: number;
}

export interface ApprovalState {
  /** True when the merge request has rules of its own (GitLab's approval_rules_overwritten). */
  overwritten: boolean;
  rules: WrappedRule[];
  approvalsRequired: number;
  approvalsLeft: number;
  /** Every approval, oldest first. */
  approvals: { userId: number; createdAt: Date }[];
  settings: ApprovalSettings;
}

/** Direct members (not requests, not expired) of the groups, by user id. */
async function groupMemberIds(deps: Deps, groupIds: number[]): Promise<Map<number, number[]>> {
  const byGroup = new Map<number, number[]>();
  if (groupIds.length === 0) return byGroup;
  const rows = await deps.db
    .selectFrom('members')
    .select(['source_id', 'user_id'])
    .where('source_type', '=', 'group')
    .where('source_id', 'in', groupIds)
    .where('requested_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<string>`current_date`)]))
    .execute();
  for (const row of rows) byGroup.set(row.source_id, [...(byGroup.get(row.source_id) ?? []), row.user_id]);
  return byGroup;
}

/** Emails of the commits the merge request brings (its committers, for the committers rule). */
async function committerEmails(gitDir: string, mr: MergeRequest): Promise<Set<string>> {
  if (!mr.sha) return new Set();
  const commits = await listCommits(gitDir, {
    include: [mr.sha],
    exclude: mr.base_sha ? [mr.base_sha] : [],
    maxCount: 1000,
  }).catch(() => []);
  return new Set(commits.flatMap((c) => [c.committer.email.toLowerCase(), c.author.email.toLowerCase()]));
}

/** Users whose email is one of `emails`. */
async function usersByEmails(db: Db, emails: Set<string>): Promise<number[]> {
  if (emails.size === 0) return [];
  const rows = await db
    .selectFrom('users')
    .select('id')
    .where(sql<string>`lower(email)`, 'in', [...emails])
    .execute();
  return rows.map((r) => r.id);
}

/**
 * The rules that apply to a merge request with what each still needs (GitLab's ApprovalState):
 * its own rules when it has regular ones, else the project's rules for its target branch;
 * code owner and any-approver rules of the merge request always.
 */
export async function approvalState(
  deps: Deps,
  project: Project,
  mr: MergeRequest,
  gitDir: string,
): Promise<ApprovalState> {
  const settings = await approvalSettings(deps.db, project.id);
  const mrRules = await listMergeRequestRules(deps.db, mr.id);
  const overwritten = mrRules.some((r) => r.rule_type === 'regular');
  const projectRules = await listProjectRules(deps.db, project.id);
  const rules: Omit<WrappedRule, 'eligibleIds' | 'approvedByIds' | 'approvalsLeft'>[] = [];
  if (overwritten) {
    for (const rule of mrRules) {
      const source = projectRules.find((r) => r.id === rule.approval_project_rule_id) ?? null;
      rules.push({
        id: rule.id,
        name: rule.name,
        ruleType: rule.rule_type,
        approvalsRequired: rule.approvals_required,
        userIds: rule.user_ids,
        groupIds: rule.group_ids,
        section: rule.section,
        sourceRule: source,
        overridden: source !== null && source.approvals_required !== rule.approvals_required,
      });
    }
  } else {
    const branchIds = await protectedBranchIdsFor(deps, project, mr.target_branch);
    for (const rule of projectRules) {
      if (rule.protected_branch_ids.length > 0 && !rule.protected_branch_ids.some((id) => branchIds.includes(id))) {
        continue;
      }
      rules.push({
        id: rule.id,
        name: rule.name,
        ruleType: rule.rule_type,
        approvalsRequired: rule.approvals_required,
        userIds: rule.user_ids,
        groupIds: rule.group_ids,
        section: null,
        sourceRule: null,
        overridden: false,
      });
    }
    for (const rule of mrRules) {
      rules.push({
        id: rule.id,
        name: rule.name,
        ruleType: rule.rule_type,
        approvalsRequired: rule.approvals_required,
        userIds: rule.user_ids,
        groupIds: rule.group_ids,
        section: rule.section,
        sourceRule: null,
        overridden: false,
      });
    }
  }
  const approvals = (
    await deps.db
      .selectFrom('merge_request_approvals')
      .select(['user_id', 'created_at'])
      .where('merge_request_id', '=', mr.id)
      .orderBy('id')
      .execute()
  ).map((a) => ({ userId: a.user_id, createdAt: a.created_at }));
  const approverIds = approvals.map((a) => a.userId);

  const members = await groupMemberIds(deps, [...new Set(rules.flatMap((r) => r.groupIds))]);
  const excluded = new Set<number>();
  if (!settings.merge_requests_author_approval && mr.author_id !== null) excluded.add(mr.author_id);
  if (settings.merge_requests_disable_committers_approval) {
    for (const id of await usersByEmails(deps.db, await committerEmails(gitDir, mr))) excluded.add(id);
  }
  const wrapped: WrappedRule[] = rules.map((rule) => {
    const eligible = [...new Set([...rule.userIds, ...rule.groupIds.flatMap((g) => members.get(g) ?? [])])].filter(
      (id) => !excluded.has(id),
    );
    const approvedBy =
      rule.ruleType === 'any_approver' ? approverIds : approverIds.filter((id) => eligible.includes(id));
    return {
      ...rule,
      eligibleIds: eligible,
      approvedByIds: approvedBy,
      approvalsLeft: Math.max(0, rule.approvalsRequired - approvedBy.length),
    };
  });
  return {
    overwritten,
    rules: wrapped,
    approvalsRequired: wrapped.reduce((n, r) => n + r.approvalsRequired, 0),
    approvalsLeft: wrapped.reduce((n, r) => n + r.approvalsLeft, 0),
    approvals,
    settings,
  };
}

// ---------------------------------------------------------------------------------------------
// Approve and unapprove

export interface ApproveRequest {
  sha?: string | undefined;
  password?: string | undefined;
}

/** `approve_merge_request`: developers, and anyone a rule names as approver. */
export function mayApprove(policy: ProjectPolicy, state: ApprovalState): boolean {
  const user = policy.user;
  if (!user) return false;
  if (policy.level >= AccessLevel.DEVELOPER) return true;
  return policy.level >= AccessLevel.GUEST && state.rules.some((r) => r.eligibleIds.includes(user.id));
}

/**
 * GitLab's MergeRequests::ApprovalService behind `POST …/approve`: 403 without the right to
 * approve, 409 when `sha` is not the head, 401 when the password is wrong, the user is the author
 * or a committer the settings exclude, the merge request is not open, or the user approved
 * already. Two concurrent approvals by one user count once (a unique row).
 */
export async function approveMergeRequest(
  deps: Deps,
  project: Project,
  policy: ProjectPolicy,
  mr: MergeRequest,
  gitDir: string,
  request: ApproveRequest,
): Promise<void> {
  const user = policy.user as User;
  const state = await approvalState(deps, project, mr, gitDir);
  if (!mayApprove(policy, state)) throw forbidden();
  if (request.sha !== undefined && request.sha !== mr.sha) {
    throw conflict(`SHA does not match HEAD of source branch: ${mr.sha ?? ''}`);
  }
  if (state.settings.require_password_to_approve) {
    const ok = request.password !== undefined && (await verifyPassword(request.password, user.password_digest));
    if (!ok) throw unauthorized();
  }
  if (mr.state !== 'opened') throw unauthorized();
  if (!state.settings.merge_requests_author_approval && mr.author_id === user.id) throw unauthorized();
  if (state.settings.merge_requests_disable_committers_approval) {
    const committers = await usersByEmails(deps.db, await committerEmails(gitDir, mr));
    if (committers.includes(user.id)) throw unauthorized();
  }
  const inserted = await deps.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('merge_request_approvals')
      .values({ merge_request_id: mr.id, user_id: user.id, created_at: deps.clock.now() })
      .onConflict((oc) => oc.columns(['merge_request_id', 'user_id']).doNothing())
      .returning('id')
      .executeTakeFirst();
    if (!row) return false;
    await recordMergeRequestEvent(trx, 'approved', user, mr, deps.clock.now());
    return true;
  });
  if (!inserted) throw unauthorized();
}

/** `POST …/unapprove`: 404 when the user had not approved. */
export async function unapproveMergeRequest(deps: Deps, mr: MergeRequest, user: User): Promise<void> {
  const removed = await deps.db
    .deleteFrom('merge_request_approvals')
    .where('merge_request_id', '=', mr.id)
    .where('user_id', '=', user.id)
    .executeTakeFirst();
  if (Number(removed.numDeletedRows) === 0) throw notFound();
}

/** reset_approvals_on_push: new commits on the source branch drop every approval. */
export async function resetApprovals(db: Db, mergeRequestId: number): Promise<void> {
  await db.deleteFrom('merge_request_approvals').where('merge_request_id', '=', mergeRequestId).execute();
}

export type { Namespace };

type RawRule = Pick<
  ApprovalProjectRule,
  'id' | 'name' | 'rule_type' | 'approvals_required' | 'user_ids' | 'group_ids'
> &
  Partial<Pick<ApprovalMergeRequestRule, 'section' | 'approval_project_rule_id'>>;

/** Rules as lists present them: eligible approvers from users and group members, nothing approved. */
export async function describeRules(deps: Deps, rules: RawRule[], projectRules: ApprovalProjectRule[] = []) {
  const members = await groupMemberIds(deps, [...new Set(rules.flatMap((r) => r.group_ids))]);
  return rules.map((rule): WrappedRule => {
    const source = projectRules.find((r) => r.id === rule.approval_project_rule_id) ?? null;
    return {
      id: rule.id,
      name: rule.name,
      ruleType: rule.rule_type,
      approvalsRequired: rule.approvals_required,
      userIds: rule.user_ids,
      groupIds: rule.group_ids,
      section: rule.section ?? null,
      sourceRule: source,
      overridden: source !== null && source.approvals_required !== rule.approvals_required,
      eligibleIds: [...new Set([...rule.user_ids, ...rule.group_ids.flatMap((g) => members.get(g) ?? [])])],
      approvedByIds: [],
      approvalsLeft: rule.approvals_required,
    };
  });
}
