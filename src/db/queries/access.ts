import { type Expression, type RawBuilder, type SqlBool, sql } from 'kysely';
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

/** A group link that grants access now: `expires_at` not yet come. */
const activeLink = (alias: string, today: string) =>
  sql<SqlBool>`(${sql.ref(`${alias}.expires_at`)} IS NULL OR ${sql.ref(`${alias}.expires_at`)} > ${today}::date)`;

/**
 * SQL rows (`user_id`, `lvl`): the levels the users matched by `who` (a condition on `m.user_id`)
 * hold on the groups whose traversal ids are `traversal`: their memberships of those groups, and
 * for each of those groups shared with another group, their membership of that group or its
 * ancestors, capped at the link's `group_access`.
 */
function groupLevelRows(who: RawBuilder<SqlBool>, today: string, traversal: RawBuilder<number[]>) {
  const active = activeMembership(today);
  return sql`SELECT m.user_id, m.access_level AS lvl FROM members m
      WHERE ${who} AND ${active} AND m.source_type = 'group' AND m.source_id = ANY(${traversal})
    UNION ALL
    SELECT m.user_id, LEAST(m.access_level, gl.group_access) AS lvl FROM group_group_links gl
      JOIN namespaces sg ON sg.id = gl.shared_with_group_id
      JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
      WHERE gl.shared_group_id = ANY(${traversal}) AND ${activeLink('gl', today)} AND ${who} AND ${active}`;
}

/**
 * SQL rows (`user_id`, `lvl`): the levels users hold on project `projectId` in the namespaces
 * `traversal`: direct and group memberships, the project's links to groups (members of the
 * invited group and its ancestors, capped at `group_access`) and its groups' links.
 */
function projectLevelRows(
  who: RawBuilder<SqlBool>,
  today: string,
  projectId: RawBuilder<number>,
  traversal: RawBuilder<number[]>,
) {
  const active = activeMembership(today);
  return sql`SELECT m.user_id, m.access_level AS lvl FROM members m
      WHERE ${who} AND ${active} AND m.source_type = 'project' AND m.source_id = ${projectId}
    UNION ALL
    SELECT m.user_id, LEAST(m.access_level, pl.group_access) AS lvl FROM project_group_links pl
      JOIN namespaces sg ON sg.id = pl.group_id
      JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
      WHERE pl.project_id = ${projectId} AND ${activeLink('pl', today)} AND ${who} AND ${active}
    UNION ALL
    ${groupLevelRows(who, today, traversal)}`;
}

const isUser = (userId: number) => sql<SqlBool>`m.user_id = ${userId}`;
const idsArray = (ids: number[]) => sql<number[]>`${sql.val(ids)}::int[]`;

/**
 * The user's highest access level on a project: its own membership, a membership of the
 * project's group or any ancestor group, or one through a group the project or an ancestor
 * group is shared with (capped by the link). 0 when none.
 */
export async function projectAccessLevel(
  db: Db,
  userId: number,
  projectId: number,
  traversalIds: number[],
  today: string,
): Promise<number> {
  const { rows } = await sql<{ level: number | null }>`
    SELECT max(t.lvl) AS level FROM (${projectLevelRows(isUser(userId), today, sql`${projectId}::int`, idsArray(traversalIds))}) t`.execute(
    db,
  );
  return rows[0]?.level ?? 0;
}

/**
 * Which of `userIds` are members of a project: Guest or above, directly, through the
 * project's group or an ancestor, or through sharing (GitLab's `team.max_member_access >= GUEST`).
 */
export async function projectMemberIds(
  db: Db,
  userIds: number[],
  projectId: number,
  traversalIds: number[],
  today: string,
): Promise<Set<number>> {
  if (userIds.length === 0) return new Set();
  const who = sql<SqlBool>`m.user_id = ANY(${sql.val(userIds)}::int[])`;
  const { rows } = await sql<{ user_id: number }>`
    SELECT DISTINCT t.user_id FROM (${projectLevelRows(who, today, sql`${projectId}::int`, idsArray(traversalIds))}) t
    WHERE t.lvl >= 10`.execute(db);
  return new Set(rows.map((r) => r.user_id));
}

/**
 * The user's highest access level on a group, counting memberships of its ancestors and the
 * groups it or an ancestor is shared with (capped by the link).
 */
export async function groupAccessLevel(db: Db, userId: number, traversalIds: number[], today: string): Promise<number> {
  const { rows } = await sql<{ level: number | null }>`
    SELECT max(t.lvl) AS level FROM (${groupLevelRows(isUser(userId), today, idsArray(traversalIds))}) t`.execute(db);
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
    ) OR EXISTS (${sharedBelowRows(userId, today, sql`${groupId}::int`)}) AS found`.execute(db);
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
  const rows = projectLevelRows(isUser(viewer.userId), viewer.today, sql`p.id`, sql`ns.traversal_ids`);
  return sql<SqlBool>`(p.visibility = 'public' OR ${internal} OR EXISTS (
    SELECT 1 FROM (${rows}) t WHERE t.lvl >= 10))`;
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
    WHERE m.user_id = ${viewer.userId} AND ${active} AND g.id = ANY(d.traversal_ids)
  ) OR EXISTS (${sharedGroupRows(viewer.userId, viewer.today)})
  OR EXISTS (${sharedBelowRows(viewer.userId, viewer.today, sql`g.id`)}))`;
}

/**
 * SQL rows: group `g` is, or is below, a group shared with a group the user is a member of
 * (or a member of one of its ancestors).
 */
function sharedGroupRows(userId: number, today: string) {
  return sql`SELECT 1 FROM group_group_links gl JOIN namespaces sg ON sg.id = gl.shared_with_group_id
    JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
    WHERE gl.shared_group_id = ANY(g.traversal_ids) AND ${activeLink('gl', today)}
      AND m.user_id = ${userId} AND ${activeMembership(today)}`;
}

/**
 * SQL rows: something inside group `groupId` (a subgroup, or a project of it or of a subgroup) is
 * shared with a group the user is a member of (or a member of one of its ancestors). Such a
 * user sees the group, as a member of something inside it does.
 */
export function sharedBelowRows(userId: number, today: string, groupId: RawBuilder<number>) {
  const active = activeMembership(today);
  return sql`SELECT 1 FROM group_group_links gl JOIN namespaces d ON d.id = gl.shared_group_id
      JOIN namespaces sg ON sg.id = gl.shared_with_group_id
      JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
      WHERE ${groupId} = ANY(d.traversal_ids) AND ${activeLink('gl', today)} AND m.user_id = ${userId} AND ${active}
    UNION ALL
    SELECT 1 FROM project_group_links pl JOIN projects pr ON pr.id = pl.project_id
      JOIN namespaces d ON d.id = pr.namespace_id
      JOIN namespaces sg ON sg.id = pl.group_id
      JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
      WHERE ${groupId} = ANY(d.traversal_ids) AND ${activeLink('pl', today)} AND m.user_id = ${userId} AND ${active}`;
}

/** SQL: the viewer's access level on project `p` (namespace `ns`), for filters and ordering. */
export function projectLevelOf(userId: number, today: string): Expression<number> {
  const rows = projectLevelRows(isUser(userId), today, sql`p.id`, sql`ns.traversal_ids`);
  return sql<number>`COALESCE((SELECT max(t.lvl) FROM (${rows}) t), 0)`;
}

/** SQL: the viewer's access level on group `g`. */
export function groupLevelOf(userId: number, today: string): Expression<number> {
  return sql<number>`COALESCE((SELECT max(t.lvl) FROM (${groupLevelRows(isUser(userId), today, sql`g.traversal_ids`)}) t), 0)`;
}

/**
 * Every active membership of a user: project id → level and group id → level; and the levels
 * sharing gives: project id → level through the project's group links, group id → level
 * through the group's links (to be applied to the group and everything below it).
 */
export async function activeMemberships(db: Db, userId: number, today: string) {
  const { rows } = await sql<{ source_type: string; source_id: number; access_level: number }>`
    SELECT m.source_type, m.source_id, m.access_level FROM members m
    WHERE m.user_id = ${userId} AND ${activeMembership(today)}`.execute(db);
  const projects = new Map<number, number>();
  const groups = new Map<number, number>();
  for (const row of rows) (row.source_type === 'project' ? projects : groups).set(row.source_id, row.access_level);
  const active = activeMembership(today);
  const { rows: shared } = await sql<{ kind: string; id: number; level: number }>`
    SELECT 'project' AS kind, pl.project_id AS id, max(LEAST(m.access_level, pl.group_access)) AS level
      FROM project_group_links pl JOIN namespaces sg ON sg.id = pl.group_id
      JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
      WHERE m.user_id = ${userId} AND ${active} AND ${activeLink('pl', today)} GROUP BY pl.project_id
    UNION ALL
    SELECT 'group' AS kind, gl.shared_group_id AS id, max(LEAST(m.access_level, gl.group_access)) AS level
      FROM group_group_links gl JOIN namespaces sg ON sg.id = gl.shared_with_group_id
      JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
      WHERE m.user_id = ${userId} AND ${active} AND ${activeLink('gl', today)} GROUP BY gl.shared_group_id`.execute(db);
  const sharedProjects = new Map<number, number>();
  const sharedGroups = new Map<number, number>();
  for (const row of shared) (row.kind === 'project' ? sharedProjects : sharedGroups).set(row.id, row.level);
  return { projects, groups, sharedProjects, sharedGroups };
}
