import { type Expression, type Insertable, type RawBuilder, type SqlBool, sql, type Updateable } from 'kysely';
import type { Db } from '../database.js';
import type { Namespace, NamespacesTable } from '../schema.js';
import { activeMembership, groupLevelOf, groupVisibleTo, sharedBelowRows, type Viewer } from './access.js';
import { countUpTo } from './count.js';

export function findNamespaceById(db: Db, id: number): Promise<Namespace | undefined> {
  return db.selectFrom('namespaces').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findNamespaceByFullPath(db: Db, fullPath: string): Promise<Namespace | undefined> {
  // PostgreSQL text cannot hold NUL, so no stored path contains one: answer without asking.
  if (fullPath.includes('\0')) return Promise.resolve(undefined);
  return db
    .selectFrom('namespaces')
    .selectAll()
    .where(sql`lower(full_path)`, '=', fullPath.toLowerCase())
    .executeTakeFirst();
}

export function findNamespacesByIds(db: Db, ids: number[]): Promise<Namespace[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('namespaces')
    .selectAll()
    .where('id', 'in', [...new Set(ids)])
    .execute();
}

export function findUserNamespace(db: Db, userId: number): Promise<Namespace | undefined> {
  return db
    .selectFrom('namespaces')
    .selectAll()
    .where('kind', '=', 'user')
    .where('owner_id', '=', userId)
    .executeTakeFirst();
}

/** Inserts a namespace and fills in its traversal ids (parent's ids + its own). */
export async function insertNamespace(
  db: Db,
  values: Omit<Insertable<NamespacesTable>, 'traversal_ids'>,
  parentTraversalIds: number[],
): Promise<Namespace> {
  const row = await db
    .insertInto('namespaces')
    .values({ ...values, traversal_ids: parentTraversalIds })
    .returningAll()
    .executeTakeFirstOrThrow();
  return db
    .updateTable('namespaces')
    .set({ traversal_ids: [...parentTraversalIds, row.id] })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function updateNamespace(db: Db, id: number, changes: Updateable<NamespacesTable>) {
  return db.updateTable('namespaces').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

/**
 * After a namespace's full path changed from `oldPath` to `newPath`, rewrites the full paths of
 * everything below it (subgroups and projects).
 */
export async function renameDescendantPaths(db: Db, namespaceId: number, oldPath: string, newPath: string) {
  const cut = oldPath.length + 1;
  await sql`UPDATE namespaces SET full_path = ${newPath} || substr(full_path, ${cut})
    WHERE ${namespaceId} = ANY(traversal_ids) AND id <> ${namespaceId}`.execute(db);
  await sql`UPDATE projects SET full_path = ${newPath} || substr(full_path, ${cut})
    WHERE namespace_id IN (SELECT id FROM namespaces WHERE ${namespaceId} = ANY(traversal_ids))`.execute(db);
}

/** Ids of the namespace and every namespace below it. */
export async function subtreeIds(db: Db, namespaceId: number): Promise<number[]> {
  const rows = await db
    .selectFrom('namespaces')
    .select('id')
    .where(sql<SqlBool>`${namespaceId} = ANY(traversal_ids)`)
    .execute();
  return rows.map((r) => r.id);
}

/** The largest value of an `integer` (int4) id column. */
const MAX_ID = 2147483647;

/** GitLab's Gitlab::SQL::Pattern: words shorter than this match whole values only. */
const MIN_CHARS_FOR_PARTIAL_MATCHING = 3;

const escapeLike = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/** Splits a search into terms as GitLab does: whitespace-separated words plus `"quoted phrases"`. */
function searchTerms(query: string): string[] {
  const quoted: string[] = [];
  const rest = query.replace(/(?<=^| )"([^"]+)"(?= |$)/g, (_, phrase: string) => {
    quoted.push(phrase);
    return '';
  });
  return [...rest.split(/\s+/).filter((w) => w !== ''), ...quoted];
}

/**
 * GitLab's `fuzzy_search` over some text columns: every term of three characters or more must
 * occur in one column (case-insensitive); a search with no such term matches a column equal to
 * the whole search, ignoring case. Null when the search is blank (no filter).
 */
export function fuzzySearch(columns: RawBuilder<string>[], search: string): Expression<SqlBool> | null {
  const query = search.trim().replace(/\s+/g, ' ');
  if (query === '') return null;
  // No stored name or path holds a NUL (PostgreSQL text cannot), so nothing matches one.
  if (query.includes('\0')) return sql<SqlBool>`FALSE`;
  const words = searchTerms(query).filter((w) => [...w].length >= MIN_CHARS_FOR_PARTIAL_MATCHING);
  const perColumn = columns.map((column) =>
    words.length > 0
      ? sql.join(
          words.map((w) => sql`${column} ILIKE ${`%${escapeLike(w)}%`}`),
          sql` AND `,
        )
      : sql`${column} ILIKE ${escapeLike(query)}`,
  );
  return sql<SqlBool>`(${sql.join(
    perColumn.map((c) => sql`(${c})`),
    sql` OR `,
  )})`;
}

/** SQL: the names of `g` and its ancestors from the root down, joined with ` / ` (GitLab's full_name). */
const fullNameOf = sql<string>`(SELECT string_agg(a.name, ' / ' ORDER BY array_position(g.traversal_ids, a.id))
  FROM namespaces a WHERE a.id = ANY(g.traversal_ids))`;

/** Search columns: name and path, or (GitLab's `include_parents`) the full path and full name. */
function searchColumns(includeParents: boolean): RawBuilder<string>[] {
  return includeParents ? [sql<string>`g.full_path`, fullNameOf] : [sql<string>`g.name`, sql<string>`g.path`];
}

/**
 * SQL: group `g` is related to the user by membership, as GitLab's GroupsFinder lists them for
 * `all_available=false`: groups the user is a member of with their descendants, their ancestors,
 * the groups (and ancestors) of projects the user is a member of, groups (with their
 * descendants) shared with a group the user is a member of, and the groups around what is shared
 * with such a group.
 */
function groupRelatedTo(userId: number, today: string): Expression<SqlBool> {
  const active = activeMembership(today);
  return sql<SqlBool>`(EXISTS (
    SELECT 1 FROM members m JOIN namespaces d ON m.source_type = 'group' AND d.id = m.source_id
    WHERE m.user_id = ${userId} AND ${active} AND m.access_level >= 10
      AND (d.id = ANY(g.traversal_ids) OR g.id = ANY(d.traversal_ids))
  ) OR EXISTS (
    SELECT 1 FROM members m JOIN projects pr ON m.source_type = 'project' AND pr.id = m.source_id
    JOIN namespaces d ON d.id = pr.namespace_id
    WHERE m.user_id = ${userId} AND ${active} AND g.id = ANY(d.traversal_ids)
  ) OR EXISTS (
    SELECT 1 FROM group_group_links gl JOIN namespaces sg ON sg.id = gl.shared_with_group_id
    JOIN members m ON m.source_type = 'group' AND m.source_id = ANY(sg.traversal_ids)
    WHERE gl.shared_group_id = ANY(g.traversal_ids) AND m.user_id = ${userId} AND ${active}
      AND m.access_level >= 10 AND (gl.expires_at IS NULL OR gl.expires_at > ${today}::date)
  ) OR EXISTS (${sharedBelowRows(userId, today, sql`g.id`)}))`;
}

/** SQL: the user holds a direct, active membership of group `g` at `level` or above. */
function directMemberOf(userId: number, today: string, level: number): Expression<SqlBool> {
  return sql<SqlBool>`EXISTS (SELECT 1 FROM members m
    WHERE m.source_type = 'group' AND m.source_id = g.id AND m.user_id = ${userId}
      AND ${activeMembership(today)} AND m.access_level >= ${level})`;
}

export interface GroupFilter {
  viewer: Viewer;
  /** Only direct children of this group. */
  parentId?: number;
  /** Only groups below this group, at any depth. */
  descendantsOf?: number;
  /** Only top-level groups. */
  topLevelOnly?: boolean;
  /** Groups where the viewer's level (from a membership of the group or an ancestor) is at least this. */
  minAccessLevel?: number;
  /** Only groups the viewer is a direct Owner of. */
  owned?: boolean;
  /** Only groups related to the viewer by membership (not public/internal ones alone). */
  membership?: boolean;
  search?: string;
  visibility?: string;
  /** Leave out these ids. */
  skipIds?: number[];
  /** Archived groups only (true) or unarchived only (false); Depot cannot archive groups yet. */
  archived?: boolean;
  orderBy: 'name' | 'path' | 'id' | 'similarity';
  sort: 'asc' | 'desc';
}

function groupQuery(db: Db, f: GroupFilter) {
  let q = db.selectFrom('namespaces as g').where('g.kind', '=', 'group').where(groupVisibleTo(f.viewer));
  if (f.parentId !== undefined) q = q.where('g.parent_id', '=', f.parentId);
  if (f.descendantsOf !== undefined) {
    q = q.where(sql<SqlBool>`${f.descendantsOf} = ANY(g.traversal_ids)`).where('g.id', '<>', f.descendantsOf);
  }
  if (f.topLevelOnly) q = q.where('g.parent_id', 'is', null);
  const userId = f.viewer.userId;
  if (userId !== null) {
    // `owned` and `min_access_level` replace the membership scope, as in GitLab's GroupsFinder.
    if (f.owned) q = q.where(directMemberOf(userId, f.viewer.today, 50));
    else if (f.minAccessLevel !== undefined) {
      q = q.where(groupLevelOf(userId, f.viewer.today), '>=', f.minAccessLevel);
    } else if (f.membership) q = q.where(groupRelatedTo(userId, f.viewer.today));
  } else if (f.owned) {
    // Anonymous callers own nothing (GitLab: `current_user&.owned_groups || Group.none`).
    q = q.where(sql<SqlBool>`FALSE`);
  }
  if (f.search) {
    // Top-level listings also match the full path and full name; a parent's listing does not.
    const match = fuzzySearch(searchColumns(f.parentId === undefined && f.descendantsOf === undefined), f.search);
    if (match) q = q.where(match);
  }
  if (f.visibility) q = q.where('g.visibility', '=', f.visibility as Namespace['visibility']);
  if (f.archived === true) q = q.where(sql<SqlBool>`FALSE`);
  // Ids beyond the integer column's range name no group; the database would refuse them.
  const skipIds = (f.skipIds ?? []).filter((id) => id >= 1 && id <= MAX_ID);
  if (skipIds.length > 0) q = q.where('g.id', 'not in', skipIds);
  return q;
}

/** A page of groups, ordered by the chosen column then by id ascending (GitLab's tie-breaker). */
export function listGroups(db: Db, f: GroupFilter, window: { limit: number; offset: number }): Promise<Namespace[]> {
  const column = f.orderBy === 'similarity' ? 'name' : f.orderBy;
  let q = groupQuery(db, f).selectAll('g');
  q = q.orderBy(column === 'id' ? 'g.id' : sql`lower(g.${sql.ref(column)})`, f.sort);
  if (column !== 'id') q = q.orderBy('g.id', 'asc');
  return q.limit(window.limit).offset(window.offset).execute();
}

export async function countGroups(db: Db, f: GroupFilter, cap: number): Promise<number> {
  return countUpTo(db, groupQuery(db, f).select('g.id'), cap);
}

export interface NamespaceFilter {
  viewer: Viewer;
  search?: string;
  /** Match the search against full paths and full names instead of names and paths. */
  fullPathSearch?: boolean;
  ownedOnly?: boolean;
  topLevelOnly?: boolean;
}

/**
 * The namespaces GET /namespaces lists: every one for administrators; otherwise the user's own
 * namespace and the groups they are a direct member of (GitLab's `User#namespaces`), or only
 * the groups they directly own with `ownedOnly`.
 */
export function namespacesOfUser(db: Db, f: NamespaceFilter) {
  let q = db.selectFrom('namespaces as g');
  const { userId, today } = f.viewer;
  if (!f.viewer.admin && userId !== null) {
    const groups = directMemberOf(userId, today, f.ownedOnly ? 50 : 10);
    q = q.where((eb) =>
      eb.or([
        eb.and([eb('g.kind', '=', 'user'), eb('g.owner_id', '=', userId)]),
        eb.and([eb('g.kind', '=', 'group'), groups]),
      ]),
    );
  }
  if (f.topLevelOnly) q = q.where('g.parent_id', 'is', null);
  if (f.search) {
    const match = fuzzySearch(searchColumns(f.fullPathSearch ?? false), f.search);
    if (match) q = q.where(match);
  }
  return q;
}

/** Distinct users with an active membership of the group or any group below it, and its projects' count. */
export async function groupSubtreeCounts(db: Db, groupId: number, today: string) {
  const { rows } = await sql<{ members: number; projects: number }>`SELECT
      (SELECT count(DISTINCT m.user_id)::int FROM members m
        JOIN namespaces d ON m.source_type = 'group' AND d.id = m.source_id
        WHERE ${groupId} = ANY(d.traversal_ids) AND ${activeMembership(today)}) AS members,
      (SELECT count(*)::int FROM projects pr JOIN namespaces d ON d.id = pr.namespace_id
        WHERE ${groupId} = ANY(d.traversal_ids)) AS projects`.execute(db);
  return { members: rows[0]?.members ?? 0, projects: rows[0]?.projects ?? 0 };
}

/** Whether a group in `parentId` (null: top level) already has this exact name. */
export async function siblingNameTaken(db: Db, parentId: number, name: string, exceptId: number | null) {
  let q = db
    .selectFrom('namespaces')
    .select('id')
    .where('kind', '=', 'group')
    .where('parent_id', '=', parentId)
    .where('name', '=', name);
  if (exceptId !== null) q = q.where('id', '<>', exceptId);
  return (await q.executeTakeFirst()) !== undefined;
}

/**
 * Whether a namespace directly in `parentId` (null: top level, user namespaces included) has this
 * path, or with `orName` this path or name, ignoring case (GitLab's `filter_by_path` and
 * `find_by_path_or_name`).
 */
export async function childPathTaken(db: Db, parentId: number | null, value: string, orName = false) {
  const lower = value.toLowerCase();
  const row = await db
    .selectFrom('namespaces')
    .select('id')
    .where(parentId === null ? sql<SqlBool>`parent_id IS NULL` : sql<SqlBool>`parent_id = ${parentId}`)
    .where((eb) =>
      orName
        ? eb.or([eb(sql`lower(path)`, '=', lower), eb(sql`lower(name)`, '=', lower)])
        : eb(sql`lower(path)`, '=', lower),
    )
    .executeTakeFirst();
  return row !== undefined;
}
