import { sql } from 'kysely';
import { findProjectById } from '../db/queries/projects.js';
import { optimizeRepository } from '../git/maintenance.js';
import { enqueueJob } from '../jobs/queue.js';
import type { Deps } from './deps.js';
import { acquireWriteLease } from './write-leases.js';

export const REPOSITORY_MAINTENANCE_JOB = 'repository_maintenance';

/**
 * Queues upkeep of a project's repository after its refs changed (GitLab's post-receive asks for
 * housekeeping too). One queued job per project is enough: it works on the repository as it is
 * when it runs, however many pushes came before.
 */
export async function scheduleRepositoryMaintenance(deps: Deps, projectId: number): Promise<void> {
  const queued = await deps.db
    .selectFrom('jobs')
    .select('id')
    .where('kind', '=', REPOSITORY_MAINTENANCE_JOB)
    .where('state', '=', 'queued')
    .where(sql<boolean>`payload @> ${JSON.stringify({ project_id: projectId })}::jsonb`)
    .executeTakeFirst();
  if (!queued) await enqueueJob(deps.db, REPOSITORY_MAINTENANCE_JOB, { project_id: projectId });
}

/**
 * Packs and indexes a project's repository (optimizeRepository), under a write lease so a storage
 * move waits for it. Nothing to do when the project is gone or its repository is read-only
 * (moving: the next change after the move schedules upkeep again). Returns whether it wrote.
 */
export async function maintainRepository(deps: Deps, projectId: number): Promise<boolean> {
  const project = await findProjectById(deps.db, projectId);
  if (!project) return false;
  const lease = await acquireWriteLease(deps, project, 'maintenance');
  if (!lease) return false;
  try {
    await optimizeRepository(deps.storages.repositoryPath(project.repository_storage, project.id));
    return true;
  } finally {
    await lease.release();
  }
}
