import type { Insertable, Updateable } from 'kysely';
import { type SqlBool, sql } from 'kysely';
import type { Db } from '../database.js';
import type { Namespace, NamespacesTable } from '../schema.js';
import { groupLevelOf, groupVisibleTo, type Viewer } from './access.js';

export function findNamespaceById(db: Db, id: number): Promise<Namespace | undefined> {
  return db.selectFrom('namespaces').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findNamespaceByFullPath(db: Db, fullPath: string): Promise<Namespace | undefined> {
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

export interface GroupFilter {
  viewer: Viewer;
  /** Only direct children of this group. */
  parentId?: number;
  /** Only top-level groups. */
  topLevelOnly?: boolean;
  /** Restrict to groups where the viewer is a member at this level or above. */
  minAccessLevel?: number;
  /** Only groups the viewer owns. */
  owned?: boolean;
  /** Only groups the viewer has a membership path to (not public/internal ones alone). */
  membership?: boolean;
  search?: string;
  visibility?: string;
  /** Restrict to these ids (skip_groups is the inverse). */
  skipIds?: number[];
  orderBy: 'name' | 'path' | 'id' | 'similarity';
  sort: 'asc' | 'desc';
}

function groupQuery(db: Db, f: GroupFilter) {
  let q = db.selectFrom('namespaces as g').where('g.kind', '=', 'group').where(groupVisibleTo(f.viewer));
  if (f.parentId !== undefined) q = q.where('g.parent_id', '=', f.parentId);
  if (f.topLevelOnly) q = q.where('g.parent_id', 'is', null);
  const userId = f.viewer.userId;
  if (userId !== null) {
    if (f.owned) q = q.where(groupLevelOf(userId, f.viewer.today), '>=', 50);
    if (f.minAccessLevel !== undefined) q = q.where(groupLevelOf(userId, f.viewer.today), '>=', f.minAccessLevel);
    if (f.membership) q = q.where(groupLevelOf(userId, f.viewer.today), '>', 0);
  }
  if (f.search) {
    const term = `%${f.search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    q = q.where((eb) => eb.or([eb(sql`lower(g.name)`, 'like', term), eb(sql`lower(g.path)`, 'like', term)]));
  }
  if (f.visibility) q = q.where('g.visibility', '=', f.visibility as Namespace['visibility']);
  if (f.skipIds && f.skipIds.length > 0) q = q.where('g.id', 'not in', f.skipIds);
  return q;
}

export function listGroups(db: Db, f: GroupFilter, window: { limit: number; offset: number }): Promise<Namespace[]> {
  const column = f.orderBy === 'similarity' ? 'name' : f.orderBy;
  let q = groupQuery(db, f).selectAll('g');
  q = q.orderBy(column === 'id' ? 'g.id' : sql`lower(g.${sql.ref(column)})`, f.sort);
  if (column !== 'id') q = q.orderBy('g.id', f.sort);
  return q.limit(window.limit).offset(window.offset).execute();
}

export async function countGroups(db: Db, f: GroupFilter, cap: number): Promise<number> {
  const row = await db
    .selectFrom(groupQuery(db, f).select('g.id').limit(cap).as('t'))
    .select(sql<number>`count(*)::int`.as('n'))
    .executeTakeFirstOrThrow();
  return row.n;
}

/** The namespaces a user may list in GET /namespaces: their own and the groups they belong to. */
export function namespacesOfUser(db: Db, viewer: Viewer, search: string | undefined, ownedOnly: boolean) {
  let q = db.selectFrom('namespaces as g');
  if (!viewer.admin && viewer.userId !== null) {
    const level = groupLevelOf(viewer.userId, viewer.today);
    q = q.where((eb) =>
      eb.or([
        eb.and([eb('g.kind', '=', 'user'), eb('g.owner_id', '=', viewer.userId)]),
        eb.and([eb('g.kind', '=', 'group'), eb(level, '>=', ownedOnly ? 50 : 10)]),
      ]),
    );
  }
  if (search) {
    const term = `%${search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    q = q.where((eb) => eb.or([eb(sql`lower(g.name)`, 'like', term), eb(sql`lower(g.path)`, 'like', term)]));
  }
  return q;
}
