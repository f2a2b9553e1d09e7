import { type Expression, type Insertable, type RawBuilder, type SqlBool, sql, type Updateable } from 'kysely';
import type { Db } from '../database.js';
import type { Namespace, Project, ProjectsTable } from '../schema.js';
import { projectLevelOf, projectVisibleTo, type Viewer } from './access.js';
import { countUpTo } from './count.js';

export function findProjectById(db: Db, id: number): Promise<Project | undefined> {
  return db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findProjectByFullPath(db: Db, fullPath: string): Promise<Project | undefined> {
  return db
    .selectFrom('projects')
    .selectAll()
    .where(sql`lower(full_path)`, '=', fullPath.toLowerCase())
    .executeTakeFirst();
}

const NAMESPACE_COLUMNS = [
  'id',
  'kind',
  'name',
  'path',
  'full_path',
  'parent_id',
  'traversal_ids',
  'owner_id',
  'description',
  'visibility',
  'request_access_enabled',
  'project_creation_level',
  'subgroup_creation_level',
  'lfs_enabled',
  'share_with_group_lock',
  'require_two_factor_authentication',
  'two_factor_grace_period',
  'emails_enabled',
  'mentions_disabled',
  'default_branch',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof Namespace)[];

/**
 * A project and its namespace in one query (every API call on a project starts here), found by
 * id or by full path. A path no project has now finds the project that had it, through its
 * redirect route (GitLab's `follow_redirects: true`); the caller tells by the project's
 * `full_path`.
 */
export async function findProjectWithNamespace(
  db: Db,
  key: { id: number } | { fullPath: string },
): Promise<{ project: Project; namespace: Namespace } | undefined> {
  if ('id' in key) return projectWithNamespace(db, 'projects.id', key.id);
  const path = key.fullPath.toLowerCase();
  const found = await projectWithNamespace(db, sql`lower(projects.full_path)`, path);
  if (found) return found;
  const redirected = sql<number>`(SELECT project_id FROM redirect_routes WHERE lower(path) = ${path})`;
  return projectWithNamespace(db, 'projects.id', redirected);
}

async function projectWithNamespace(
  db: Db,
  column: 'projects.id' | RawBuilder<unknown>,
  value: number | string | RawBuilder<number>,
): Promise<{ project: Project; namespace: Namespace } | undefined> {
  const row = (await db
    .selectFrom('projects')
    .innerJoin('namespaces as ns', 'ns.id', 'projects.namespace_id')
    .selectAll('projects')
    .select(NAMESPACE_COLUMNS.map((c) => sql.ref(`ns.${c}`).as(`ns__${c}`)))
    .where(column, '=', value)
    .executeTakeFirst()) as Record<string, unknown> | undefined;
  if (!row) return undefined;
  const project: Record<string, unknown> = {};
  const namespace: Record<string, unknown> = {};
  for (const [column, value] of Object.entries(row)) {
    if (column.startsWith('ns__')) namespace[column.slice(4)] = value;
    else project[column] = value;
  }
  return { project: project as Project, namespace: namespace as Namespace };
}

/** The project with exactly this name in a namespace (names compare case-sensitively). */
export function findProjectByName(db: Db, namespaceId: number, name: string): Promise<Project | undefined> {
  return db
    .selectFrom('projects')
    .selectAll()
    .where('namespace_id', '=', namespaceId)
    .where('name', '=', name)
    .executeTakeFirst();
}

export function insertProject(db: Db, values: Insertable<ProjectsTable>): Promise<Project> {
  return db.insertInto('projects').values(values).returningAll().executeTakeFirstOrThrow();
}

export function updateProject(db: Db, id: number, changes: Updateable<ProjectsTable>) {
  return db.updateTable('projects').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function deleteProject(db: Db, id: number): Promise<void> {
  await db.deleteFrom('members').where('source_type', '=', 'project').where('source_id', '=', id).execute();
  await db.deleteFrom('projects').where('id', '=', id).execute();
}

/** How many projects live in a user's personal namespace (GitLab's `personal_projects_count`). */
export async function countPersonalProjects(db: Db, userId: number): Promise<number> {
  const row = await db
    .selectFrom('projects')
    .innerJoin('namespaces', 'namespaces.id', 'projects.namespace_id')
    .where('namespaces.kind', '=', 'user')
    .where('namespaces.owner_id', '=', userId)
    .select(sql<number>`count(*)::int`.as('n'))
    .executeTakeFirstOrThrow();
  return row.n;
}

export async function countProjectsInSubtree(db: Db, namespaceId: number): Promise<number> {
  const row = await db
    .selectFrom('projects as p')
    .innerJoin('namespaces as ns', 'ns.id', 'p.namespace_id')
    .select(sql<number>`count(*)::int`.as('n'))
    .where(sql<SqlBool>`${namespaceId} = ANY(ns.traversal_ids)`)
    .executeTakeFirstOrThrow();
  return row.n;
}

export function projectsInSubtree(db: Db, namespaceId: number): Promise<Project[]> {
  return db
    .selectFrom('projects as p')
    .innerJoin('namespaces as ns', 'ns.id', 'p.namespace_id')
    .selectAll('p')
    .where(sql<SqlBool>`${namespaceId} = ANY(ns.traversal_ids)`)
    .execute();
}

export const PROJECT_ORDER_COLUMNS = [
  'id',
  'name',
  'path',
  'created_at',
  'updated_at',
  'last_activity_at',
  'similarity',
  'star_count',
  'storage_size',
  'repository_size',
] as const;
export type ProjectOrder = (typeof PROJECT_ORDER_COLUMNS)[number];

export interface ProjectFilter {
  viewer: Viewer;
  /** Only projects in these namespaces. */
  namespaceIds?: number[];
  /** With `namespaceIds`: also the projects shared with these groups (GitLab's `with_shared`). */
  sharedWithGroupIds?: number[];
  owned?: boolean;
  membership?: boolean;
  minAccessLevel?: number;
  search?: string;
  /** Search the namespace's full path as well as the project's name. */
  searchNamespaces?: boolean;
  visibility?: string;
  archived?: boolean;
  topic?: string[];
  repositoryStorage?: string;
  idAfter?: number;
  idBefore?: number;
  lastActivityAfter?: Date;
  lastActivityBefore?: Date;
  orderBy: ProjectOrder;
  sort: 'asc' | 'desc';
}

/** Words shorter than this match only as a whole query (GitLab's MIN_CHARS_FOR_PARTIAL_MATCHING). */
const MIN_CHARS_FOR_PARTIAL_MATCHING = 3;

const likeEscape = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * The words of a search as GitLab's fuzzy search splits them: whitespace squished, `"quoted
 * phrases"` kept whole, and only words of at least three characters.
 */
function searchWords(query: string): string[] {
  let rest = query.trim().replace(/\s+/g, ' ');
  const quoted: string[] = [];
  rest = rest.replace(/(?<=^| )"[^"]+"(?= |$)/g, (match) => {
    quoted.push(match.slice(1, -1));
    return '';
  });
  return [...rest.split(' '), ...quoted].filter((w) => w.length >= MIN_CHARS_FOR_PARTIAL_MATCHING);
}

/**
 * GitLab's `Project.search`: every word (three characters or more) must occur in one column,
 * any column may match; a query without such words must equal a column (case-insensitively).
 * With `searchNamespaces` the columns are the full path and full name instead of path and name.
 */
function searchCondition(query: string, searchNamespaces: boolean): Expression<SqlBool> | null {
  const squished = query.trim().replace(/\s+/g, ' ');
  if (squished === '') return null;
  const fullName = sql`(SELECT string_agg(n.name, ' / ' ORDER BY array_position(ns.traversal_ids, n.id))
    FROM namespaces n WHERE n.id = ANY(ns.traversal_ids)) || ' / ' || p.name`;
  const columns = searchNamespaces
    ? [sql`p.full_path`, fullName, sql`coalesce(p.description, '')`]
    : [sql`p.path`, sql`p.name`, sql`coalesce(p.description, '')`];
  const words = searchWords(squished);
  const perColumn = columns.map((column) =>
    words.length > 0
      ? sql.join(
          words.map((w) => sql`${column} ILIKE ${`%${likeEscape(w)}%`}`),
          sql` AND `,
        )
      : sql`${column} ILIKE ${likeEscape(squished)}`,
  );
  return sql<SqlBool>`((${sql.join(perColumn, sql`) OR (`)}))`;
}

function projectQuery(db: Db, f: ProjectFilter) {
  let q = db
    .selectFrom('projects as p')
    .innerJoin('namespaces as ns', 'ns.id', 'p.namespace_id')
    .where(projectVisibleTo(f.viewer));
  if (f.namespaceIds) {
    const inNamespaces = sql<SqlBool>`p.namespace_id = ANY(${sql.val(f.namespaceIds)}::int[])`;
    const shared = f.sharedWithGroupIds?.length
      ? sql<SqlBool>`EXISTS (SELECT 1 FROM project_group_links pl WHERE pl.project_id = p.id
          AND pl.group_id = ANY(${sql.val(f.sharedWithGroupIds)}::int[])
          AND (pl.expires_at IS NULL OR pl.expires_at > ${f.viewer.today}::date))`
      : sql<SqlBool>`FALSE`;
    q = q.where(sql<SqlBool>`(${inNamespaces} OR ${shared})`);
  }
  const userId = f.viewer.userId;
  if (userId !== null) {
    const level = projectLevelOf(userId, f.viewer.today);
    if (f.owned) {
      q = q.where((eb) =>
        eb.or([eb.and([eb('ns.kind', '=', 'user'), eb('ns.owner_id', '=', userId)]), eb(level, '>=', 50)]),
      );
    }
    if (f.membership) q = q.where(level, '>=', 10);
    if (f.minAccessLevel !== undefined) q = q.where(level, '>=', f.minAccessLevel);
  } else if (f.owned || f.membership || f.minAccessLevel !== undefined) {
    // Nobody is signed in: there is nothing they own or are a member of.
    q = q.where(sql<SqlBool>`FALSE`);
  }
  if (f.search) {
    const condition = searchCondition(f.search, f.searchNamespaces ?? false);
    if (condition) q = q.where(condition);
  }
  if (f.visibility) q = q.where('p.visibility', '=', f.visibility as Project['visibility']);
  if (f.archived !== undefined) q = q.where('p.archived', '=', f.archived);
  for (const topic of f.topic ?? []) {
    q = q.where(sql<SqlBool>`p.topics @> ${JSON.stringify([topic])}::jsonb`);
  }
  if (f.repositoryStorage !== undefined) q = q.where('p.repository_storage', '=', f.repositoryStorage);
  // Ids come from users and may exceed the integer column: compare as bigint.
  if (f.idAfter !== undefined) q = q.where(sql<SqlBool>`p.id > ${f.idAfter}::bigint`);
  if (f.idBefore !== undefined) q = q.where(sql<SqlBool>`p.id < ${f.idBefore}::bigint`);
  if (f.lastActivityAfter) q = q.where('p.last_activity_at', '>', f.lastActivityAfter);
  if (f.lastActivityBefore) q = q.where('p.last_activity_at', '<', f.lastActivityBefore);
  return q;
}

export function listProjects(db: Db, f: ProjectFilter, window: { limit: number; offset: number }): Promise<Project[]> {
  let q = projectQuery(db, f).selectAll('p');
  switch (f.orderBy) {
    case 'name':
    case 'path':
      q = q.orderBy(sql`lower(p.${sql.ref(f.orderBy)})`, f.sort);
      break;
    case 'created_at':
    case 'updated_at':
    case 'last_activity_at':
      q = q.orderBy(`p.${f.orderBy}`, f.sort);
      break;
    case 'similarity':
      // Exact name matches first, then prefix matches, then the rest.
      q = q.orderBy(
        sql`CASE WHEN lower(p.name) = ${(f.search ?? '').toLowerCase()} THEN 0
          WHEN lower(p.name) LIKE ${`${likeEscape((f.search ?? '').toLowerCase())}%`} THEN 1 ELSE 2 END`,
        'asc',
      );
      break;
    default:
      break;
  }
  q = q.orderBy('p.id', f.sort);
  return q.limit(window.limit).offset(window.offset).execute();
}

export async function countProjects(db: Db, f: ProjectFilter, cap: number): Promise<number> {
  return countUpTo(db, projectQuery(db, f).select('p.id'), cap);
}
