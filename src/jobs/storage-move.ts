import { findMove } from '../db/queries/storage-moves.js';
import type { StorageMoveContainer } from '../db/schema.js';
import {
  BULK_STORAGE_MOVE_JOB,
  failMove,
  MoveInterrupted,
  requeueOrphanedMoves,
  runMove,
  STORAGE_MOVE_JOB,
  scheduleBulkMoves,
} from '../storage/moves.js';
import { JobInterrupted, type JobKind } from './worker.js';

/** Runs one repository storage move; re-running it after a crash resumes or rolls back. */
export const storageMoveJob: JobKind = {
  kind: STORAGE_MOVE_JOB,
  async run(ctx) {
    const moveId = Number(ctx.job.payload.move_id);
    try {
      await runMove(ctx.deps, moveId, { log: ctx.log, attempt: ctx.attempt, signal: ctx.signal });
    } catch (error) {
      if (error instanceof MoveInterrupted) throw new JobInterrupted();
      throw error;
    }
  },
  async giveUp(ctx, reason) {
    const move = await findMove(ctx.deps.db, Number(ctx.job.payload.move_id));
    if (move) await failMove(ctx.deps, move, `The move was interrupted too often (${reason})`, ctx.log);
  },
  recover: (deps) => requeueOrphanedMoves(deps),
};

/** Schedules a move for every repository on a storage (POST /<type>_repository_storage_moves). */
export const bulkStorageMoveJob: JobKind = {
  kind: BULK_STORAGE_MOVE_JOB,
  async run(ctx) {
    const { type, source, destination } = ctx.job.payload as {
      type: StorageMoveContainer;
      source: string;
      destination: string | null;
    };
    const moves = await scheduleBulkMoves(ctx.deps, type, source, destination ?? undefined, ctx.log);
    ctx.log.info({ type, source, destination, scheduled: moves.length }, 'bulk repository storage moves scheduled');
  },
};
