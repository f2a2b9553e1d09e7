import type { Member, Namespace, Project, User } from '../db/schema.js';
import { forbidden } from '../http/errors.js';
import type { GroupPolicy, ProjectPolicy } from './abilities.js';
import { AccessLevel } from './access-levels.js';

/**
 * Who may do what with the memberships of one group or project, as GitLab's GroupPolicy,
 * ProjectPolicy, GroupMemberPolicy and ProjectMemberPolicy (CE and EE) decide it:
 * - groups: Owners administer members; in an LDAP-synchronised group nobody adds or removes
 *   members by hand, Owners may still change levels of overridden (or non-LDAP) members and
 *   set overrides; the last Owner can be neither demoted nor removed;
 * - projects: Maintainers administer members; the holder of a personal namespace stays;
 * - everyone may leave (remove their own membership), unless they are the last Owner;
 * - nobody but an administrator grants a level above their own.
 */
export type SourceMemberAbility =
  | 'read_member'
  | 'create_member'
  | 'read_access_requests'
  | 'admin_access_requests'
  | 'read_billable_member'
  | 'admin_billable_member'
  /** Set or clear LDAP overrides in the group (then per member: only LDAP members). */
  | 'override_members';

export type MemberAbility = 'update_member' | 'destroy_member' | 'override_member';

export interface MemberFacts {
  member: Member;
  /** The member is the group's last Owner (counting Owners of ancestor groups). */
  lastOwner: boolean;
}

export class MembershipPolicy {
  private constructor(
    readonly sourceType: 'group' | 'project',
    readonly user: User | null,
    /** The caller's effective level on the source (AccessLevel.ADMIN for administrators). */
    readonly level: number,
    private readonly canRead: boolean,
    /** GitLab's admin_group_member / admin_project_member before LDAP rules. */
    private readonly canAdmin: boolean,
    readonly ldapSynced: boolean,
    private readonly topLevel: boolean,
    /** The user whose personal namespace holds the project, if any. */
    private readonly namespaceHolderId: number | null,
  ) {}

  static forGroup(policy: GroupPolicy, group: Namespace, ldapSynced: boolean): MembershipPolicy {
    return new MembershipPolicy(
      'group',
      policy.user,
      policy.level,
      policy.can('read_member'),
      policy.can('admin_member'),
      ldapSynced,
      group.parent_id === null,
      null,
    );
  }

  static forProject(policy: ProjectPolicy, _project: Project, namespace: Namespace): MembershipPolicy {
    return new MembershipPolicy(
      'project',
      policy.user,
      policy.level,
      policy.can('read_member'),
      policy.can('admin_member'),
      false,
      false,
      namespace.kind === 'user' ? namespace.owner_id : null,
    );
  }

  get isAdmin(): boolean {
    return this.user?.admin === true;
  }

  /** Owners of the group, or administrators (LDAP override and update in synchronised groups). */
  private get ownerOrAdmin(): boolean {
    return this.level >= AccessLevel.OWNER;
  }

  can(ability: SourceMemberAbility): boolean {
    switch (ability) {
      case 'read_member':
        return this.canRead;
      case 'create_member':
      case 'read_access_requests':
      case 'admin_access_requests':
        return this.canAdmin && !this.ldapSynced;
      // Billable members exist for top-level groups only.
      case 'read_billable_member':
        return this.topLevel && this.ownerOrAdmin;
      case 'admin_billable_member':
        return this.topLevel && this.canAdmin && !this.ldapSynced;
      case 'override_members':
        return this.sourceType === 'group' && this.ldapSynced && this.ownerOrAdmin;
    }
  }

  /** Throws 403 unless allowed. */
  authorize(ability: SourceMemberAbility): void {
    if (!this.can(ability)) throw forbidden();
  }

  canMember(ability: MemberAbility, facts: MemberFacts): boolean {
    const { member, lastOwner } = facts;
    const self = this.user !== null && member.user_id === this.user.id;
    if (this.user === null) return false;
    if (this.sourceType === 'group') {
      switch (ability) {
        case 'update_member': {
          if (lastOwner) return false;
          if (this.ldapSynced) return this.ownerOrAdmin && !(member.ldap && !member.override);
          return this.canAdmin;
        }
        case 'destroy_member':
          if (lastOwner) return false;
          return self || (this.canAdmin && !this.ldapSynced);
        case 'override_member':
          return this.ldapSynced && this.ownerOrAdmin && member.ldap;
      }
    }
    const holder = this.namespaceHolderId !== null && member.user_id === this.namespaceHolderId;
    // Only those who may manage Owners (Owners, administrators) touch an Owner membership.
    const ownerGuard = member.access_level >= AccessLevel.OWNER && this.level < AccessLevel.OWNER;
    switch (ability) {
      case 'update_member':
        return !holder && !ownerGuard && this.canAdmin;
      case 'destroy_member':
        return !holder && (self || (this.canAdmin && !ownerGuard));
      case 'override_member':
        return false;
    }
  }

  authorizeMember(ability: MemberAbility, facts: MemberFacts): void {
    if (!this.canMember(ability, facts)) throw forbidden();
  }

  /** May the caller hand out `accessLevel`? Nobody but an administrator grants above their own level. */
  mayAssign(accessLevel: number): boolean {
    return this.isAdmin || accessLevel <= this.level;
  }
}

/**
 * GitLab's `request_access` ability: the source accepts requests, it is not LDAP-synchronised,
 * and the user has no access to it yet (inherited memberships count; a pending request does not).
 */
export function requestAccessAllowed(facts: {
  requestAccessEnabled: boolean;
  ldapSynced: boolean;
  /** The user's level from memberships (not the administrator's override). */
  membershipLevel: number;
}): boolean {
  return facts.requestAccessEnabled && !facts.ldapSynced && facts.membershipLevel === AccessLevel.NO_ACCESS;
}
