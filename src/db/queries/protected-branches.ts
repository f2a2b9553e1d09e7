import { sql } from 'kysely';
import type { Db } from '../database.js';

/** The three kinds of access row a protected branch has, as GitLab names them. */
export type ProtectedAction = 'push' | 'merge' | 'unprotect';

export const ACCESS_TABLE = {
  push: 'protected_branch_push_access_levels',
  merge: 'protected_branch_merge_access_levels',
  unprotect: 'protected_branch_unprotect_access_levels',
} as const;

/** One access row: exactly one of a role, a user or a group (or, for push, a deploy key). */
export interface AccessRow {
  id: number;
  access_level: number | null;
  user_id: number | null;
  group_id: number | null;
  deploy_key_id: number | null;
}

/** A protected branch with its access rows. */
export interface ProtectedBranchRow {
  id: number;
  project_id: number;
  name: string;
  allow_force_push: boolean;
  code_owner_approval_required: boolean;
  updated_at: Date;
  push: AccessRow[];
  merge: AccessRow[];
  unprotect: AccessRow[];
}

/** A new access row: a role, a user or a group. */
export interface AccessGrant {
  access_level?: number | undefined;
  user_id?: number | undefined;
  group_id?: number | undefined;
}

/** Every protected branch of a project with its access rows, ordered by id (one query). */
export async function listProtectedBranches(db: Db, projectId: number): Promise<ProtectedBranchRow[]> {
  const access = (table: string) => sql`
    coalesce((SELECT json_agg(json_build_object(
      'id', a.id, 'access_level', a.access_level, 'user_id', a.user_id, 'group_id', a.group_id,
      'deploy_key_id', ${sql.raw(table === ACCESS_TABLE.push ? 'a.deploy_key_id' : 'NULL')}) ORDER BY a.id)
     FROM ${sql.table(table)} a WHERE a.protected_branch_id = b.id), '[]'::json)`;
  const { rows } = await sql<ProtectedBranchRow>`
    SELECT b.id, b.project_id, b.name, b.allow_force_push, b.code_owner_approval_required, b.updated_at,
      ${access(ACCESS_TABLE.push)} AS push,
      ${access(ACCESS_TABLE.merge)} AS merge,
      ${access(ACCESS_TABLE.unprotect)} AS unprotect
    FROM protected_branches b WHERE b.project_id = ${projectId} ORDER BY b.id`.execute(db);
  return rows;
}

/** Inserts a protected branch and its access rows; returns its id. */
export async function insertProtectedBranch(
  db: Db,
  row: {
    project_id: number;
    name: string;
    allow_force_push: boolean;
    code_owner_approval_required: boolean;
    now: Date;
  },
  grants: Record<ProtectedAction, AccessGrant[]>,
): Promise<number> {
  const { id } = await db
    .insertInto('protected_branches')
    .values({
      project_id: row.project_id,
      name: row.name,
      allow_force_push: row.allow_force_push,
      code_owner_approval_required: row.code_owner_approval_required,
      created_at: row.now,
      updated_at: row.now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  for (const action of ['push', 'merge', 'unprotect'] as const) {
    await insertAccessRows(db, action, id, grants[action], row.now);
  }
  return id;
}

export async function insertAccessRows(
  db: Db,
  action: ProtectedAction,
  protectedBranchId: number,
  grants: AccessGrant[],
  now: Date,
): Promise<void> {
  if (grants.length === 0) return;
  await db
    .insertInto(ACCESS_TABLE[action])
    .values(
      grants.map((g) => ({
        protected_branch_id: protectedBranchId,
        access_level: g.access_level ?? null,
        user_id: g.user_id ?? null,
        group_id: g.group_id ?? null,
        created_at: now,
        updated_at: now,
      })),
    )
    .execute();
}

export async function deleteAccessRows(db: Db, action: ProtectedAction, protectedBranchId: number, ids: number[]) {
  if (ids.length === 0) return;
  await db
    .deleteFrom(ACCESS_TABLE[action])
    .where('protected_branch_id', '=', protectedBranchId)
    .where('id', 'in', ids)
    .execute();
}

export async function updateAccessLevel(
  db: Db,
  action: ProtectedAction,
  protectedBranchId: number,
  id: number,
  accessLevel: number,
  now: Date,
) {
  await db
    .updateTable(ACCESS_TABLE[action])
    .set({ access_level: accessLevel, user_id: null, group_id: null, updated_at: now })
    .where('protected_branch_id', '=', protectedBranchId)
    .where('id', '=', id)
    .execute();
}

export async function updateProtectedBranchFlags(
  db: Db,
  id: number,
  flags: { allow_force_push?: boolean | undefined; code_owner_approval_required?: boolean | undefined },
  now: Date,
) {
  await db
    .updateTable('protected_branches')
    .set({
      updated_at: now,
      ...(flags.allow_force_push !== undefined ? { allow_force_push: flags.allow_force_push } : {}),
      ...(flags.code_owner_approval_required !== undefined
        ? { code_owner_approval_required: flags.code_owner_approval_required }
        : {}),
    })
    .where('id', '=', id)
    .execute();
}

export async function deleteProtectedBranch(db: Db, id: number): Promise<boolean> {
  const result = await db.deleteFrom('protected_branches').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** Names of users and groups named by access rows, for access_level_description. */
export async function granteeNames(db: Db, userIds: number[], groupIds: number[]) {
  const users = userIds.length
    ? await db.selectFrom('users').select(['id', 'name']).where('id', 'in', userIds).execute()
    : [];
  const groups = groupIds.length
    ? await db.selectFrom('namespaces').select(['id', 'name']).where('id', 'in', groupIds).execute()
    : [];
  return {
    users: new Map(users.map((u) => [u.id, u.name])),
    groups: new Map(groups.map((g) => [g.id, g.name])),
  };
}
