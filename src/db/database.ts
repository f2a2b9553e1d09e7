import fs from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, type MigrationResult, Migrator, PostgresDialect } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import pg from 'pg';
import { migrations } from './migrations/index.js';
import { ProjectCache } from './project-cache.js';
import type { DB } from './schema.js';

export type Db = Kysely<DB>;

export interface Database {
  db: Db;
  kind: 'pglite' | 'postgres';
  /** The embedded instance (PGlite only), for snapshots. */
  pglite?: PGlite;
  /** Project rows kept in process (PGlite only: its queries run on the event loop). */
  projectCache?: ProjectCache;
  close(): Promise<void>;
}

const INT8_OID = 20;
const DATE_OID = 1082;

// Both drivers must hand back the same JS types: int8 (count(*)) as a number, dates as the
// `YYYY-MM-DD` text PostgreSQL sends (pg would otherwise build a local-time Date).
pg.types.setTypeParser(INT8_OID, (value: string) => Number(value));
pg.types.setTypeParser(DATE_OID, (value: string) => value);
const PGLITE_PARSERS = {
  [INT8_OID]: (value: string) => Number(value),
  [DATE_OID]: (value: string) => value,
};

/** Opens PostgreSQL through `pg`. */
export function openPostgres(connectionString: string, maxConnections = 10): Database {
  const pool = new pg.Pool({ connectionString, max: maxConnections });
  // An idle client's connection can die (server restart, DROP DATABASE ... FORCE); pg-pool then
  // emits 'error' on the pool, which crashes the process unless handled. The pool replaces it.
  pool.on('error', () => {});
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return { db, kind: 'postgres', close: () => db.destroy() };
}

/** Opens an embedded PGlite database in `dataDir` (created if needed), or from a snapshot. */
export async function openPglite(dataDir: string | undefined, options: { loadDataDir?: Blob } = {}): Promise<Database> {
  if (dataDir) fs.mkdirSync(path.dirname(dataDir), { recursive: true });
  const pglite = await PGlite.create({
    ...(dataDir ? { dataDir } : {}),
    ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
    parsers: PGLITE_PARSERS,
  });
  const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
  const projectCache = new ProjectCache();
  await pglite.listen('depot_row_change', () => projectCache.invalidate());
  return {
    db,
    kind: 'pglite',
    pglite,
    projectCache,
    close: async () => {
      await db.destroy();
      if (!pglite.closed) await pglite.close();
    },
  };
}

export class MigrationError extends Error {}

/** Brings the schema up to date; throws with the failing migration's name. */
export async function migrateToLatest(db: Kysely<unknown> | Db): Promise<MigrationResult[]> {
  const migrator = new Migrator({
    db: db as Kysely<unknown>,
    provider: { getMigrations: async () => migrations },
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new MigrationError(
      `migration ${failed?.migrationName ?? '(unknown)'} failed: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return results ?? [];
}

/** PostgreSQL error code of a driver error (pg and PGlite both set `code`). */
export function pgErrorCode(error: unknown): string | undefined {
  if (error && typeof error === 'object' && 'code' in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

export const UNIQUE_VIOLATION = '23505';
