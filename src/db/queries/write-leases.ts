import { sql } from 'kysely';
import type { Db } from '../database.js';

/**
 * Takes a write lease on the project's repository in one statement, only while the project is
 * writable and still on `storage` (the storage the writer's path is on). The project row is
 * read FOR SHARE, so a storage move's `UPDATE ... SET repository_read_only` either waits for
 * this lease to be committed (and the move then sees it) or has committed first (and no lease
 * is taken). Returns the lease id, or undefined when the repository is read-only or moved.
 */
export async function insertWriteLease(
  db: Db,
  lease: { projectId: number; storage: string; holder: string; kind: string },
): Promise<number | undefined> {
  const row = await db
    .insertInto('repository_write_leases')
    .columns(['project_id', 'holder', 'kind'])
    .expression(
      db
        .selectFrom('projects')
        .select((eb) => ['id', eb.val(lease.holder).as('holder'), eb.val(lease.kind).as('kind')])
        .where('id', '=', lease.projectId)
        .where('repository_read_only', '=', false)
        .where('repository_storage', '=', lease.storage)
        .forShare(),
    )
    .returning('id')
    .executeTakeFirst();
  return row?.id;
}

/** Keeps a lease alive while its write runs. */
export async function renewWriteLease(db: Db, id: number): Promise<void> {
  await db
    .updateTable('repository_write_leases')
    .set({ heartbeat_at: sql<Date>`now()` })
    .where('id', '=', id)
    .execute();
}

/** Ends a lease by its holder, unique to one acquisition (so a lease whose insert answer was lost can end too). */
export async function deleteWriteLease(db: Db, holder: string): Promise<void> {
  await db.deleteFrom('repository_write_leases').where('holder', '=', holder).execute();
}

/** The project's leases with the seconds since each was last renewed (by the database's clock). */
export async function projectWriteLeases(db: Db, projectId: number) {
  return db
    .selectFrom('repository_write_leases')
    .select(['id', 'holder', 'kind', sql<number>`extract(epoch from now() - heartbeat_at)::float8`.as('idle_seconds')])
    .where('project_id', '=', projectId)
    .orderBy('id')
    .execute();
}

export async function deleteWriteLeases(db: Db, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await db.deleteFrom('repository_write_leases').where('id', 'in', ids).execute();
}

/** Removes every lease: only for a process that alone owns the database (embedded PGlite at start). */
/** Every lease's project and its storage, one row per project. */
export async function leftoverWriteLeases(db: Db) {
  return db
    .selectFrom('repository_write_leases')
    .innerJoin('projects', 'projects.id', 'repository_write_leases.project_id')
    .select(['projects.id as project_id', 'projects.repository_storage'])
    .distinct()
    .execute();
}

export async function deleteAllWriteLeases(db: Db): Promise<number> {
  const result = await db.deleteFrom('repository_write_leases').executeTakeFirst();
  return Number(result.numDeletedRows);
}
