import path from 'node:path';
import pino from 'pino';
import type { Config } from './config.js';
import { type Database, migrateToLatest, openPostgres } from './db/database.js';
import { runningEmbeddedUrl, startEmbeddedPostgres } from './db/embedded-postgres.js';
import { systemClock } from './lib/clock.js';
import { acquireLock, LockedError } from './lib/lock-file.js';
import type { Deps } from './services/deps.js';
import { clearLeftoverWrites } from './services/write-leases.js';
import { Storages } from './storage/storages.js';

/**
 * The server's logger: JSON lines on stdout, written synchronously like Node's own stdout on pipes
 * and files, so a crash (SIGKILL, OOM) does not take the last lines with it, which are the ones
 * that explain it. A line costs one write(2).
 */
export function createLogger(config: Pick<Config, 'logLevel'>, fd = 1): pino.Logger {
  return pino(
    { level: config.logLevel, base: { service: 'depot', pid: process.pid } },
    pino.destination({ fd, sync: true }),
  );
}

export interface Runtime {
  deps: Deps;
  database: Database;
  /**
   * True when this process started the embedded database and holds its lock: no other server
   * process uses it, so running jobs and write leases found at start belong to a dead one.
   */
  owner: boolean;
  close(): Promise<void>;
}

export interface RuntimeOptions {
  logger?: pino.Logger;
  /** Connections in this process's pool. */
  maxConnections?: number;
  /**
   * The database URL of the embedded server that the primary process runs (the server
   * processes of WORKERS): no lock, no start, no migration.
   */
  attach?: string;
  /**
   * When another process holds the embedded database (a running server), use its server
   * instead of refusing (the admin CLI beside `npm start`).
   */
  shareRunning?: boolean;
}

/** Starts the embedded server under the lock, or reaches the running one of another process. */
async function openEmbedded(config: Config, logger: pino.Logger, options: RuntimeOptions) {
  const storageDir = config.storageDir;
  let releaseLock: () => void;
  try {
    releaseLock = acquireLock(path.join(storageDir, 'db.lock'), `The embedded database in ${storageDir}`);
  } catch (error) {
    // The admin CLI next to a running server uses that server's database.
    const running = error instanceof LockedError && options.shareRunning ? runningEmbeddedUrl(storageDir) : undefined;
    if (!running) throw error;
    return { database: openPostgres(running, { kind: 'embedded', maxConnections: 2 }), owner: false };
  }
  try {
    const server = await startEmbeddedPostgres({
      storageDir,
      onNotice: (message) => logger.warn(message),
    });
    const database = openPostgres(server.url, { kind: 'embedded', maxConnections: options.maxConnections });
    const close = database.close;
    database.close = async () => {
      await close();
      await server.stop();
      releaseLock();
    };
    return { database, owner: true };
  } catch (error) {
    releaseLock();
    throw error;
  }
}

/**
 * Opens what the server and the admin CLI share: the database (the embedded server started and
 * locked, unless another process of this storage runs it), the storage roots, migrations brought
 * up to date.
 */
export async function openRuntime(config: Config, options: RuntimeOptions = {}): Promise<Runtime> {
  const logger = options.logger ?? createLogger(config);
  let database: Database;
  let owner = false;
  if (options.attach !== undefined) {
    database = openPostgres(options.attach, {
      kind: config.databaseUrl ? 'postgres' : 'embedded',
      maxConnections: options.maxConnections,
    });
  } else if (config.databaseUrl) {
    database = openPostgres(config.databaseUrl, { maxConnections: options.maxConnections });
  } else {
    ({ database, owner } = await openEmbedded(config, logger, options));
  }
  try {
    const storages = new Storages(config.repositoryStorages);
    storages.ensureRoots();
    if (options.attach === undefined) await migrateToLatest(database.db);
    await database.listening;
    const deps: Deps = { config, db: database.db, clock: systemClock, logger, storages, lookups: database.lookups };
    // This process alone uses the embedded database: a write lease left in it belongs to a
    // process that crashed, and so do the ref locks its writes left.
    if (owner) {
      const cleared = await clearLeftoverWrites(deps);
      if (cleared > 0) logger.warn({ cleared }, 'removed write leases left by a stopped process');
    }
    return { deps, database, owner, close: () => database.close() };
  } catch (error) {
    await database.close();
    throw error;
  }
}
