import { sql } from 'kysely';
import { findProjectById } from '../db/queries/projects.js';
import { HOUSEKEEPING_TASKS, type HousekeepingTask, optimizeRepository } from '../git/maintenance.js';
import { enqueueJob } from '../jobs/queue.js';
import { getApplicationSettings } from './application-settings.js';
import type { Deps } from './deps.js';
import { acquireWriteLease } from './write-leases.js';

export const REPOSITORY_MAINTENANCE_JOB = 'repository_maintenance';

interface HousekeepingPeriods {
  incremental: number;
  full: number;
  gc: number;
}

/**
 * The task GitLab's HousekeepingService picks for the `pushes`-th push since the last gc: `gc`
 * every gc period, a full repack every full period, an incremental one every incremental period.
 * Between them Depot still runs git's own heuristics (`gc --auto`) and updates the commit-graph.
 */
export function housekeepingTask(pushes: number, periods: HousekeepingPeriods): HousekeepingTask {
  if (pushes % periods.gc === 0) return 'gc';
  if (pushes % periods.full === 0) return 'full_repack';
  if (pushes % periods.incremental === 0) return 'incremental_repack';
  return 'heuristic';
}

const stronger = (a: HousekeepingTask, b: HousekeepingTask) =>
  HOUSEKEEPING_TASKS.indexOf(a) >= HOUSEKEEPING_TASKS.indexOf(b) ? a : b;

const taskOf = (payload: unknown): HousekeepingTask => {
  const task = (payload as { task?: unknown } | null)?.task;
  return HOUSEKEEPING_TASKS.includes(task as HousekeepingTask) ? (task as HousekeepingTask) : 'heuristic';
};

/**
 * Queues upkeep of a project's repository after its refs changed (GitLab's post-receive asks for
 * housekeeping too), unless `housekeeping_enabled` is off. Each call counts a push; the
 * `housekeeping_*_period` settings then choose the task (housekeepingTask), and the count starts
 * again once it reaches the gc period. One queued job per project is enough: it works on the
 * repository as it is when it runs, with the most thorough task any push since asked for.
 */
export async function scheduleRepositoryMaintenance(deps: Deps, projectId: number): Promise<void> {
  const { values } = await getApplicationSettings(deps);
  if (values.housekeeping_enabled === false) return;
  const periods: HousekeepingPeriods = {
    incremental: Math.max(1, Number(values.housekeeping_incremental_repack_period)),
    full: Math.max(1, Number(values.housekeeping_full_repack_period)),
    gc: Math.max(1, Number(values.housekeeping_gc_period)),
  };
  await deps.db.transaction().execute(async (trx) => {
    const counted = await trx
      .insertInto('repository_housekeeping')
      .values({ project_id: projectId, pushes_since_gc: 1 })
      .onConflict((oc) =>
        oc.column('project_id').doUpdateSet({ pushes_since_gc: sql`repository_housekeeping.pushes_since_gc + 1` }),
      )
      .returning('pushes_since_gc')
      .executeTakeFirstOrThrow();
    const pushes = counted.pushes_since_gc;
    const task = housekeepingTask(pushes, periods);
    if (pushes >= periods.gc) {
      await trx
        .updateTable('repository_housekeeping')
        .set({ pushes_since_gc: 0 })
        .where('project_id', '=', projectId)
        .execute();
    }
    const queued = await trx
      .selectFrom('jobs')
      .select(['id', 'payload'])
      .where('kind', '=', REPOSITORY_MAINTENANCE_JOB)
      .where('state', '=', 'queued')
      .where(sql<boolean>`payload @> ${JSON.stringify({ project_id: projectId })}::jsonb`)
      .forUpdate()
      .executeTakeFirst();
    if (!queued) {
      await enqueueJob(trx, REPOSITORY_MAINTENANCE_JOB, { project_id: projectId, task });
    } else if (stronger(task, taskOf(queued.payload)) !== taskOf(queued.payload)) {
      await trx
        .updateTable('jobs')
        .set({ payload: JSON.stringify({ project_id: projectId, task }) })
        .where('id', '=', queued.id)
        .execute();
    }
  });
}

/**
 * Packs and indexes a project's repository (optimizeRepository) as `task` says, bitmaps as
 * `housekeeping_bitmaps_enabled` says, under a write lease so a storage move waits for it.
 * Nothing to do when housekeeping was turned off since, the project is gone or its repository is
 * read-only (moving: the next change after the move schedules upkeep again). Returns whether it
 * wrote.
 */
export async function maintainRepository(
  deps: Deps,
  projectId: number,
  task: HousekeepingTask = 'heuristic',
): Promise<boolean> {
  const { values } = await getApplicationSettings(deps);
  if (values.housekeeping_enabled === false) return false;
  const project = await findProjectById(deps.db, projectId);
  if (!project) return false;
  const lease = await acquireWriteLease(deps, project, 'maintenance');
  if (!lease) return false;
  try {
    await optimizeRepository(deps.storages.repositoryPath(project.repository_storage, project.id), {
      task,
      bitmaps: values.housekeeping_bitmaps_enabled !== false,
    });
    return true;
  } finally {
    await lease.release();
  }
}

/** The task a queued job's payload names (`heuristic` for jobs queued before tasks existed). */
export const payloadTask = taskOf;
