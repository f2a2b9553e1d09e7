import type { Db } from '../db/database.js';
import type { StorageMove } from '../db/schema.js';
import { formatBytes, progressBar } from '../lib/progress-bar.js';
import { MOVE_STATE_NAMES, MoveState } from './moves.js';

const WATCH_POLL_MS = 250;
const PLAIN_LINE_MS = 2000;
const DONE_STATES: number[] = [MoveState.finished, MoveState.failed, MoveState.cleanupFailed];

export interface WatchOutcome {
  finished: number;
  failed: StorageMove[];
}

/**
 * Follows moves until each has ended, drawing one progress bar over all of them (redrawn in
 * place on a terminal, a line every few seconds otherwise) and a line per move as it ends.
 */
export async function watchMoves(
  db: Db,
  ids: number[],
  out: NodeJS.WriteStream,
  describe: (move: StorageMove) => string,
): Promise<WatchOutcome> {
  const reported = new Set<number>();
  const failed: StorageMove[] = [];
  let lastPlain = 0;
  let drawn = false;
  const clear = () => {
    if (drawn && out.isTTY) out.write('\r\x1b[2K');
    drawn = false;
  };
  for (;;) {
    const moves =
      ids.length === 0
        ? []
        : await db.selectFrom('repository_storage_moves').selectAll().where('id', 'in', ids).orderBy('id').execute();
    for (const move of moves) {
      if (!DONE_STATES.includes(move.state) || reported.has(move.id)) continue;
      reported.add(move.id);
      clear();
      const state = MOVE_STATE_NAMES[move.state];
      out.write(
        `${describe(move)}: ${move.source_storage_name} → ${move.destination_storage_name} ${state}` +
          `${move.error_message ? ` (${move.error_message})` : ''}, ${formatBytes(Number(move.bytes_total))}\n`,
      );
      if (move.state !== MoveState.finished) failed.push(move);
    }
    const total = moves.reduce((sum, m) => sum + Number(m.bytes_total), 0);
    const copied = moves.reduce(
      (sum, m) => sum + (m.state === MoveState.finished ? Number(m.bytes_total) : Number(m.bytes_copied)),
      0,
    );
    // Until a worker has measured a move, its size is unknown: show it as waiting, not as done.
    const measuring = moves.some((m) => m.state === MoveState.scheduled || Number(m.bytes_total) === 0);
    const line =
      measuring && copied === 0
        ? `waiting for a worker to start ${moves.length - reported.size} move(s)…`
        : `${progressBar(copied, total)}  ${reported.size}/${moves.length} moves done`;
    if (out.isTTY) {
      out.write(`\r\x1b[2K${line}`);
      drawn = true;
    } else if (Date.now() - lastPlain >= PLAIN_LINE_MS || reported.size === moves.length) {
      out.write(`${line}\n`);
      lastPlain = Date.now();
    }
    if (reported.size === moves.length) {
      if (out.isTTY) out.write('\n');
      return { finished: reported.size - failed.length, failed };
    }
    await new Promise((resolve) => setTimeout(resolve, WATCH_POLL_MS));
  }
}
