import { type Insertable, type SqlBool, sql, type Updateable } from 'kysely';
import type { Db } from '../database.js';
import type { Member, MemberSource, MembersTable } from '../schema.js';
import { activeMembership } from './access.js';

export function insertMember(db: Db, values: Insertable<MembersTable>): Promise<Member> {
  return db.insertInto('members').values(values).returningAll().executeTakeFirstOrThrow();
}

export function findMember(db: Db, sourceType: MemberSource, sourceId: number, userId: number) {
  return db
    .selectFrom('members')
    .selectAll()
    .where('source_type', '=', sourceType)
    .where('source_id', '=', sourceId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
}

export async function deleteMembersOfSources(db: Db, sourceType: MemberSource, sourceIds: number[]) {
  if (sourceIds.length === 0) return;
  await db.deleteFrom('members').where('source_type', '=', sourceType).where('source_id', 'in', sourceIds).execute();
}

/** Ids of the users with an active direct membership of a group or project (no inherited ones). */
export async function directMemberUserIds(
  db: Db,
  sourceType: MemberSource,
  sourceId: number,
  today: string,
): Promise<number[]> {
  const { rows } = await sql<{ user_id: number }>`
    SELECT m.user_id FROM members m
    WHERE m.source_type = ${sourceType} AND m.source_id = ${sourceId} AND ${activeMembership(today)}`.execute(db);
  return rows.map((r) => r.user_id);
}

/** A membership's source: a group (namespace id) or a project. */
export interface MemberSourceRef {
  type: MemberSource;
  id: number;
}

/** Where a member list looks: one source's own rows, or every row that grants access to it. */
export type MemberScope =
  | { kind: 'direct'; source: MemberSourceRef }
  /** Inherited too: the project's own rows (if any) and those of the groups in `groupIds`. */
  | { kind: 'all'; projectId: number | null; groupIds: number[] };

export interface MemberListFilter {
  today: string;
  /** GitLab's User.search without the minimum length: name, username or public e-mail. */
  query?: string;
  userIds?: number[];
  skipUserIds?: number[];
  /** Match nobody (a filter no member can pass). */
  nobody?: boolean;
}

const escapeLike = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/** The largest value of an int4 id column: larger ids name no row. */
const MAX_ID = 2147483647;
const validIds = (ids: number[]) => ids.filter((id) => Number.isInteger(id) && id >= 1 && id <= MAX_ID);

/** Rows of the scope that grant access now, one per user for `all` (the highest level wins). */
function scopeRows(scope: MemberScope, today: string) {
  const active = activeMembership(today);
  if (scope.kind === 'direct') {
    return sql`SELECT m.* FROM members m
      WHERE m.source_type = ${scope.source.type} AND m.source_id = ${scope.source.id} AND ${active}`;
  }
  const project =
    scope.projectId === null ? sql`FALSE` : sql`(m.source_type = 'project' AND m.source_id = ${scope.projectId})`;
  const groupIds = sql`${sql.val(scope.groupIds)}::int[]`;
  const linkActive = (alias: string) =>
    sql`(${sql.ref(`${alias}.expires_at`)} IS NULL OR ${sql.ref(`${alias}.expires_at`)} > ${today}::date)`;
  // Members of invited groups (and of their ancestors), at the lower of their level and the link's.
  const capped = (cap: ReturnType<typeof sql>) => sql`m.id, m.source_type, m.source_id, m.user_id,
    LEAST(m.access_level, ${cap}) AS access_level, m.expires_at, m.created_by_id, m.requested_at,
    m.invite_source, m.ldap, m.override, m.created_at, m.updated_at`;
  const projectLinks =
    scope.projectId === null
      ? sql``
      : sql`UNION ALL SELECT ${capped(sql`pl.group_access`)} FROM project_group_links pl
          JOIN namespaces sg ON sg.id = pl.group_id
          JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
          WHERE pl.project_id = ${scope.projectId} AND ${linkActive('pl')} AND ${active}`;
  // Highest level first; among equal levels the longest-lasting, then the oldest membership.
  return sql`SELECT DISTINCT ON (a.user_id) a.* FROM (
      SELECT m.* FROM members m
      WHERE ${active} AND (${project} OR (m.source_type = 'group' AND m.source_id = ANY(${groupIds})))
      ${projectLinks}
      UNION ALL SELECT ${capped(sql`gl.group_access`)} FROM group_group_links gl
        JOIN namespaces sg ON sg.id = gl.shared_with_group_id
        JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
        WHERE gl.shared_group_id = ANY(${groupIds}) AND ${linkActive('gl')} AND ${active}) a
    ORDER BY a.user_id, a.access_level DESC, a.expires_at DESC NULLS FIRST, a.created_at, a.id`;
}

function memberConditions(f: MemberListFilter) {
  const conditions = [f.nobody ? sql`FALSE` : sql`TRUE`];
  const query = f.query?.replace(/^@/, '');
  if (f.query !== undefined && f.query !== '') {
    const q = (query ?? '').trim().replace(/\s+/g, ' ');
    if (q === '' || q.includes('\0')) conditions.push(sql`FALSE`);
    else {
      const words = q.split(' ').map((w) => `%${escapeLike(w)}%`);
      const all = (column: ReturnType<typeof sql>) =>
        sql.join(
          words.map((w) => sql`${column} ILIKE ${w}`),
          sql` AND `,
        );
      conditions.push(
        sql`((${all(sql`u.name`)}) OR (${all(sql`u.username`)}) OR lower(u.public_email) = ${q.toLowerCase()})`,
      );
    }
  }
  if (f.userIds !== undefined && f.userIds.length > 0) {
    conditions.push(sql`c.user_id = ANY(${sql.val(validIds(f.userIds))}::int[])`);
  }
  if (f.skipUserIds !== undefined && f.skipUserIds.length > 0) {
    conditions.push(sql`NOT (c.user_id = ANY(${sql.val(validIds(f.skipUserIds))}::int[]))`);
  }
  return sql.join(conditions, sql` AND `);
}

/**
 * One page of members (rows of `members`), ordered by membership id; with a `query`, by how
 * closely the user matches first (public e-mail, username, name), then by name, as GitLab does.
 */
export async function listMembers(
  db: Db,
  scope: MemberScope,
  f: MemberListFilter,
  window: { limit: number; offset: number },
): Promise<Member[]> {
  const q = f.query?.replace(/^@/, '').trim().toLowerCase() ?? '';
  const order =
    f.query !== undefined && f.query !== ''
      ? sql`CASE WHEN lower(u.public_email) = ${q} THEN 0 WHEN lower(u.username) = ${q} THEN 1
          WHEN lower(u.name) = ${q} THEN 2 ELSE 3 END, u.name, c.id`
      : sql`c.id`;
  const { rows } = await sql<Member>`
    SELECT c.* FROM (${scopeRows(scope, f.today)}) c JOIN users u ON u.id = c.user_id
    WHERE ${memberConditions(f)} ORDER BY ${order} LIMIT ${window.limit} OFFSET ${window.offset}`.execute(db);
  return rows;
}

/** How many members `listMembers` would list, counting up to `cap`. */
export async function countMembers(db: Db, scope: MemberScope, f: MemberListFilter, cap: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM (SELECT 1 FROM (${scopeRows(scope, f.today)}) c JOIN users u ON u.id = c.user_id
    WHERE ${memberConditions(f)} LIMIT ${cap}) t`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** The member of the scope for one user (the highest-level row for `all`), if active. */
export async function findScopeMember(
  db: Db,
  scope: MemberScope,
  userId: number,
  today: string,
): Promise<Member | undefined> {
  if (validIds([userId]).length === 0) return undefined;
  const { rows } = await sql<Member>`
    SELECT c.* FROM (${scopeRows(scope, today)}) c WHERE c.user_id = ${userId}`.execute(db);
  return rows[0];
}

/** A pending access request of a user for a source. */
export function findAccessRequest(db: Db, source: MemberSourceRef, userId: number) {
  if (validIds([userId]).length === 0) return Promise.resolve(undefined);
  return db
    .selectFrom('members')
    .selectAll()
    .where('source_type', '=', source.type)
    .where('source_id', '=', source.id)
    .where('user_id', '=', userId)
    .where('requested_at', 'is not', null)
    .executeTakeFirst();
}

/** Pending access requests of a source, oldest first. */
export function listAccessRequests(db: Db, source: MemberSourceRef, window: { limit: number; offset: number }) {
  return db
    .selectFrom('members')
    .selectAll()
    .where('source_type', '=', source.type)
    .where('source_id', '=', source.id)
    .where('requested_at', 'is not', null)
    .orderBy('id')
    .limit(window.limit)
    .offset(window.offset)
    .execute();
}

export async function countAccessRequests(db: Db, source: MemberSourceRef): Promise<number> {
  const row = await db
    .selectFrom('members')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('source_type', '=', source.type)
    .where('source_id', '=', source.id)
    .where('requested_at', 'is not', null)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * The users of the active Owner memberships of the group and its ancestors, one entry per
 * membership (GitLab's `member_owners_excluding_project_bots`): a group keeps at least one.
 */
export async function groupOwnerIds(db: Db, traversalIds: number[], today: string): Promise<number[]> {
  const { rows } = await sql<{ user_id: number }>`
    SELECT m.user_id FROM members m JOIN users u ON u.id = m.user_id
    WHERE m.source_type = 'group' AND m.source_id = ANY(${sql.val(traversalIds)}::int[])
      AND m.access_level = 50 AND u.bot = FALSE AND ${activeMembership(today)}`.execute(db);
  return rows.map((r) => r.user_id);
}

/** Every membership row (requests included) of a user in a group's subtree: its groups and their projects. */
export async function membershipsInHierarchy(db: Db, groupId: number, userId: number): Promise<Member[]> {
  if (validIds([userId]).length === 0) return [];
  const { rows } = await sql<Member>`
    SELECT m.* FROM members m
    WHERE m.user_id = ${userId} AND (
      (m.source_type = 'group' AND m.source_id IN (SELECT id FROM namespaces WHERE ${groupId} = ANY(traversal_ids)))
      OR (m.source_type = 'project' AND m.source_id IN (SELECT p.id FROM projects p JOIN namespaces n
        ON n.id = p.namespace_id WHERE ${groupId} = ANY(n.traversal_ids))))
    ORDER BY m.id`.execute(db);
  return rows;
}

export function updateMemberRow(db: Db, id: number, changes: Updateable<MembersTable>): Promise<Member> {
  return db.updateTable('members').set(changes).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export async function deleteMemberRow(db: Db, id: number): Promise<void> {
  await db.deleteFrom('members').where('id', '=', id).execute();
}

/** Memberships (not requests) whose expiry date has come: `expires_at` on or before `today`. */
export function expiredMembers(db: Db, today: string, afterId: number, limit: number): Promise<Member[]> {
  return db
    .selectFrom('members')
    .selectAll()
    .where('id', '>', afterId)
    .where('expires_at', 'is not', null)
    .where(sql<SqlBool>`expires_at <= ${today}::date`)
    .where('requested_at', 'is', null)
    .orderBy('id')
    .limit(limit)
    .execute();
}
