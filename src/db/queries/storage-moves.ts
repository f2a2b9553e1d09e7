import { sql } from 'kysely';
import type { Db } from '../database.js';
import type { StorageMove, StorageMoveContainer } from '../schema.js';
import { countUpTo } from './count.js';

/** States of a move that still own the repository (no second move may start). */
export const ACTIVE_MOVE_STATES = [1, 2, 3, 6] as const;

export async function findMove(db: Db, id: number): Promise<StorageMove | undefined> {
  return db.selectFrom('repository_storage_moves').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findMoveOf(
  db: Db,
  type: StorageMoveContainer,
  id: number,
  containerId?: number,
): Promise<StorageMove | undefined> {
  let q = db.selectFrom('repository_storage_moves').selectAll().where('id', '=', id).where('container_type', '=', type);
  if (containerId !== undefined) q = q.where('container_id', '=', containerId);
  return q.executeTakeFirst();
}

export interface MoveFilter {
  type: StorageMoveContainer;
  containerId?: number;
}

/** Newest first (GitLab's order_created_at_desc), id as the tie-breaker. */
export async function listMoves(db: Db, f: MoveFilter, window: { limit: number; offset: number }) {
  let q = db.selectFrom('repository_storage_moves').selectAll().where('container_type', '=', f.type);
  if (f.containerId !== undefined) q = q.where('container_id', '=', f.containerId);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(window.limit).offset(window.offset).execute();
}

export async function countMoves(db: Db, f: MoveFilter, cap: number): Promise<number> {
  let q = db.selectFrom('repository_storage_moves').select('id').where('container_type', '=', f.type);
  if (f.containerId !== undefined) q = q.where('container_id', '=', f.containerId);
  return countUpTo(db, q, cap);
}

/** Moves in one of `states`, oldest first. */
export async function movesInStates(db: Db, states: readonly number[]): Promise<StorageMove[]> {
  return db
    .selectFrom('repository_storage_moves')
    .selectAll()
    .where('state', 'in', [...states])
    .orderBy('id')
    .execute();
}

/** Moves by state and container type, for /-/metrics. */
export async function countMovesByState(db: Db): Promise<{ container_type: string; state: number; n: number }[]> {
  const rows = await db
    .selectFrom('repository_storage_moves')
    .select(['container_type', 'state', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy(['container_type', 'state'])
    .execute();
  return rows.map((r) => ({ container_type: r.container_type, state: Number(r.state), n: Number(r.n) }));
}

/** Records progress without touching the state. */
export async function setMoveProgress(
  db: Db,
  id: number,
  progress: { step?: string; bytesTotal?: number; bytesCopied?: number },
): Promise<void> {
  await db
    .updateTable('repository_storage_moves')
    .set({
      ...(progress.step !== undefined ? { step: progress.step } : {}),
      ...(progress.bytesTotal !== undefined ? { bytes_total: progress.bytesTotal } : {}),
      ...(progress.bytesCopied !== undefined ? { bytes_copied: progress.bytesCopied } : {}),
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .execute();
}

/** Compare-and-set of a move's state; true when this call made the transition. */
export async function transitionMove(
  db: Db,
  id: number,
  from: readonly number[],
  to: number,
  extra: { error_message?: string | null; step?: string | null } = {},
): Promise<boolean> {
  const result = await db
    .updateTable('repository_storage_moves')
    .set({ state: to, updated_at: sql<Date>`now()`, ...extra })
    .where('id', '=', id)
    .where('state', 'in', [...from])
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** The project's LFS objects: oid and size. */
export async function projectLfsObjects(db: Db, projectId: number): Promise<{ oid: string; size: number }[]> {
  const rows = await db
    .selectFrom('lfs_objects')
    .innerJoin('lfs_objects_projects', 'lfs_objects_projects.lfs_object_id', 'lfs_objects.id')
    .select(['lfs_objects.oid', 'lfs_objects.size'])
    .where('lfs_objects_projects.project_id', '=', projectId)
    .orderBy('lfs_objects.oid')
    .execute();
  return rows.map((r) => ({ oid: r.oid, size: Number(r.size) }));
}

/**
 * Which of `oids` another project still needs on `storage`: a project stored there, or a project
 * with a move in flight to it (except `exceptMoveId`).
 */
export async function lfsOidsNeededOn(
  db: Db,
  storage: string,
  oids: string[],
  exceptProjectId: number,
  exceptMoveId: number,
): Promise<Set<string>> {
  if (oids.length === 0) return new Set();
  const rows = await db
    .selectFrom('lfs_objects')
    .innerJoin('lfs_objects_projects', 'lfs_objects_projects.lfs_object_id', 'lfs_objects.id')
    .innerJoin('projects', 'projects.id', 'lfs_objects_projects.project_id')
    .select('lfs_objects.oid')
    .where('lfs_objects.oid', 'in', oids)
    .where('projects.id', '!=', exceptProjectId)
    .where((eb) =>
      eb.or([
        eb('projects.repository_storage', '=', storage),
        eb.exists(
          eb
            .selectFrom('repository_storage_moves as m')
            .select('m.id')
            .whereRef('m.container_id', '=', 'projects.id')
            .where('m.container_type', '=', 'project')
            .where('m.id', '!=', exceptMoveId)
            .where('m.destination_storage_name', '=', storage)
            .where('m.state', 'in', [...ACTIVE_MOVE_STATES]),
        ),
      ]),
    )
    .execute();
  return new Set(rows.map((r) => r.oid));
}
