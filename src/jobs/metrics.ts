import { countMovesByState, movesInStates } from '../db/queries/storage-moves.js';
import type { Metrics } from '../http/metrics.js';
import type { Deps } from '../services/deps.js';
import { MoveState } from '../storage/moves.js';
import { queueDepth } from './queue.js';

/** Machine names for metric labels (the API's `cleanup failed` has a space). */
const STATE_LABELS: Record<number, string> = {
  1: 'initial',
  2: 'scheduled',
  3: 'started',
  4: 'finished',
  5: 'failed',
  6: 'replicated',
  7: 'cleanup_failed',
};

/**
 * Job queue depth and storage move states and progress, read from the database when scraped
 * (so every server process reports the same, whichever one runs the job).
 */
export function registerJobMetrics(metrics: Metrics, deps: Deps): void {
  metrics.addGauge(
    'depot_jobs',
    'Background jobs waiting or running, by kind and state',
    ['kind', 'state'],
    async (g) => {
      g.reset();
      for (const row of await queueDepth(deps.db)) g.set({ kind: row.kind, state: row.state }, row.count);
    },
  );
  metrics.addGauge(
    'depot_repository_storage_moves',
    'Repository storage moves by container type and state',
    ['container_type', 'state'],
    async (g) => {
      g.reset();
      for (const row of await countMovesByState(deps.db)) {
        g.set({ container_type: row.container_type, state: STATE_LABELS[row.state] ?? 'unknown' }, row.n);
      }
    },
  );
  const running = () => movesInStates(deps.db, [MoveState.started]);
  const labels = ['move_id', 'container_type', 'container_id', 'source', 'destination'];
  const labelsOf = (m: Awaited<ReturnType<typeof running>>[number]) => ({
    move_id: String(m.id),
    container_type: m.container_type,
    container_id: String(m.container_id),
    source: m.source_storage_name,
    destination: m.destination_storage_name,
  });
  metrics.addGauge(
    'depot_repository_storage_move_bytes_copied',
    'Bytes copied so far by each running repository storage move',
    labels,
    async (g) => {
      g.reset();
      for (const m of await running()) g.set(labelsOf(m), Number(m.bytes_copied));
    },
  );
  metrics.addGauge(
    'depot_repository_storage_move_bytes_total',
    'Bytes each running repository storage move has to copy',
    labels,
    async (g) => {
      g.reset();
      for (const m of await running()) g.set(labelsOf(m), Number(m.bytes_total));
    },
  );
}
