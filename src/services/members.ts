import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import { insertEvent } from '../db/queries/events.js';
import {
  findMember,
  findScopeMember,
  groupOwnerIds,
  insertMember,
  type MemberScope,
  type MemberSourceRef,
  membershipsInHierarchy,
  updateMemberRow,
} from '../db/queries/members.js';
import { findUserById, findUserByUsername, findUsersByIds } from '../db/queries/users.js';
import type { Member, Namespace, Project, User } from '../db/schema.js';
import { ApiError, conflict, forbidden, notFound, recordNotFound } from '../http/errors.js';
import { AccessLevel, GROUP_MEMBER_LEVELS, PROJECT_MEMBER_LEVELS } from '../policies/access-levels.js';
import type { MembershipPolicy } from '../policies/members.js';
import { presentBulkAddResult } from '../presenters/member.js';
import { type Deps, today } from './deps.js';
import { Validation } from './errors.js';

/** The group or project whose members are managed. */
export type MemberTarget =
  | { type: 'group'; group: Namespace }
  | { type: 'project'; project: Project; namespace: Namespace };

/** Members::CreateService's DEFAULT_INVITE_LIMIT: users one request may add. */
export const MAX_USERS_PER_ADD = 100;

export const sourceRef = (target: MemberTarget): MemberSourceRef =>
  target.type === 'group' ? { type: 'group', id: target.group.id } : { type: 'project', id: target.project.id };

/** The direct members of the target, or (`deep`) everyone with access, inherited from ancestor groups too. */
export function memberScope(target: MemberTarget, deep: boolean): MemberScope {
  if (!deep) return { kind: 'direct', source: sourceRef(target) };
  if (target.type === 'group') return { kind: 'all', projectId: null, groupIds: target.group.traversal_ids };
  const groupIds = target.namespace.kind === 'group' ? target.namespace.traversal_ids : [];
  return { kind: 'all', projectId: target.project.id, groupIds };
}

/** The groups whose Owners count for the target group's "last Owner" rule: itself and its ancestors. */
async function ownersOf(db: Db, group: Namespace, day: string): Promise<number[]> {
  return groupOwnerIds(db, group.traversal_ids, day);
}

/**
 * GitLab's `member_last_owner?`: the member is an Owner and it is the only Owner membership of
 * the group and its ancestors.
 */
export async function isLastOwner(
  deps: Deps,
  target: MemberTarget,
  member: Member,
  db: Db = deps.db,
): Promise<boolean> {
  if (target.type !== 'group' || member.access_level !== AccessLevel.OWNER || member.requested_at !== null)
    return false;
  const owners = await ownersOf(db, target.group, today(deps));
  return owners.length === 1 && owners[0] === member.user_id;
}

/**
 * Serialises changes that could leave a hierarchy without an Owner: two Owners demoting each
 * other at once would both pass the last-Owner check. Locks the hierarchy's root row.
 */
async function lockHierarchy(tx: Db, target: MemberTarget): Promise<void> {
  const rootId = target.type === 'group' ? target.group.traversal_ids[0] : undefined;
  if (rootId !== undefined) await sql`SELECT id FROM namespaces WHERE id = ${rootId} FOR UPDATE`.execute(tx);
}

/** The member's row as it is now, inside a transaction; 404 when it went away meanwhile. */
async function reloadMember(tx: Db, member: Member): Promise<Member> {
  const row = await tx.selectFrom('members').selectAll().where('id', '=', member.id).forUpdate().executeTakeFirst();
  if (!row) throw recordNotFound();
  return row;
}

const isExpired = (member: Member, day: string) => member.expires_at !== null && member.expires_at <= day;

/** A direct, active member of the target for one user, or 404 `Not found` (Rails' find_by!). */
export async function findDirectMember(deps: Deps, target: MemberTarget, userId: number): Promise<Member> {
  const member = await findScopeMember(deps.db, memberScope(target, false), userId, today(deps));
  if (!member) throw recordNotFound();
  return member;
}

/** The users (and creators) of members, by id. */
export async function usersOfMembers(db: Db, members: Member[]): Promise<Map<number, User>> {
  const ids = new Set<number>();
  for (const m of members) {
    ids.add(m.user_id);
    if (m.created_by_id !== null) ids.add(m.created_by_id);
  }
  const users = await findUsersByIds(db, [...ids]);
  return new Map(users.map((u) => [u.id, u]));
}

/** Levels a membership of the target may hold: Owner only on groups, Minimal Access only on top-level groups. */
export function checkAccessLevel(v: Validation, target: MemberTarget, level: number): void {
  const allowed: readonly number[] = target.type === 'group' ? GROUP_MEMBER_LEVELS : PROJECT_MEMBER_LEVELS;
  if (target.type === 'group' && level === AccessLevel.MINIMAL_ACCESS && target.group.parent_id !== null) {
    v.add('access_level', 'is not included in the list');
    v.add('access_level', 'supported on top level groups only');
  } else if (!allowed.includes(level)) {
    v.add('access_level', 'is not included in the list');
  }
}

/** GitLab's FutureDateValidator: an expiry date may be today, not before. */
function checkExpiry(v: Validation, deps: Deps, expiresAt: string | null | undefined): void {
  if (expiresAt && expiresAt < today(deps)) v.add('expires_at', 'cannot be a date in the past');
}

/** Human-readable field names for full messages (`Access level is not included in the list`). */
const FIELD_NAMES: Record<string, string> = { access_level: 'Access level', expires_at: 'Expires at' };

function fullMessages(errors: Record<string, string[]>): string[] {
  return Object.entries(errors).flatMap(([field, messages]) =>
    messages.map((m) => `${FIELD_NAMES[field] ?? field} ${m}`),
  );
}

function validationErrors(v: Validation): Record<string, string[]> | null {
  try {
    v.throwIfAny();
    return null;
  } catch (error) {
    if (error instanceof ApiError) return error.body.message as Record<string, string[]>;
    throw error;
  }
}

export interface AddMemberInput {
  /** `user_id` as sent: one id, or several separated by commas. */
  userId?: string;
  /** `username`: one, or several separated by commas. */
  username?: string;
  accessLevel: number;
  expiresAt: string | null;
  inviteSource: string;
}

const TOO_HIGH = "the member access level can't be higher than the current user's one";

/** Records a membership event in the transaction of the change. */
async function recordMemberEvent(db: Db, action: string, member: Member, at: Date): Promise<void> {
  await insertEvent(db, {
    action,
    author_id: member.user_id,
    project_id: member.source_type === 'project' ? member.source_id : null,
    group_id: member.source_type === 'group' ? member.source_id : null,
    target_type: null,
    target_id: null,
    push_data: JSON.stringify(null),
    created_at: at,
  });
}

/**
 * Makes `user` a member (or, for a pending access request, approves it) with a `joined` event.
 * Returns null when the row changed under us (a concurrent add won).
 */
async function createMembership(
  deps: Deps,
  actor: User | null,
  target: MemberTarget,
  user: User,
  level: number,
  expiresAt: string | null,
  inviteSource: string | null,
  extra: { ldap?: boolean } = {},
): Promise<Member | null> {
  const now = deps.clock.now();
  const source = sourceRef(target);
  try {
    return await deps.db.transaction().execute(async (tx) => {
      const existing = await findMember(tx, source.type, source.id, user.id);
      let member: Member;
      if (existing && (existing.requested_at !== null || isExpired(existing, today(deps)))) {
        // A pending access request is approved; an expired membership (gone for every purpose,
        // only not yet removed by the daily job) is replaced.
        const renewed = existing.requested_at === null;
        member = await updateMemberRow(tx, existing.id, {
          requested_at: null,
          access_level: level,
          expires_at: expiresAt,
          created_by_id: actor?.id ?? null,
          ldap: extra.ldap ?? (renewed ? false : existing.ldap),
          override: renewed ? false : existing.override,
          ...(renewed ? { created_at: now, invite_source: inviteSource } : {}),
          updated_at: now,
        });
      } else if (existing) {
        return null;
      } else {
        member = await insertMember(tx, {
          source_type: source.type,
          source_id: source.id,
          user_id: user.id,
          access_level: level,
          expires_at: expiresAt,
          created_by_id: actor?.id ?? null,
          invite_source: inviteSource,
          ldap: extra.ldap ?? false,
          created_at: now,
          updated_at: now,
        });
      }
      await recordMemberEvent(tx, 'joined', member, now);
      return member;
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) return null;
    throw error;
  }
}

/** Resolves the users of a multi-user add: unknown ids and usernames are skipped, as GitLab does. */
async function resolveInvitees(deps: Deps, input: AddMemberInput): Promise<{ invites: number; users: User[] }> {
  const parts = [...new Set((input.userId ?? input.username ?? '').split(','))].filter((p) => p !== '');
  if (parts.length === 0 || parts.length > MAX_USERS_PER_ADD) return { invites: parts.length, users: [] };
  const users: User[] = [];
  for (const part of parts) {
    let user: User | undefined;
    if (input.userId !== undefined) {
      if (!/^\d+$/.test(part)) continue;
      const id = Number(part);
      if (id > 2147483647) continue;
      user = await findUserById(deps.db, id);
    } else {
      user = await findUserByUsername(deps.db, part.trim());
    }
    if (user && !users.some((u) => u.id === user.id)) users.push(user);
  }
  return { invites: parts.length, users };
}

/**
 * POST /:source/:id/members. One user: the Member (201), 404 `User Not Found`, 409 `Member
 * already exists`, 403, or a 400 validation error. Several users (comma-separated): GitLab's
 * service result hash, `{"status":"success"}` or `{"message": "...", "status":"error"}`.
 */
export async function addMembers(
  deps: Deps,
  actor: User,
  policy: MembershipPolicy,
  target: MemberTarget,
  input: AddMemberInput,
): Promise<{ single: Member } | { bulk: ReturnType<typeof presentBulkAddResult> }> {
  const raw = input.userId ?? input.username ?? '';
  if (raw.includes(',')) return { bulk: await addSeveral(deps, actor, policy, target, input) };

  const user =
    input.userId !== undefined
      ? /^\d+$/.test(input.userId.trim()) && Number(input.userId) <= 2147483647
        ? await findUserById(deps.db, Number(input.userId))
        : undefined
      : await findUserByUsername(deps.db, raw);
  if (!user) throw notFound('User');
  const source = sourceRef(target);
  const existing = await findMember(deps.db, source.type, source.id, user.id);
  if (existing && existing.requested_at === null && !isExpired(existing, today(deps))) {
    throw conflict('Member already exists');
  }
  if (!policy.can('create_member')) throw forbidden();

  const v = new Validation();
  checkAccessLevel(v, target, input.accessLevel);
  checkExpiry(v, deps, input.expiresAt);
  v.throwIfAny();
  if (!policy.mayAssign(input.accessLevel)) {
    throw new ApiError(400, { message: `${user.username}: ${TOO_HIGH}`, status: 'error' });
  }
  const member = await createMembership(
    deps,
    actor,
    target,
    user,
    input.accessLevel,
    input.expiresAt,
    input.inviteSource,
  );
  if (!member) throw conflict('Member already exists');
  return { single: member };
}

async function addSeveral(
  deps: Deps,
  actor: User,
  policy: MembershipPolicy,
  target: MemberTarget,
  input: AddMemberInput,
) {
  const { invites, users } = await resolveInvitees(deps, input);
  if (invites === 0) return { message: 'No users specified.', status: 'error' };
  if (invites > MAX_USERS_PER_ADD) {
    return { message: `Too many users specified (limit is ${MAX_USERS_PER_ADD})`, status: 'error' };
  }
  const errors: string[] = [];
  const source = sourceRef(target);
  for (const user of users) {
    const existing = await findMember(deps.db, source.type, source.id, user.id);
    const isMember = existing !== undefined && existing.requested_at === null && !isExpired(existing, today(deps));
    let allowed: boolean;
    if (isMember) {
      const lastOwner = await isLastOwner(deps, target, existing);
      allowed = policy.canMember('update_member', { member: existing, lastOwner });
    } else {
      allowed = policy.can('create_member');
    }
    if (!allowed) {
      errors.push(`${user.username}: not authorized to ${isMember ? 'update' : 'create'} member`);
      continue;
    }
    const v = new Validation();
    checkAccessLevel(v, target, input.accessLevel);
    checkExpiry(v, deps, input.expiresAt);
    const invalid = validationErrors(v);
    if (invalid) {
      errors.push(`${user.username}: ${fullMessages(invalid).join(' and ')}`);
      continue;
    }
    if (!policy.mayAssign(input.accessLevel)) {
      errors.push(`${user.username}: ${TOO_HIGH}`);
      continue;
    }
    if (isMember) {
      if (existing.access_level !== input.accessLevel || existing.expires_at !== input.expiresAt) {
        await updateMemberRow(deps.db, existing.id, {
          access_level: input.accessLevel,
          expires_at: input.expiresAt,
          updated_at: deps.clock.now(),
        });
      }
    } else {
      await createMembership(deps, actor, target, user, input.accessLevel, input.expiresAt, input.inviteSource);
    }
  }
  return presentBulkAddResult(errors);
}

export interface UpdateMemberInput {
  accessLevel: number;
  /** undefined: unchanged; null: never expires. */
  expiresAt?: string | null;
}

/** PUT /:source/:id/members/:user_id. */
export async function updateMember(
  deps: Deps,
  policy: MembershipPolicy,
  target: MemberTarget,
  member: Member,
  input: UpdateMemberInput,
): Promise<Member> {
  return deps.db.transaction().execute(async (tx) => {
    await lockHierarchy(tx, target);
    const current = await reloadMember(tx, member);
    const lastOwner = await isLastOwner(deps, target, current, tx);
    policy.authorizeMember('update_member', { member: current, lastOwner });
    if (!policy.mayAssign(input.accessLevel)) throw forbidden();
    const v = new Validation();
    checkAccessLevel(v, target, input.accessLevel);
    if (input.expiresAt !== undefined) checkExpiry(v, deps, input.expiresAt);
    v.throwIfAny();
    const changed =
      current.access_level !== input.accessLevel ||
      (input.expiresAt !== undefined && current.expires_at !== input.expiresAt);
    if (!changed) return current;
    return updateMemberRow(tx, current.id, {
      access_level: input.accessLevel,
      ...(input.expiresAt !== undefined ? { expires_at: input.expiresAt } : {}),
      updated_at: deps.clock.now(),
    });
  });
}

/**
 * Removes a membership with a `left` event. For a group member, unless `skipSubresources`, also
 * the user's direct memberships of the group's subgroups and their projects (GitLab's
 * DestroyService). Issues and merge requests do not exist in Depot, so there is nothing to unassign.
 */
export async function removeMember(
  deps: Deps,
  policy: MembershipPolicy,
  target: MemberTarget,
  member: Member,
  options: { skipSubresources: boolean },
): Promise<void> {
  const now = deps.clock.now();
  await deps.db.transaction().execute(async (tx) => {
    await lockHierarchy(tx, target);
    const current = await reloadMember(tx, member);
    const lastOwner = await isLastOwner(deps, target, current, tx);
    policy.authorizeMember('destroy_member', { member: current, lastOwner });
    const below =
      target.type === 'group' && !options.skipSubresources
        ? (await membershipsInHierarchy(tx, target.group.id, current.user_id)).filter((m) => m.id !== current.id)
        : [];
    for (const m of [current, ...below]) {
      const deleted = await tx.deleteFrom('members').where('id', '=', m.id).returning('id').executeTakeFirst();
      if (deleted && m.requested_at === null) await recordMemberEvent(tx, 'left', m, now);
    }
  });
}

/** The member's row with `override` set or cleared (LDAP override endpoints). */
export async function setOverride(
  deps: Deps,
  policy: MembershipPolicy,
  target: MemberTarget,
  member: Member,
  override: boolean,
): Promise<Member> {
  policy.authorizeMember('override_member', { member, lastOwner: await isLastOwner(deps, target, member) });
  if (member.override === override) return member;
  return updateMemberRow(deps.db, member.id, { override, updated_at: deps.clock.now() });
}

export { createMembership, recordMemberEvent };
