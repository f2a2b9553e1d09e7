import {
  Kysely,
  type MigrationResult,
  Migrator,
  PostgresDialect,
  type PostgresPool,
  type PostgresPoolClient,
} from 'kysely';
import pg from 'pg';
import { LookupCache, writtenTables } from './lookup-cache.js';
import { migrations } from './migrations/index.js';
import { listenForRowChanges } from './row-change-listener.js';
import type { DB } from './schema.js';

export type Db = Kysely<DB>;

export interface Database {
  db: Db;
  kind: 'embedded' | 'postgres';
  /** The server's `postgres://` URL (`?host=` names a socket directory), for connections of their own. */
  url: string;
  /** Lookups kept in process (src/db/lookup-cache.ts); absent when opened with `lookups: false`. */
  lookups?: LookupCache;
  /** Resolves once the lookup cache hears of every change (its LISTEN is in place). */
  listening: Promise<void>;
  /** Statements sent through the pool so far (tests count them per request). */
  queries(): number;
  close(): Promise<void>;
}

const INT8_OID = 20;
const DATE_OID = 1082;

// int8 (count(*)) as a number, dates as the `YYYY-MM-DD` text PostgreSQL sends (pg would
// otherwise build a local-time Date).
pg.types.setTypeParser(INT8_OID, (value: string) => Number(value));
pg.types.setTypeParser(DATE_OID, (value: string) => value);

/** `target` with another database of the same server. */
export function withDatabase(databaseUrl: string, database: string): string {
  const url = new URL(databaseUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** Opens PostgreSQL (external or embedded) through a `pg` pool. */
export function openPostgres(
  url: string,
  options: { maxConnections?: number | undefined; kind?: Database['kind']; lookups?: boolean } = {},
): Database {
  const pool = new pg.Pool({ connectionString: url, max: options.maxConnections ?? 10 });
  // An idle client's connection can die (server restart, DROP DATABASE ... FORCE); pg-pool then
  // emits 'error' on the pool, which crashes the process unless handled. The pool replaces it.
  pool.on('error', () => {});
  // pg-pool listens for errors only while a client is idle: a client checked out between two
  // queries (a transaction waiting on git, a job holding its connection) that loses its
  // connection emits 'error' with no listener, and the process dies. Its next query fails
  // instead (the request answers 500), and the pool drops it when it is released.
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  const lookups = options.lookups === false ? undefined : new LookupCache();
  const listener = lookups ? listenForRowChanges(url, lookups) : undefined;
  const observed = new ObservedPool(pool, (table) => lookups?.invalidate(table));
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: observed }) });
  return {
    db,
    kind: options.kind ?? 'postgres',
    url,
    ...(lookups ? { lookups } : {}),
    listening: listener?.ready ?? Promise.resolve(),
    queries: () => observed.queries,
    close: async () => {
      await listener?.close();
      await db.destroy();
    },
  };
}

/**
 * The pool as Kysely sees it, counting statements and telling `onCommit` which watched tables
 * a statement wrote once it is committed: at once outside a transaction, at COMMIT inside one.
 * This is how the process that makes a change forgets its stale lookups before it answers,
 * ahead of the trigger's notice.
 */
class ObservedPool implements PostgresPool {
  queries = 0;

  constructor(
    private readonly pool: pg.Pool,
    private readonly onCommit: (table: string) => void,
  ) {}

  async connect(): Promise<PostgresPoolClient> {
    const client = await this.pool.connect();
    let inTransaction = false;
    const pending = new Set<string>();
    const observed = {
      query: (text: unknown, parameters?: readonly unknown[]) => {
        if (typeof text !== 'string') return client.query(text as never);
        this.queries += 1;
        const head = text.trimStart().slice(0, 20).toLowerCase();
        const tables = writtenTables(text);
        const result = client.query(text, parameters as unknown[]);
        return result.then((value) => {
          if (head.startsWith('begin') || head.startsWith('start transaction')) inTransaction = true;
          else if (head.startsWith('commit') || (head.startsWith('rollback') && !head.startsWith('rollback to'))) {
            if (head.startsWith('commit')) for (const table of pending) this.onCommit(table);
            pending.clear();
            inTransaction = false;
          } else if (inTransaction) for (const table of tables) pending.add(table);
          else for (const table of tables) this.onCommit(table);
          return value;
        });
      },
      release: () => {
        // A connection returned in the middle of a transaction is rolled back by whoever
        // reuses it; what it wrote is not committed.
        pending.clear();
        inTransaction = false;
        client.release();
      },
    };
    return observed as unknown as PostgresPoolClient;
  }

  end(): Promise<void> {
    return this.pool.end();
  }
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

/** PostgreSQL error code of a driver error. */
export function pgErrorCode(error: unknown): string | undefined {
  if (error && typeof error === 'object' && 'code' in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

export const UNIQUE_VIOLATION = '23505';
