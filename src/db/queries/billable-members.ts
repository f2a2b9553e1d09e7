import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../database.js';
import type { BillableMembershipType } from '../schema.js';
import { activeMembership } from './access.js';
import { fuzzySearch } from './namespaces.js';

/** GitLab EE's member_sort_options for billable members. */
export const BILLABLE_MEMBER_SORTS = [
  'access_level_asc',
  'access_level_desc',
  'last_joined',
  'name_asc',
  'name_desc',
  'oldest_joined',
  'oldest_sign_in',
  'recent_sign_in',
  'last_activity_on_asc',
  'last_activity_on_desc',
] as const;
export type BillableMemberSort = (typeof BILLABLE_MEMBER_SORTS)[number];

/** ORDER BY for each sort; ties fall back to the user id so pages never repeat a user. */
const ORDERS: Record<BillableMemberSort | 'id_asc', RawBuilder<unknown>> = {
  id_asc: sql`u.id ASC`,
  access_level_asc: sql`b.access_level ASC, u.id ASC`,
  access_level_desc: sql`b.access_level DESC, u.id ASC`,
  last_joined: sql`b.joined_at DESC, u.id ASC`,
  oldest_joined: sql`b.joined_at ASC, u.id ASC`,
  name_asc: sql`lower(u.name) ASC, u.id ASC`,
  name_desc: sql`lower(u.name) DESC, u.id DESC`,
  recent_sign_in: sql`u.current_sign_in_at DESC NULLS LAST, u.id ASC`,
  oldest_sign_in: sql`u.current_sign_in_at ASC NULLS LAST, u.id ASC`,
  last_activity_on_desc: sql`u.last_activity_on DESC NULLS LAST, u.id ASC`,
  last_activity_on_asc: sql`u.last_activity_on ASC NULLS FIRST, u.id DESC`,
};

/**
 * Rebuilds the snapshot of a top-level group's billable users: active, human users with an
 * active membership of the group, a subgroup or a project below it. Runs in the caller's
 * transaction; returns how many users it holds.
 */
export async function rebuildBillableMembers(db: Db, groupId: number, today: string, at: Date): Promise<number> {
  await db.deleteFrom('billable_members').where('group_id', '=', groupId).execute();
  const { rows } = await sql<{ n: number }>`
    WITH memberships AS (
      SELECT m.user_id, m.source_type, m.access_level, m.created_at FROM members m
      JOIN users u ON u.id = m.user_id
      WHERE ${activeMembership(today)} AND u.state = 'active' AND u.bot = FALSE
        AND ((m.source_type = 'group' AND m.source_id IN (SELECT id FROM namespaces WHERE ${groupId} = ANY(traversal_ids)))
          OR (m.source_type = 'project' AND m.source_id IN (SELECT p.id FROM projects p
            JOIN namespaces n ON n.id = p.namespace_id WHERE ${groupId} = ANY(n.traversal_ids))))
    ), inserted AS (
      INSERT INTO billable_members (group_id, user_id, membership_type, access_level, joined_at)
      SELECT ${groupId}, user_id,
        CASE WHEN bool_or(source_type = 'group') THEN 'group_member' ELSE 'project_member' END,
        max(access_level), min(created_at)
      FROM memberships GROUP BY user_id
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM inserted`.execute(db);
  await db
    .insertInto('billable_member_refreshes')
    .values({ group_id: groupId, refreshed_at: at })
    .onConflict((oc) => oc.column('group_id').doUpdateSet({ refreshed_at: at }))
    .execute();
  return Number(rows[0]?.n ?? 0);
}

/** When the group's snapshot was last rebuilt, or null if never. */
export async function billableRefreshedAt(db: Db, groupId: number): Promise<Date | null> {
  const row = await db
    .selectFrom('billable_member_refreshes')
    .select('refreshed_at')
    .where('group_id', '=', groupId)
    .executeTakeFirst();
  return row?.refreshed_at ?? null;
}

/** Ids of every top-level group. */
export async function topLevelGroupIds(db: Db): Promise<number[]> {
  const rows = await db
    .selectFrom('namespaces')
    .select('id')
    .where('kind', '=', 'group')
    .where('parent_id', 'is', null)
    .orderBy('id')
    .execute();
  return rows.map((r) => r.id);
}

export interface BillableFilter {
  search?: string;
  sort?: BillableMemberSort;
}

function billableWhere(groupId: number, f: BillableFilter) {
  const search = f.search ? fuzzySearch([sql<string>`u.name`, sql<string>`u.username`], f.search) : null;
  // GitLab's User.search also matches the public e-mail exactly.
  const byEmail = f.search ? sql`lower(u.public_email) = ${f.search.trim().toLowerCase()}` : null;
  const searchCondition = search && byEmail ? sql`(${search} OR ${byEmail})` : (search ?? sql`TRUE`);
  return sql`b.group_id = ${groupId} AND ${searchCondition}`;
}

export interface BillableRow {
  user_id: number;
  membership_type: BillableMembershipType;
}

/** One page of the snapshot. */
export async function listBillableMembers(
  db: Db,
  groupId: number,
  f: BillableFilter,
  window: { limit: number; offset: number },
): Promise<BillableRow[]> {
  const order = ORDERS[f.sort ?? 'id_asc'];
  const { rows } = await sql<BillableRow>`
    SELECT b.user_id, b.membership_type FROM billable_members b JOIN users u ON u.id = b.user_id
    WHERE ${billableWhere(groupId, f)} ORDER BY ${order} LIMIT ${window.limit} OFFSET ${window.offset}`.execute(db);
  return rows;
}

export async function countBillableMembers(db: Db, groupId: number, f: BillableFilter, cap: number) {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM (SELECT 1 FROM billable_members b JOIN users u ON u.id = b.user_id
    WHERE ${billableWhere(groupId, f)} LIMIT ${cap}) t`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

export async function removeFromBillableSnapshot(db: Db, groupId: number, userId: number): Promise<void> {
  await db.deleteFrom('billable_members').where('group_id', '=', groupId).where('user_id', '=', userId).execute();
}
