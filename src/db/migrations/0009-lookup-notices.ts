import { type Kysely, sql } from 'kysely';

/** The tables behind the lookups kept in process (src/db/lookup-cache.ts) besides 0008's. */
const TABLES = ['users', 'personal_access_tokens', 'oauth_access_tokens', 'members'];

/**
 * Every change to users, tokens and memberships notifies `depot_row_change` (0008's function,
 * payload: the table), as changes to projects and namespaces already do, so that every server
 * process forgets what it kept of them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  for (const table of TABLES) {
    await sql`
      CREATE TRIGGER ${sql.id(`${table}_row_change`)}
      AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${sql.table(table)}
      FOR EACH STATEMENT EXECUTE FUNCTION depot_notify_row_change()`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of TABLES) {
    await sql`DROP TRIGGER ${sql.id(`${table}_row_change`)} ON ${sql.table(table)}`.execute(db);
  }
}
