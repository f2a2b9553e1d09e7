import { type Insertable, type SqlBool, sql } from 'kysely';
import type { Db } from '../database.js';
import type { GroupGroupLink, GroupGroupLinksTable, ProjectGroupLink, ProjectGroupLinksTable } from '../schema.js';
import { groupVisibleTo, type Viewer } from './access.js';
import { countUpTo } from './count.js';
import { fuzzySearch } from './namespaces.js';

/** A link with the invited group's name and full path, as `shared_with_groups` lists them. */
export interface SharedWithGroup {
  group_id: number;
  group_name: string;
  group_full_path: string;
  group_access: number;
  expires_at: string | null;
}

export function findProjectGroupLink(db: Db, projectId: number, groupId: number) {
  return db
    .selectFrom('project_group_links')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('group_id', '=', groupId)
    .executeTakeFirst();
}

export function insertProjectGroupLink(db: Db, values: Insertable<ProjectGroupLinksTable>): Promise<ProjectGroupLink> {
  return db.insertInto('project_group_links').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function deleteProjectGroupLink(db: Db, id: number): Promise<void> {
  await db.deleteFrom('project_group_links').where('id', '=', id).execute();
}

export function findGroupGroupLink(db: Db, sharedGroupId: number, sharedWithGroupId: number) {
  return db
    .selectFrom('group_group_links')
    .selectAll()
    .where('shared_group_id', '=', sharedGroupId)
    .where('shared_with_group_id', '=', sharedWithGroupId)
    .executeTakeFirst();
}

export function insertGroupGroupLink(db: Db, values: Insertable<GroupGroupLinksTable>): Promise<GroupGroupLink> {
  return db.insertInto('group_group_links').values(values).returningAll().executeTakeFirstOrThrow();
}

export async function deleteGroupGroupLink(db: Db, id: number): Promise<void> {
  await db.deleteFrom('group_group_links').where('id', '=', id).execute();
}

/**
 * The groups the projects are shared with that the viewer may see (GitLab's
 * `visible_group_links`), by project id, oldest link first.
 */
export async function sharedWithGroupsOfProjects(
  db: Db,
  projectIds: number[],
  viewer: Viewer,
): Promise<Map<number, SharedWithGroup[]>> {
  const out = new Map<number, SharedWithGroup[]>();
  if (projectIds.length === 0) return out;
  const { rows } = await sql<SharedWithGroup & { source_id: number }>`
    SELECT l.project_id AS source_id, g.id AS group_id, g.name AS group_name, g.full_path AS group_full_path,
      l.group_access, to_char(l.expires_at, 'YYYY-MM-DD') AS expires_at
    FROM project_group_links l JOIN namespaces g ON g.id = l.group_id
    WHERE l.project_id = ANY(${sql.val(projectIds)}::int[]) AND ${groupVisibleTo(viewer)}
    ORDER BY l.id`.execute(db);
  for (const { source_id, ...link } of rows) out.set(source_id, [...(out.get(source_id) ?? []), link]);
  return out;
}

/** The groups a group is shared with that the viewer may see, oldest link first. */
export async function sharedWithGroupsOfGroup(db: Db, groupId: number, viewer: Viewer): Promise<SharedWithGroup[]> {
  const { rows } = await sql<SharedWithGroup>`
    SELECT g.id AS group_id, g.name AS group_name, g.full_path AS group_full_path,
      l.group_access, to_char(l.expires_at, 'YYYY-MM-DD') AS expires_at
    FROM group_group_links l JOIN namespaces g ON g.id = l.shared_with_group_id
    WHERE l.shared_group_id = ${groupId} AND ${groupVisibleTo(viewer)}
    ORDER BY l.id`.execute(db);
  return rows;
}

/**
 * SQL: group `g` is one a project (`projectId`, in the namespaces `traversalIds`) or one of its
 * groups is shared with, by a link in force, with `group_access` at least `minAccess`.
 */
export function sharedWithProject(
  projectId: number,
  traversalIds: number[],
  today: string,
  minAccess: number,
): ReturnType<typeof sql<SqlBool>> {
  const ids = sql`${sql.val(traversalIds)}::int[]`;
  return sql<SqlBool>`(EXISTS (SELECT 1 FROM project_group_links pl WHERE pl.group_id = g.id
      AND pl.project_id = ${projectId} AND pl.group_access >= ${minAccess}
      AND (pl.expires_at IS NULL OR pl.expires_at > ${today}::date))
    OR EXISTS (SELECT 1 FROM group_group_links gl WHERE gl.shared_with_group_id = g.id
      AND gl.shared_group_id = ANY(${ids}) AND gl.group_access >= ${minAccess}
      AND (gl.expires_at IS NULL OR gl.expires_at > ${today}::date)))`;
}

export interface ProjectGroupsFilter {
  viewer: Viewer;
  /** The project's group and its ancestors (empty for a personal project). */
  ancestorIds: number[];
  projectId: number;
  withShared: boolean;
  sharedVisibleOnly: boolean;
  sharedMinAccessLevel?: number;
  search?: string;
  skipIds?: number[];
}

/** The largest value of an int4 id column: larger ids name no row. */
const MAX_ID = 2147483647;

/** GET /projects/:id/groups (GitLab's Projects::GroupsFinder): ancestors, and with `withShared` the invited groups. */
function projectGroupsQuery(db: Db, f: ProjectGroupsFilter) {
  const shared = f.withShared
    ? sql<SqlBool>`EXISTS (SELECT 1 FROM project_group_links pl WHERE pl.group_id = g.id
        AND pl.project_id = ${f.projectId} AND pl.group_access >= ${f.sharedMinAccessLevel ?? 0}
        AND (pl.expires_at IS NULL OR pl.expires_at > ${f.viewer.today}::date))
        AND ${f.sharedVisibleOnly ? groupVisibleTo(f.viewer) : sql<SqlBool>`TRUE`}`
    : sql<SqlBool>`FALSE`;
  let q = db
    .selectFrom('namespaces as g')
    .where('g.kind', '=', 'group')
    .where(sql<SqlBool>`(g.id = ANY(${sql.val(f.ancestorIds)}::int[]) OR (${shared}))`);
  if (f.search) {
    const match = fuzzySearch([sql<string>`g.name`, sql<string>`g.path`], f.search);
    if (match) q = q.where(match);
  }
  const skip = (f.skipIds ?? []).filter((id) => id >= 1 && id <= MAX_ID);
  if (skip.length > 0) q = q.where('g.id', 'not in', skip);
  return q;
}

export function listProjectGroups(db: Db, f: ProjectGroupsFilter, window: { limit: number; offset: number }) {
  return projectGroupsQuery(db, f)
    .selectAll('g')
    .orderBy('g.id', 'desc')
    .limit(window.limit)
    .offset(window.offset)
    .execute();
}

export async function countProjectGroups(db: Db, f: ProjectGroupsFilter, cap: number): Promise<number> {
  return countUpTo(db, projectGroupsQuery(db, f).select('g.id'), cap);
}
