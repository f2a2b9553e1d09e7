import path from 'node:path';
import pino from 'pino';
import type { Config } from './config.js';
import { type Database, migrateToLatest, openPglite, openPostgres } from './db/database.js';
import { systemClock } from './lib/clock.js';
import { acquireLock } from './lib/lock-file.js';
import type { Deps } from './services/deps.js';
import { clearLeftoverWrites } from './services/write-leases.js';
import { Storages } from './storage/storages.js';

/**
 * The server's logger: JSON lines on stdout, written synchronously like Node's own stdout on pipes
 * and files, so a crash (SIGKILL, OOM) does not take the last lines with it, which are the ones
 * that explain it. A line costs one write(2).
 */
export function createLogger(config: Pick<Config, 'logLevel'>): pino.Logger {
  return pino({ level: config.logLevel, base: { service: 'depot' } }, pino.destination({ fd: 1, sync: true }));
}

export interface Runtime {
  deps: Deps;
  database: Database;
  close(): Promise<void>;
}

/**
 * Opens what the server and the admin CLI share: the database (locked when embedded), the
 * storage roots, migrations brought up to date.
 */
export async function openRuntime(config: Config, options: { logger?: pino.Logger } = {}): Promise<Runtime> {
  const logger = options.logger ?? createLogger(config);
  let releaseLock: (() => void) | undefined;
  let database: Database;
  if (config.databaseUrl) {
    database = openPostgres(config.databaseUrl);
  } else {
    const dataDir = path.join(config.storageDir, 'db');
    releaseLock = acquireLock(`${dataDir}.lock`, `The embedded database ${dataDir}`);
    try {
      database = await openPglite(dataDir);
    } catch (error) {
      releaseLock();
      throw error;
    }
  }
  const storages = new Storages(config.repositoryStorages);
  storages.ensureRoots();
  await migrateToLatest(database.db);
  const deps: Deps = {
    config,
    db: database.db,
    clock: systemClock,
    logger,
    storages,
    projectCache: database.projectCache,
  };
  // The lock file makes this process the embedded database's only user: a write lease left in
  // it belongs to a process that crashed, and so do the ref locks its writes left.
  if (database.kind === 'pglite') {
    const cleared = await clearLeftoverWrites(deps);
    if (cleared > 0) logger.warn({ cleared }, 'removed write leases left by a stopped process');
  }
  return {
    deps,
    database,
    close: async () => {
      await database.close();
      releaseLock?.();
    },
  };
}
