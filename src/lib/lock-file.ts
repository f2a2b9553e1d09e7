import fs from 'node:fs';
import path from 'node:path';
import { processAlive } from './process-alive.js';

export class LockedError extends Error {}

/**
 * Takes an exclusive lock file holding this process id. A lock left by a process that is gone
 * is taken over; a live holder → LockedError. The lock is written to a temporary file and
 * hard-linked into place, so two starters cannot both win.
 */
export function acquireLock(lockPath: string, what: string): () => void {
  fs.mkdirSync(path.dirname(lockPath), { recursive: true });
  const temp = `${lockPath}.${process.pid}.tmp`;
  fs.writeFileSync(temp, `${process.pid}\n`, { mode: 0o600 });
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        fs.linkSync(temp, lockPath);
        return () => {
          try {
            if (fs.readFileSync(lockPath, 'utf8').trim() === String(process.pid)) fs.unlinkSync(lockPath);
          } catch {
            // Already gone.
          }
        };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        const holder = Number.parseInt(fs.readFileSync(lockPath, 'utf8'), 10);
        if (Number.isInteger(holder) && holder !== process.pid && processAlive(holder)) {
          throw new LockedError(
            `${what} is already in use by process ${holder} (lock file ${lockPath}). ` +
              'Only one Depot server may run on a storage directory; stop the other one, or set WORKERS ' +
              'to run several server processes.',
          );
        }
        fs.unlinkSync(lockPath); // stale: its process is gone
      }
    }
    throw new LockedError(`could not take the lock ${lockPath}`);
  } finally {
    fs.rmSync(temp, { force: true });
  }
}
