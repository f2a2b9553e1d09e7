import { pgErrorCode, UNIQUE_VIOLATION } from '../db/database.js';
import { groupAccessLevel, projectAccessLevel } from '../db/queries/access.js';
import { findAccessRequest, findMember, insertMember, updateMemberRow } from '../db/queries/members.js';
import type { Member, User } from '../db/schema.js';
import { forbidden, recordNotFound, validationError } from '../http/errors.js';
import { AccessLevel } from '../policies/access-levels.js';
import { type MembershipPolicy, requestAccessAllowed } from '../policies/members.js';
import { type Deps, today } from './deps.js';
import { Validation } from './errors.js';
import { isLdapSynced } from './ldap.js';
import { checkAccessLevel, type MemberTarget, recordMemberEvent, sourceRef } from './members.js';

/** The level an access request asks for, and the default of an approval. */
export const DEFAULT_REQUEST_LEVEL = AccessLevel.DEVELOPER;

/** The facts GitLab's `request_access` ability looks at, for the policy to decide. */
async function mayRequestAccess(deps: Deps, user: User, target: MemberTarget): Promise<boolean> {
  const day = today(deps);
  if (target.type === 'group') {
    return requestAccessAllowed({
      requestAccessEnabled: target.group.request_access_enabled,
      ldapSynced: await isLdapSynced(deps.db, target.group.id),
      membershipLevel: await groupAccessLevel(deps.db, user.id, target.group.traversal_ids, day),
    });
  }
  const traversal = target.namespace.kind === 'group' ? target.namespace.traversal_ids : [];
  return requestAccessAllowed({
    requestAccessEnabled: target.project.request_access_enabled,
    ldapSynced: false,
    membershipLevel: await projectAccessLevel(deps.db, user.id, target.project.id, traversal, day),
  });
}

/** POST /:source/:id/access_requests: a pending request at Developer level. */
export async function requestAccess(deps: Deps, user: User, target: MemberTarget): Promise<Member> {
  if (!(await mayRequestAccess(deps, user, target))) throw forbidden();
  const source = sourceRef(target);
  const now = deps.clock.now();
  const taken = () => validationError({ user_id: ['already exists in source'] });
  if (await findMember(deps.db, source.type, source.id, user.id)) throw taken();
  try {
    return await insertMember(deps.db, {
      source_type: source.type,
      source_id: source.id,
      user_id: user.id,
      access_level: DEFAULT_REQUEST_LEVEL,
      requested_at: now,
      created_at: now,
      updated_at: now,
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) throw taken();
    throw error;
  }
}

/** The pending request of a user, or 404 `Not found`. */
export async function findPendingRequest(deps: Deps, target: MemberTarget, userId: number): Promise<Member> {
  const request = await findAccessRequest(deps.db, sourceRef(target), userId);
  if (!request) throw recordNotFound();
  return request;
}

/** PUT .../access_requests/:user_id/approve: the requester becomes a member, with a `joined` event. */
export async function approveAccessRequest(
  deps: Deps,
  actor: User,
  policy: MembershipPolicy,
  target: MemberTarget,
  request: Member,
  accessLevel: number,
): Promise<Member> {
  policy.authorize('admin_access_requests');
  if (!policy.mayAssign(accessLevel)) throw forbidden();
  const v = new Validation();
  checkAccessLevel(v, target, accessLevel);
  v.throwIfAny();
  const now = deps.clock.now();
  return deps.db.transaction().execute(async (tx) => {
    const member = await updateMemberRow(tx, request.id, {
      requested_at: null,
      access_level: accessLevel,
      created_by_id: actor.id,
      updated_at: now,
    });
    await recordMemberEvent(tx, 'joined', member, now);
    return member;
  });
}

/** DELETE .../access_requests/:user_id: denied by an administrator of members, or withdrawn by the requester. */
export async function denyAccessRequest(
  deps: Deps,
  actor: User,
  policy: MembershipPolicy,
  request: Member,
): Promise<void> {
  if (request.user_id !== actor.id) policy.authorize('admin_access_requests');
  await deps.db.deleteFrom('members').where('id', '=', request.id).where('requested_at', 'is not', null).execute();
}
