import { type Kysely, sql } from 'kysely';

/**
 * A notice on channel `depot_row_change` (payload: the table) after every statement that
 * changes `projects` or `namespaces`, cascades and raw SQL included. Processes that cache those
 * rows listen on it (src/db/project-cache.ts); PostgreSQL sends it at commit, and drops it when
 * nobody listens.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION depot_notify_row_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('depot_row_change', TG_TABLE_NAME);
      RETURN NULL;
    END
    $$`.execute(db);
  for (const table of ['projects', 'namespaces']) {
    await sql`
      CREATE TRIGGER ${sql.id(`${table}_row_change`)}
      AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${sql.table(table)}
      FOR EACH STATEMENT EXECUTE FUNCTION depot_notify_row_change()`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['projects', 'namespaces']) {
    await sql`DROP TRIGGER ${sql.id(`${table}_row_change`)} ON ${sql.table(table)}`.execute(db);
  }
  await sql`DROP FUNCTION depot_notify_row_change()`.execute(db);
}
