import type { BillableMembershipType, Member, User } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';
import { ACCESS_LEVEL_NAMES } from '../policies/access-levels.js';
import { type PresentContext, presentUserBasic } from './user.js';

/** What the caller may see of a member, decided by the caller of the presenter. */
export interface MemberView {
  member: Member;
  user: User;
  createdBy: User | null;
  /** Administrators see every member's e-mail (GitLab EE's Member entity). */
  showPrivateEmail: boolean;
  /** The source is a group (LDAP members show their `override` flag). */
  groupSource: boolean;
  /** `show_seat_info=true`: whether the member takes a seat (is billable). */
  showSeatInfo?: boolean;
}

/** GitLab's Member entity (CE and EE): UserBasic, the membership, `override` for LDAP members of groups. */
export function presentMember(view: MemberView, pc: PresentContext) {
  const { member, user } = view;
  const email = view.showPrivateEmail ? user.email : user.public_email || null;
  return {
    ...presentUserBasic(user, pc),
    access_level: member.access_level,
    created_at: isoTime(member.created_at),
    ...(view.createdBy ? { created_by: presentUserBasic(view.createdBy, pc) } : {}),
    expires_at: member.expires_at,
    ...(email ? { email } : {}),
    ...(view.showSeatInfo ? { is_using_seat: user.state === 'active' && !user.bot } : {}),
    ...(view.groupSource && member.ldap ? { override: member.override } : {}),
    membership_state: 'active',
  };
}

/** GitLab's AccessRequester entity: UserBasic and when access was requested. */
export function presentAccessRequester(member: Member, user: User, pc: PresentContext) {
  return {
    ...presentUserBasic(user, pc),
    created_at: isoTime(member.created_at),
    requested_at: isoTime(member.requested_at),
  };
}

export interface BillableMemberView {
  user: User;
  membershipType: BillableMembershipType;
  lastOwner: boolean;
  showPrivateEmail: boolean;
}

/** GitLab EE's BillableMember entity. */
export function presentBillableMember(view: BillableMemberView, pc: PresentContext) {
  const { user } = view;
  return {
    ...presentUserBasic(user, pc),
    email: view.showPrivateEmail ? user.email : user.public_email || null,
    last_activity_on: user.last_activity_on,
    membership_type: view.membershipType,
    removable: true,
    created_at: isoTime(user.created_at),
    is_last_owner: view.lastOwner,
    last_login_at: isoTime(user.current_sign_in_at),
  };
}

export interface BillableMembershipView {
  member: Member;
  sourceFullName: string;
  /** The web page listing the source's members. */
  sourceMembersUrl: string;
}

/** GitLab EE's BillableMembership entity. */
export function presentBillableMembership(view: BillableMembershipView) {
  const { member } = view;
  return {
    id: member.id,
    source_id: member.source_id,
    source_full_name: view.sourceFullName,
    source_members_url: view.sourceMembersUrl,
    created_at: isoTime(member.created_at),
    expires_at: member.expires_at,
    access_level: {
      string_value: ACCESS_LEVEL_NAMES[member.access_level] ?? String(member.access_level),
      integer_value: member.access_level,
      custom_role: null,
    },
  };
}

/** Several members added at once: GitLab answers with the service's result hash. */
export function presentBulkAddResult(errors: string[]) {
  return errors.length === 0 ? { status: 'success' } : { message: toSentence(errors), status: 'error' };
}

/** Ruby's Array#to_sentence: `a`, `a and b`, `a, b, and c`. */
export function toSentence(items: string[]): string {
  if (items.length <= 1) return items[0] ?? '';
  if (items.length === 2) return `${items[0]} and ${items[1]}`;
  return `${items.slice(0, -1).join(', ')}, and ${items[items.length - 1]}`;
}
