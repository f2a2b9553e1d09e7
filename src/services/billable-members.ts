import { sql } from 'kysely';
import {
  billableRefreshedAt,
  rebuildBillableMembers,
  removeFromBillableSnapshot,
  topLevelGroupIds,
} from '../db/queries/billable-members.js';
import { groupOwnerIds, membershipsInHierarchy } from '../db/queries/members.js';
import { findNamespacesByIds } from '../db/queries/namespaces.js';
import type { Member, Namespace, User } from '../db/schema.js';
import { badRequest, forbidden, notFound } from '../http/errors.js';
import { utcDate } from '../lib/clock.js';
import type { MembershipPolicy } from '../policies/members.js';
import { type Deps, today } from './deps.js';
import { isLastOwner, recordMemberEvent } from './members.js';

/** The spec's daily refresh of billable members: 12:00 UTC. */
export const BILLABLE_REFRESH_HOUR_UTC = 12;

/** Rebuilds one top-level group's billable-member snapshot now. */
export async function refreshBillableMembers(deps: Deps, groupId: number): Promise<number> {
  const now = deps.clock.now();
  return deps.db.transaction().execute((tx) => rebuildBillableMembers(tx, groupId, utcDate(now), now));
}

/** The daily job: every top-level group's snapshot. Returns how many groups it refreshed. */
export async function refreshAllBillableMembers(deps: Deps): Promise<number> {
  const ids = await topLevelGroupIds(deps.db);
  for (const id of ids) await refreshBillableMembers(deps, id);
  return ids.length;
}

/**
 * When the group's list was last refreshed. A group that has never been refreshed (created since
 * the last daily run) gets its first snapshot now, so its list is never empty by accident.
 */
export async function ensureBillableSnapshot(deps: Deps, group: Namespace): Promise<Date> {
  const at = await billableRefreshedAt(deps.db, group.id);
  if (at) return at;
  await refreshBillableMembers(deps, group.id);
  return (await billableRefreshedAt(deps.db, group.id)) ?? deps.clock.now();
}

/** GitLab answers a subgroup or a caller without the ability with a bare 400. */
export function checkBillableAccess(group: Namespace, policy: MembershipPolicy, ability: 'read' | 'admin'): void {
  if (group.parent_id !== null) throw badRequest();
  if (!policy.can(ability === 'read' ? 'read_billable_member' : 'admin_billable_member')) throw badRequest();
}

/** Owners of the top-level group (for `is_last_owner`). */
export function rootOwnerIds(deps: Deps, group: Namespace): Promise<number[]> {
  return groupOwnerIds(deps.db, group.traversal_ids, today(deps));
}

/** A billable user's active direct memberships in the hierarchy, with their sources. */
export async function billableMemberships(deps: Deps, group: Namespace, user: User) {
  const day = today(deps);
  const rows = (await membershipsInHierarchy(deps.db, group.id, user.id)).filter(
    (m) => m.requested_at === null && (m.expires_at === null || m.expires_at > day),
  );
  if (rows.length === 0 || user.state !== 'active' || user.bot) throw notFound('User');
  const groupIds = rows.filter((m) => m.source_type === 'group').map((m) => m.source_id);
  const projectIds = rows.filter((m) => m.source_type === 'project').map((m) => m.source_id);
  const groups = new Map((await findNamespacesByIds(deps.db, groupIds)).map((g) => [g.id, g]));
  const projects =
    projectIds.length === 0
      ? []
      : await deps.db.selectFrom('projects').selectAll().where('id', 'in', projectIds).execute();
  const projectNamespaces = new Map(
    (
      await findNamespacesByIds(
        deps.db,
        projects.map((p) => p.namespace_id),
      )
    ).map((n) => [n.id, n]),
  );
  const allGroupIds = new Set<number>();
  for (const g of groups.values()) for (const id of g.traversal_ids) allGroupIds.add(id);
  for (const n of projectNamespaces.values()) for (const id of n.traversal_ids) allGroupIds.add(id);
  const names = new Map((await findNamespacesByIds(deps.db, [...allGroupIds])).map((g) => [g.id, g.name]));
  const fullName = (ns: Namespace) => ns.traversal_ids.map((id) => names.get(id) ?? '').join(' / ');
  const projectsById = new Map(projects.map((p) => [p.id, p]));
  return rows.map((member) => {
    if (member.source_type === 'group') {
      const g = groups.get(member.source_id) as Namespace;
      return {
        member,
        sourceFullName: fullName(g),
        sourceMembersUrl: `${deps.config.baseUrl}/groups/${g.full_path}/-/group_members`,
      };
    }
    const p = projectsById.get(member.source_id);
    const ns = p ? projectNamespaces.get(p.namespace_id) : undefined;
    return {
      member,
      sourceFullName: p && ns ? `${fullName(ns)} / ${p.name}` : '',
      sourceMembersUrl: p ? `${deps.config.baseUrl}/${p.full_path}/-/project_members` : '',
    };
  });
}

/**
 * DELETE /groups/:id/billable_members/:user_id: removes every membership of the user in the
 * group, its subgroups and projects at once, with `left` events, and drops them from the list.
 * The last Owner of the group stays (403).
 */
export async function removeBillableMember(deps: Deps, group: Namespace, policy: MembershipPolicy, userId: number) {
  if (group.parent_id !== null) throw badRequest('Must be a root namespace');
  if (!policy.can('admin_billable_member')) throw badRequest('User not authorized');
  const now = deps.clock.now();
  await deps.db.transaction().execute(async (tx) => {
    // The same lock as member changes take: the last-Owner check must hold until the commit.
    await sql`SELECT id FROM namespaces WHERE id = ${group.id} FOR UPDATE`.execute(tx);
    const memberships = await membershipsInHierarchy(tx, group.id, userId);
    if (memberships.length === 0) throw badRequest('No member found for the given user_id');
    for (const m of memberships) {
      if (m.source_type !== 'group') continue;
      const source = (await findNamespacesByIds(tx, [m.source_id]))[0];
      if (source && (await isLastOwner(deps, { type: 'group', group: source }, m, tx))) throw forbidden();
    }
    for (const m of memberships as Member[]) {
      await tx.deleteFrom('members').where('id', '=', m.id).execute();
      if (m.requested_at === null) await recordMemberEvent(tx, 'left', m, now);
    }
    await removeFromBillableSnapshot(tx, group.id, userId);
  });
}
