import { type Expression, type SqlBool, sql } from 'kysely';
import type { Db } from '../database.js';

/** Who is asking, as the visibility queries need it. */
export interface Viewer {
  userId: number | null;
  admin: boolean;
  /** External users see internal projects and groups only where they are members. */
  external: boolean;
  /** `YYYY-MM-DD` today (UTC): memberships expiring on or before it grant nothing. */
  today: string;
}

/** A membership row that grants access now: not an access request, not expired. */
export const activeMembership = (today: string) =>
  sql<SqlBool>`m.requested_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > ${today}::date)`;

/**
 * The user's highest access level on a project: its own membership or a membership of the
 * project's group or any ancestor group. 0 when none.
 */
export async function projectAccessLevel(
  db: Db,
  userId: number,
  projectId: number,
  traversalIds: number[],
  today: string,
): Promise<number> {
  const { rows } = await sql<{ level: number | null }>`
    SELECT max(m.access_level) AS level FROM members m
    WHERE m.user_id = ${userId} AND ${activeMembership(today)}
      AND ((m.source_type = 'project' AND m.source_id = ${projectId})
        OR (m.source_type = 'group' AND m.source_id = ANY(${sql.val(traversalIds)}::int[])))`.execute(db);
  return rows[0]?.level ?? 0;
}

/**
 * Which of `userIds` are members of a project: Guest or above, directly or through the
 * project's group or an ancestor (GitLab's `team.max_member_access >= GUEST`).
 */
export async function projectMemberIds(
  db: Db,
  userIds: number[],
  projectId: number,
  traversalIds: number[],
  today: string,
): Promise<Set<number>> {
  if (userIds.length === 0) return new Set();
  const { rows } = await sql<{ user_id: number }>`
    SELECT DISTINCT m.user_id FROM members m
    WHERE m.user_id = ANY(${sql.val(userIds)}::int[]) AND ${activeMembership(today)} AND m.access_level >= 10
      AND ((m.source_type = 'project' AND m.source_id = ${projectId})
        OR (m.source_type = 'group' AND m.source_id = ANY(${sql.val(traversalIds)}::int[])))`.execute(db);
  return new Set(rows.map((r) => r.user_id));
}

/** The user's highest access level on a group, counting memberships of its ancestors. */
export async function groupAccessLevel(db: Db, userId: number, traversalIds: number[], today: string): Promise<number> {
  const { rows } = await sql<{ level: number | null }>`
    SELECT max(m.access_level) AS level FROM members m
    WHERE m.user_id = ${userId} AND ${activeMembership(today)}
      AND m.source_type = 'group' AND m.source_id = ANY(${sql.val(traversalIds)}::int[])`.execute(db);
  return rows[0]?.level ?? 0;
}

/** True when the user has any membership inside the group's subtree (groups or projects). */
export async function hasDescendantMembership(db: Db, userId: number, groupId: number, today: string) {
  const { rows } = await sql<{ found: boolean }>`
    SELECT EXISTS (
      SELECT 1 FROM members m JOIN namespaces d ON m.source_type = 'group' AND d.id = m.source_id
      WHERE m.user_id = ${userId} AND ${activeMembership(today)} AND ${groupId} = ANY(d.traversal_ids)
    ) OR EXISTS (
      SELECT 1 FROM members m JOIN projects pr ON m.source_type = 'project' AND pr.id = m.source_id
      JOIN namespaces d ON d.id = pr.namespace_id
      WHERE m.user_id = ${userId} AND ${activeMembership(today)} AND ${groupId} = ANY(d.traversal_ids)
    ) AS found`.execute(db);
  return rows[0]?.found ?? false;
}

/**
 * SQL condition: the viewer may see project `p` (joined with its namespace as `ns`).
 * Public always; internal for signed-in non-external users; otherwise a membership of Guest or
 * above on the project or an ancestor group. Administrators see everything.
 */
export function projectVisibleTo(viewer: Viewer): Expression<SqlBool> {
  if (viewer.admin) return sql<SqlBool>`TRUE`;
  if (viewer.userId === null) return sql<SqlBool>`p.visibility = 'public'`;
  const internal = viewer.external ? sql`FALSE` : sql`p.visibility = 'internal'`;
  return sql<SqlBool>`(p.visibility = 'public' OR ${internal} OR EXISTS (
    SELECT 1 FROM members m WHERE m.user_id = ${viewer.userId} AND ${activeMembership(viewer.today)}
      AND m.access_level >= 10
      AND ((m.source_type = 'project' AND m.source_id = p.id)
        OR (m.source_type = 'group' AND m.source_id = ANY(ns.traversal_ids)))))`;
}

/**
 * SQL condition: the viewer may see group `g`. Public always; internal for signed-in
 * non-external users; otherwise any membership in the group's path (ancestors included) or
 * anywhere below it.
 */
export function groupVisibleTo(viewer: Viewer): Expression<SqlBool> {
  if (viewer.admin) return sql<SqlBool>`TRUE`;
  if (viewer.userId === null) return sql<SqlBool>`g.visibility = 'public'`;
  const internal = viewer.external ? sql`FALSE` : sql`g.visibility = 'internal'`;
  const active = activeMembership(viewer.today);
  return sql<SqlBool>`(g.visibility = 'public' OR ${internal} OR EXISTS (
    SELECT 1 FROM members m JOIN namespaces d ON m.source_type = 'group' AND d.id = m.source_id
    WHERE m.user_id = ${viewer.userId} AND ${active}
      AND (d.id = ANY(g.traversal_ids) OR g.id = ANY(d.traversal_ids))
  ) OR EXISTS (
    SELECT 1 FROM members m JOIN projects pr ON m.source_type = 'project' AND pr.id = m.source_id
    JOIN namespaces d ON d.id = pr.namespace_id
    WHERE m.user_id = ${viewer.userId} AND ${active} AND g.id = ANY(d.traversal_ids)))`;
}

/** SQL: the viewer's access level on project `p` (namespace `ns`), for filters and ordering. */
export function projectLevelOf(userId: number, today: string): Expression<number> {
  return sql<number>`COALESCE((SELECT max(m.access_level) FROM members m
    WHERE m.user_id = ${userId} AND ${activeMembership(today)}
      AND ((m.source_type = 'project' AND m.source_id = p.id)
        OR (m.source_type = 'group' AND m.source_id = ANY(ns.traversal_ids)))), 0)`;
}

/** SQL: the viewer's access level on group `g`. */
export function groupLevelOf(userId: number, today: string): Expression<number> {
  return sql<number>`COALESCE((SELECT max(m.access_level) FROM members m
    WHERE m.user_id = ${userId} AND ${activeMembership(today)}
      AND m.source_type = 'group' AND m.source_id = ANY(g.traversal_ids)), 0)`;
}

/** Every active membership of a user: project id → level and group id → level. */
export async function activeMemberships(db: Db, userId: number, today: string) {
  const { rows } = await sql<{ source_type: string; source_id: number; access_level: number }>`
    SELECT m.source_type, m.source_id, m.access_level FROM members m
    WHERE m.user_id = ${userId} AND ${activeMembership(today)}`.execute(db);
  const projects = new Map<number, number>();
  const groups = new Map<number, number>();
  for (const row of rows) (row.source_type === 'project' ? projects : groups).set(row.source_id, row.access_level);
  return { projects, groups };
}
