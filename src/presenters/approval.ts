import type { MergeRequest, Namespace, User } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';
import type { ApprovalSettings, ApprovalState, WrappedRule } from '../services/approvals.js';
import { avatarUrl, type PresentContext, presentUserBasic } from './user.js';

/** Users and groups the rules name, loaded once for a whole answer. */
export interface ApprovalLookups {
  users: Map<number, User>;
  groups: Map<number, Namespace>;
  /** Protected branches by id, as the protected branches module presents them. */
  protectedBranches: Map<number, unknown>;
}

/** GitLab's project approval configuration (ee ProjectApprovalSettings entity). */
export function presentApprovalSettings(settings: ApprovalSettings) {
  return {
    approvers: [] as unknown[],
    approver_groups: [] as unknown[],
    approvals_before_merge: settings.approvals_before_merge,
    reset_approvals_on_push: settings.reset_approvals_on_push,
    selective_code_owner_removals: false,
    disable_overriding_approvers_per_merge_request: settings.disable_overriding_approvers_per_merge_request,
    merge_requests_author_approval: settings.merge_requests_author_approval,
    merge_requests_disable_committers_approval: settings.merge_requests_disable_committers_approval,
    require_password_to_approve: settings.require_password_to_approve,
    require_reauthentication_to_approve: settings.require_password_to_approve,
  };
}

function presentApprovalGroup(group: Namespace, pc: PresentContext) {
  return {
    id: group.id,
    web_url: `${pc.baseUrl}/groups/${group.full_path}`,
    name: group.name,
    path: group.path,
    description: group.description,
    visibility: group.visibility,
    share_with_group_lock: group.share_with_group_lock,
    require_two_factor_authentication: group.require_two_factor_authentication,
    two_factor_grace_period: group.two_factor_grace_period,
    project_creation_level: group.project_creation_level,
    auto_devops_enabled: null,
    subgroup_creation_level: group.subgroup_creation_level,
    emails_disabled: !group.emails_enabled,
    emails_enabled: group.emails_enabled,
    mentions_disabled: group.mentions_disabled,
    lfs_enabled: group.lfs_enabled,
    default_branch_protection: 2,
    avatar_url: null,
    request_access_enabled: group.request_access_enabled,
    full_name: group.full_path,
    full_path: group.full_path,
    created_at: isoTime(group.created_at),
    parent_id: group.parent_id,
    ldap_cn: null,
    ldap_access: null,
  };
}

function users(ids: number[], lookups: ApprovalLookups, pc: PresentContext) {
  return ids.flatMap((id) => {
    const user = lookups.users.get(id);
    return user ? [presentUserBasic(user, pc)] : [];
  });
}

/** The fields every rule shape shares. */
function ruleBase(rule: WrappedRule, lookups: ApprovalLookups, pc: PresentContext) {
  return {
    id: rule.id,
    name: rule.name,
    rule_type: rule.ruleType,
    report_type: null,
    eligible_approvers: users(rule.eligibleIds, lookups, pc),
    approvals_required: rule.approvalsRequired,
    users: users(rule.userIds, lookups, pc),
    groups: rule.groupIds.flatMap((id) => {
      const group = lookups.groups.get(id);
      return group ? [presentApprovalGroup(group, pc)] : [];
    }),
    contains_hidden_groups: false,
  };
}

/** GitLab's ProjectApprovalRule entity. */
export function presentProjectRule(
  rule: WrappedRule,
  protectedBranchIds: number[],
  lookups: ApprovalLookups,
  pc: PresentContext,
) {
  return {
    ...ruleBase(rule, lookups, pc),
    protected_branches: protectedBranchIds.flatMap((id) =>
      lookups.protectedBranches.has(id) ? [lookups.protectedBranches.get(id)] : [],
    ),
    applies_to_all_protected_branches: false,
  };
}

/** GitLab's MergeRequestApprovalRule entity. */
export function presentMergeRequestRule(rule: WrappedRule, lookups: ApprovalLookups, pc: PresentContext) {
  return {
    ...ruleBase(rule, lookups, pc),
    section: rule.section,
    source_rule: rule.sourceRule ? { approvals_required: rule.sourceRule.approvals_required } : null,
    overridden: rule.overridden,
  };
}

/** GitLab's MergeRequestApprovalStateRule entity: the rule with who approved it. */
export function presentApprovalStateRule(rule: WrappedRule, lookups: ApprovalLookups, pc: PresentContext) {
  return {
    ...presentMergeRequestRule(rule, lookups, pc),
    code_owner: rule.ruleType === 'code_owner',
    approved_by: users(rule.approvedByIds, lookups, pc),
    approved: rule.approvalsLeft === 0,
  };
}

/** GitLab's approval state answer (`GET …/approval_state`). */
export function presentApprovalState(state: ApprovalState, lookups: ApprovalLookups, pc: PresentContext) {
  return {
    approval_rules_overwritten: state.overwritten,
    rules: state.rules.map((rule) => presentApprovalStateRule(rule, lookups, pc)),
  };
}

/** GitLab's ApprovalState entity for `GET|POST …/approvals`, `approve` and `unapprove`. */
export function presentMergeRequestApprovals(
  mr: MergeRequest,
  state: ApprovalState,
  viewer: { user: User | null; canApprove: boolean },
  lookups: ApprovalLookups,
  pc: PresentContext,
) {
  const approvedBy = state.approvals.flatMap((a) => {
    const user = lookups.users.get(a.userId);
    return user ? [{ user: presentUserBasic(user, pc) }] : [];
  });
  const userHasApproved = viewer.user !== null && state.approvals.some((a) => a.userId === viewer.user?.id);
  return {
    id: mr.id,
    iid: mr.iid,
    project_id: mr.target_project_id,
    title: mr.title,
    description: mr.description,
    state: mr.state,
    created_at: isoTime(mr.created_at),
    updated_at: isoTime(mr.updated_at),
    merge_status: mr.merge_status,
    approved: state.approvalsLeft === 0,
    approvals_required: state.approvalsRequired,
    approvals_left: state.approvalsLeft,
    require_password_to_approve: state.settings.require_password_to_approve,
    approved_by: approvedBy,
    suggested_approvers: [] as unknown[],
    approvers: [] as unknown[],
    approver_groups: [] as unknown[],
    user_has_approved: userHasApproved,
    user_can_approve: viewer.canApprove && !userHasApproved,
    approval_rules_left: state.rules
      .filter((r) => r.approvalsLeft > 0)
      .map((r) => ({ id: r.id, name: r.name, rule_type: r.ruleType })),
    has_approval_rules: state.rules.length > 0,
    merge_request_approvers_available: true,
    multiple_approval_rules_available: true,
    invalid_approvers_rules: [] as unknown[],
  };
}

export { avatarUrl };
