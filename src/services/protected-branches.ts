/**
 * Protected branches (GitLab's ProtectedBranch with its push, merge and unprotect access rows):
 * the rules, who they admit, and the API's create, update and destroy services.
 *
 * For other services (merge requests, approvals):
 * - `protectedBranchRules(deps, projectId, branch)`: the effective rules for a branch, or null
 *   when it is not protected (pushLevel, mergeLevel, unprotectLevel, allowForcePush,
 *   codeOwnerApprovalRequired, and the matching rules).
 * - `canMerge(deps, project, user, branch, policy?)`: may this user merge into the branch
 *   (GitLab's can_merge_to_branch?). A merge moves the target ref through the existing ref
 *   services after this check; it is not subject to the push rules.
 * - `canPushToBranch(deps, project, policy, branch)`: may the caller push to the branch.
 * - `protectedBranchesByIds`, `granteeNamesFor` + presentProtectedBranch: approval rules'
 *   `protected_branch_ids` and their `protected_branches` field.
 * All read the per-process cache (loadProtectedBranches); none asks the database once warm,
 * unless a matching row names a group.
 */
import { sql } from 'kysely';
import { type Db, UNIQUE_VIOLATION } from '../db/database.js';
import {
  ACCESS_TABLE,
  type AccessGrant,
  deleteAccessRows,
  deleteProtectedBranch,
  granteeNames,
  insertAccessRows,
  insertProtectedBranch,
  listProtectedBranches,
  type ProtectedAction,
  type ProtectedBranchRow,
  updateAccessLevel,
  updateProtectedBranchFlags,
} from '../db/queries/protected-branches.js';
import type { Project, User } from '../db/schema.js';
import { ApiError, conflict, forbidden, recordNotFound } from '../http/errors.js';
import { loadProjectPolicy, type ProjectPolicy } from '../policies/abilities.js';
import { AccessLevel } from '../policies/access-levels.js';
import {
  type Accessor,
  defaultBranchAccess,
  lowestRole,
  matchingRules,
  rulesAllow,
} from '../policies/branch-protection.js';
import { type GranteeNames, granteesOf } from '../presenters/protected-branch.js';
import { cachedLookup, type Deps, today } from './deps.js';
import { findProjectAndNamespace } from './projects.js';

export type { ProtectedBranchRow } from '../db/queries/protected-branches.js';

/**
 * A project's protected branches with their access rows, kept in process (lookup kind
 * `protectedBranches`, forgotten on every change to the four tables, migration 0018): the branch
 * list and every push ask no query once warm. Entries are frozen.
 */
export async function loadProtectedBranches(deps: Deps, projectId: number): Promise<readonly ProtectedBranchRow[]> {
  return (await cachedLookup(deps, 'protectedBranches', String(projectId), () =>
    listProtectedBranches(deps.db, projectId),
  )) as readonly ProtectedBranchRow[];
}

/** Protected branches of a project by id (approval rules name them by `protected_branch_ids`). */
export async function protectedBranchesByIds(
  deps: Deps,
  projectId: number,
  ids: readonly number[],
): Promise<ProtectedBranchRow[]> {
  const wanted = new Set(ids);
  return (await loadProtectedBranches(deps, projectId)).filter((rule) => wanted.has(rule.id));
}

/**
 * The names of the users and groups the rules' access rows name, for presentProtectedBranch
 * (src/presenters/protected-branch.ts), which builds GitLab's ProtectedBranch entity.
 */
export async function granteeNamesFor(deps: Deps, rules: readonly ProtectedBranchRow[]): Promise<GranteeNames> {
  const { userIds, groupIds } = granteesOf(rules);
  return granteeNames(deps.db, userIds, groupIds);
}

/** The effective protection of one branch: every matching rule taken together, as GitLab does. */
export interface BranchRules {
  /** The lowest role that may push (30 developers, 40 maintainers, 60 administrators); 0 when no role may. */
  pushLevel: number;
  /** The lowest role that may merge into the branch; 0 when no role may. */
  mergeLevel: number;
  /** The lowest role that may unprotect (change or delete the rules): 40 when no unprotect row says otherwise. */
  unprotectLevel: number;
  /** Any matching rule allows force pushes (GitLab's ProtectedBranch.allow_force_push?). */
  allowForcePush: boolean;
  /** Any matching rule requires code owner approval (branch_requires_code_owner_approval?). */
  codeOwnerApprovalRequired: boolean;
  /** The matching rules themselves (names or wildcards, with their user and group rows). */
  rules: readonly ProtectedBranchRow[];
}

/**
 * The effective rules for `branch` of a project, or null when no protected branch name or
 * wildcard matches it. For the merge request and approval services: pushLevel/mergeLevel
 * summarise the role rows; use canMerge/canPushToBranch to decide for a user (user and group
 * rows count there too).
 */
export async function protectedBranchRules(deps: Deps, projectId: number, branch: string): Promise<BranchRules | null> {
  const matching = matchingRules(await loadProtectedBranches(deps, projectId), branch);
  if (matching.length === 0) return null;
  return {
    pushLevel: lowestRole(matching, 'push'),
    mergeLevel: lowestRole(matching, 'merge'),
    unprotectLevel: matching.some((rule) => rule.unprotect.length > 0)
      ? lowestRole(matching, 'unprotect')
      : AccessLevel.MAINTAINER,
    allowForcePush: matching.some((rule) => rule.allow_force_push),
    codeOwnerApprovalRequired: matching.some((rule) => rule.code_owner_approval_required),
    rules: matching,
  };
}

/** The groups among `groupIds` the user belongs to (directly or through an ancestor group). */
async function groupsOf(deps: Deps, userId: number, groupIds: number[]): Promise<Set<number>> {
  if (groupIds.length === 0) return new Set();
  const { rows } = await sql<{ id: number }>`
    SELECT g.id FROM namespaces g
    WHERE g.id = ANY(${sql.val(groupIds)}::int[]) AND EXISTS (
      SELECT 1 FROM members m
      WHERE m.user_id = ${userId} AND m.source_type = 'group' AND m.source_id = ANY(g.traversal_ids)
        AND m.requested_at IS NULL AND (m.expires_at IS NULL OR m.expires_at >= ${today(deps)}::date))`.execute(
    deps.db,
  );
  return new Set(rows.map((r) => r.id));
}

/** The caller as the rules see them; group memberships asked only if a matching row names a group. */
async function accessorFor(
  deps: Deps,
  policy: ProjectPolicy,
  matching: readonly ProtectedBranchRow[],
  action: ProtectedAction | 'any' = 'any',
): Promise<Accessor> {
  const userId = policy.user?.id ?? null;
  const actions: ProtectedAction[] = action === 'any' ? ['push', 'merge', 'unprotect'] : [action];
  const groupIds = [
    ...new Set(matching.flatMap((rule) => actions.flatMap((a) => rule[a].map((row) => row.group_id)))),
  ].filter((id): id is number => id !== null);
  const groups = userId !== null ? await groupsOf(deps, userId, groupIds) : new Set<number>();
  return { userId, level: policy.level, inGroup: (id) => groups.has(id) };
}

/**
 * GitLab's UserAccess#can_push_to_branch?: push_code, and on a protected branch a push access
 * row of a matching rule that admits the caller.
 */
export async function canPushToBranch(
  deps: Deps,
  project: Project,
  policy: ProjectPolicy,
  branch: string,
): Promise<boolean> {
  if (!policy.can('push_code')) return false;
  const matching = matchingRules(await loadProtectedBranches(deps, project.id), branch);
  if (matching.length === 0) return true;
  return rulesAllow(matching, 'push', await accessorFor(deps, policy, matching, 'push'));
}

/**
 * GitLab's UserAccess#can_merge_to_branch?: whether `user` may merge into `branch` of `project`
 * (push_code, and on a protected branch a merge access row that admits them). Pass the caller's
 * policy when it is at hand to skip loading it.
 */
export async function canMerge(
  deps: Deps,
  project: Project,
  user: User | null,
  branch: string,
  policy?: ProjectPolicy,
): Promise<boolean> {
  if (!user) return false;
  let checked = policy;
  if (!checked || checked.user?.id !== user.id) {
    const found = await findProjectAndNamespace(deps, String(project.id));
    if (!found) return false;
    checked = await loadProjectPolicy(deps, user, found.project, found.namespace);
  }
  if (!checked.can('push_code')) return false;
  const matching = matchingRules(await loadProtectedBranches(deps, project.id), branch);
  if (matching.length === 0) return true;
  return rulesAllow(matching, 'merge', await accessorFor(deps, checked, matching, 'merge'));
}

export const CREATE_PROTECTED_MESSAGE = 'You are not allowed to create protected branches on this project.';

/**
 * GitLab's protected_branch_creation_checks for a branch created through the API (from a commit
 * the project has): whoever may push to it, or merge into it. Throws the 400 GitLab answers.
 */
export async function checkProtectedBranchCreation(
  deps: Deps,
  project: Project,
  policy: ProjectPolicy,
  branch: string,
) {
  const matching = matchingRules(await loadProtectedBranches(deps, project.id), branch);
  if (matching.length === 0) return;
  const who = await accessorFor(deps, policy, matching);
  if (rulesAllow(matching, 'push', who) || rulesAllow(matching, 'merge', who)) return;
  throw new ApiError(400, { message: CREATE_PROTECTED_MESSAGE });
}

export const FORCE_PUSH_PROTECTED_MESSAGE =
  'You are not allowed to force push code to a protected branch on this project.';

export const DELETE_PROTECTED_MESSAGE =
  'You are not allowed to delete protected branches from this project. Only a project maintainer or owner can delete a protected branch.';

/**
 * What the pre-receive hook needs to decide a push (src/git/smart-http.ts): one line per
 * protected name or wildcard, `<may push 0|1><force push allowed 0|1><may merge 0|1> <name>`. Names that no
 * valid branch can match (git forbids `?`, `[`, `\` and control characters in ref names) are left
 * out, so the hook's shell pattern sees only literal characters and `*`.
 */
export async function pushRulesForHook(deps: Deps, project: Project, policy: ProjectPolicy): Promise<string> {
  const rules = await loadProtectedBranches(deps, project.id);
  const lines: string[] = [];
  const who = await accessorFor(deps, policy, rules);
  for (const rule of rules) {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
    if (/[?[\\\x00-\x1f\x7f]/.test(rule.name)) continue;
    const flag = (yes: boolean) => (yes ? '1' : '0');
    const push = flag(rulesAllow([rule], 'push', who));
    const merge = flag(policy.can('push_code') && rulesAllow([rule], 'merge', who));
    lines.push(`${push}${flag(rule.allow_force_push)}${merge} ${rule.name}`);
  }
  return lines.join('\n');
}

// --- the protected branches API (GitLab's ProtectedBranches::CreateService, UpdateService, DestroyService)

export interface GrantInput {
  id?: number | undefined;
  access_level?: number | undefined;
  user_id?: number | undefined;
  group_id?: number | undefined;
  deploy_key_id?: number | undefined;
  _destroy?: boolean | undefined;
}

export interface ProtectInput {
  name: string;
  push_access_level?: number | undefined;
  merge_access_level?: number | undefined;
  unprotect_access_level?: number | undefined;
  allow_force_push?: boolean | undefined;
  code_owner_approval_required?: boolean | undefined;
  allowed_to_push?: GrantInput[] | undefined;
  allowed_to_merge?: GrantInput[] | undefined;
  allowed_to_unprotect?: GrantInput[] | undefined;
}

const ACTIONS: ProtectedAction[] = ['push', 'merge', 'unprotect'];
const ACTION_LABEL: Record<ProtectedAction, string> = {
  push: 'Push access levels',
  merge: 'Merge access levels',
  unprotect: 'Unprotect access levels',
};

/** GitLab answers a model validation failure here with 422 and the full messages as an array. */
const invalid = (messages: string[]) => new ApiError(422, { message: messages });
const badRequest = (error: string) => new ApiError(400, { error });

/** Users and groups named in grants must exist and be able to reach the project. */
async function checkGrantees(db: Db, grants: AccessGrant[], field: string): Promise<void> {
  const userIds = grants.flatMap((g) => (g.user_id !== undefined ? [g.user_id] : []));
  const groupIds = grants.flatMap((g) => (g.group_id !== undefined ? [g.group_id] : []));
  if (userIds.length) {
    const found = await db.selectFrom('users').select('id').where('id', 'in', userIds).execute();
    if (found.length !== new Set(userIds).size) throw badRequest(`${field} is invalid`);
  }
  if (groupIds.length) {
    const found = await db
      .selectFrom('namespaces')
      .select('id')
      .where('id', 'in', groupIds)
      .where('kind', '=', 'group')
      .execute();
    if (found.length !== new Set(groupIds).size) throw badRequest(`${field} is invalid`);
  }
}

const grantKey = (g: AccessGrant) =>
  g.access_level !== undefined ? `a${g.access_level}` : g.user_id !== undefined ? `u${g.user_id}` : `g${g.group_id}`;

/** A grant names exactly one of a role, a user or a group. */
function toGrant(input: GrantInput, action: ProtectedAction): AccessGrant {
  const named = [input.access_level, input.user_id, input.group_id].filter((v) => v !== undefined).length;
  if (input.deploy_key_id !== undefined) throw badRequest(`allowed_to_${action} is invalid`);
  if (named !== 1) throw badRequest(`allowed_to_${action} is invalid`);
  return { access_level: input.access_level, user_id: input.user_id, group_id: input.group_id };
}

function checkUnique(action: ProtectedAction, grants: AccessGrant[]): void {
  const seen = new Set<string>();
  for (const grant of grants) {
    const key = grantKey(grant);
    if (seen.has(key)) {
      const what = grant.access_level !== undefined ? 'access level' : grant.user_id !== undefined ? 'user' : 'group';
      throw invalid([`${ACTION_LABEL[action]} ${what} has already been taken`]);
    }
    seen.add(key);
  }
}

async function findRule(deps: Deps, projectId: number, name: string): Promise<ProtectedBranchRow> {
  const rule = (await loadProtectedBranches(deps, projectId)).find((r) => r.name === name);
  // GitLab's find_by! answers ActiveRecord's RecordNotFound: `404 Not found`.
  if (!rule) throw recordNotFound();
  return rule;
}

/** One protected branch of the project by exact name (or wildcard), or 404. */
export const findProtectedBranch = findRule;

/** GitLab's ProtectedBranches::CreateService through the API; 409 if the name is protected already. */
export async function protectBranch(deps: Deps, project: Project, input: ProtectInput): Promise<ProtectedBranchRow> {
  if ((await loadProtectedBranches(deps, project.id)).some((r) => r.name === input.name)) {
    throw conflict(`Protected branch '${input.name}' already exists`);
  }
  if (input.name.trim() === '') throw invalid(["Name can't be blank"]);
  const grants = {} as Record<ProtectedAction, AccessGrant[]>;
  for (const action of ACTIONS) {
    const level = input[`${action}_access_level`];
    const allowed = input[`allowed_to_${action}`];
    const list: AccessGrant[] = [];
    // GitLab's AccessLevelParams: the role given, else Maintainers unless only a list was given.
    if (level !== undefined) list.push({ access_level: level });
    else if (allowed === undefined || allowed.length === 0) list.push({ access_level: AccessLevel.MAINTAINER });
    for (const entry of allowed ?? []) list.push(toGrant(entry, action));
    checkUnique(action, list);
    await checkGrantees(deps.db, list, `allowed_to_${action}`);
    grants[action] = list;
  }
  const now = deps.clock.now();
  try {
    await deps.db.transaction().execute((tx) =>
      insertProtectedBranch(
        tx,
        {
          project_id: project.id,
          name: input.name,
          allow_force_push: input.allow_force_push ?? false,
          code_owner_approval_required: input.code_owner_approval_required ?? false,
          now,
        },
        grants,
      ),
    );
  } catch (error) {
    // Two creators at once: the unique constraint decides, as the check above would have.
    if ((error as { code?: string }).code === UNIQUE_VIOLATION) {
      throw conflict(`Protected branch '${input.name}' already exists`);
    }
    throw error;
  }
  return findRule(deps, project.id, input.name);
}

/** Whether the caller may change or remove this rule (GitLab: admin_project, and EE's unprotect rows). */
export async function authorizeUnprotect(deps: Deps, policy: ProjectPolicy, rule: ProtectedBranchRow): Promise<void> {
  policy.authorize('admin_project');
  if (rule.unprotect.length === 0) return;
  if (!rulesAllow([rule], 'unprotect', await accessorFor(deps, policy, [rule], 'unprotect'))) throw forbidden();
}

/**
 * GitLab's ProtectedBranches::UpdateService through the API: the flags, and access rows by
 * nested attributes (`{access_level|user_id|group_id}` adds a row, `{id, _destroy: true}` removes
 * one, `{id, access_level}` changes one).
 */
export async function updateProtectedBranch(
  deps: Deps,
  project: Project,
  rule: ProtectedBranchRow,
  input: Omit<ProtectInput, 'name'>,
): Promise<ProtectedBranchRow> {
  const now = deps.clock.now();
  const plans: { action: ProtectedAction; add: AccessGrant[]; remove: number[]; change: [number, number][] }[] = [];
  for (const action of ACTIONS) {
    const plan = { action, add: [] as AccessGrant[], remove: [] as number[], change: [] as [number, number][] };
    const level = input[`${action}_access_level`];
    if (level !== undefined) plan.add.push({ access_level: level });
    for (const entry of input[`allowed_to_${action}`] ?? []) {
      if (entry.id !== undefined) {
        if (!rule[action].some((row) => row.id === entry.id)) throw badRequest(`allowed_to_${action} is invalid`);
        if (entry._destroy) plan.remove.push(entry.id);
        else if (entry.access_level !== undefined) plan.change.push([entry.id, entry.access_level]);
        continue;
      }
      plan.add.push(toGrant(entry, action));
    }
    const kept: AccessGrant[] = rule[action]
      .filter((row) => !plan.remove.includes(row.id))
      .map((row) => {
        const changed = plan.change.find(([id]) => id === row.id);
        if (changed) return { access_level: changed[1] };
        return {
          access_level: row.access_level ?? undefined,
          user_id: row.user_id ?? undefined,
          group_id: row.group_id ?? undefined,
        };
      });
    checkUnique(action, [...kept, ...plan.add]);
    await checkGrantees(deps.db, plan.add, `allowed_to_${action}`);
    plans.push(plan);
  }
  const write = deps.db.transaction().execute(async (tx) => {
    await updateProtectedBranchFlags(
      tx,
      rule.id,
      { allow_force_push: input.allow_force_push, code_owner_approval_required: input.code_owner_approval_required },
      now,
    );
    for (const plan of plans) {
      await deleteAccessRows(tx, plan.action, rule.id, plan.remove);
      for (const [id, level] of plan.change) await updateAccessLevel(tx, plan.action, rule.id, id, level, now);
      await insertAccessRows(tx, plan.action, rule.id, plan.add, now);
    }
  });
  try {
    await write;
  } catch (error) {
    // A concurrent change added the same row first: the same answer as if it had been seen.
    const index = (error as { code?: string; constraint?: string }).constraint ?? '';
    if ((error as { code?: string }).code === UNIQUE_VIOLATION && index.includes('_unique_')) {
      const action = ACTIONS.find((a) => index.startsWith(ACCESS_TABLE[a])) ?? 'push';
      const what = index.endsWith('user_id') ? 'user' : index.endsWith('group_id') ? 'group' : 'access level';
      throw invalid([`${ACTION_LABEL[action]} ${what} has already been taken`]);
    }
    throw error;
  }
  return findRule(deps, project.id, rule.name);
}

/** GitLab's ProtectedBranches::DestroyService. */
export async function unprotectBranch(deps: Deps, rule: ProtectedBranchRow): Promise<void> {
  if (!(await deleteProtectedBranch(deps.db, rule.id))) throw recordNotFound();
}

/**
 * GitLab's ProtectDefaultBranchService: protects `branch` as the project's
 * default_branch_protection says, unless a rule of that name exists. Run in the transaction that
 * creates the project, or after the first push names the default branch.
 */
export async function protectDefaultBranch(
  db: Db,
  project: Pick<Project, 'id' | 'default_branch_protection'>,
  branch: string,
  now: Date,
): Promise<void> {
  const access = defaultBranchAccess(project.default_branch_protection);
  if (!access) return;
  const existing = await db
    .selectFrom('protected_branches')
    .select('id')
    .where('project_id', '=', project.id)
    .where('name', '=', branch)
    .executeTakeFirst();
  if (existing) return;
  await insertProtectedBranch(
    db,
    { project_id: project.id, name: branch, allow_force_push: false, code_owner_approval_required: false, now },
    {
      push: [{ access_level: access.push }],
      merge: [{ access_level: access.merge }],
      unprotect: [],
    },
  );
}

/** Renames the rule named `from` to `to`, unless `to` is protected by name already. */
export async function renameProtectedBranch(db: Db, projectId: number, from: string, to: string): Promise<void> {
  await db
    .updateTable('protected_branches')
    .set({ name: to })
    .where('project_id', '=', projectId)
    .where('name', '=', from)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('protected_branches as taken')
            .select('taken.id')
            .where('taken.project_id', '=', projectId)
            .where('taken.name', '=', to),
        ),
      ),
    )
    .execute();
}
