import { type Kysely, sql } from 'kysely';

/** GitLab's eight package file size limits (bytes) with its defaults. */
const PLAN_LIMITS: [string, number][] = [
  ['conan_max_file_size', 3221225472],
  ['generic_packages_max_file_size', 5368709120],
  ['helm_max_file_size', 5242880],
  ['maven_max_file_size', 3221225472],
  ['npm_max_file_size', 524288000],
  ['nuget_max_file_size', 524288000],
  ['pypi_max_file_size', 3221225472],
  ['terraform_module_max_file_size', 1073741824],
];

/** Tables whose changes every server process hears of (src/db/lookup-cache.ts). */
const NOTIFYING = ['application_settings', 'plan_limits'];

/**
 * Plan limits (one row per plan once changed; the defaults otherwise), the audit trail of
 * instance changes, and notices on `depot_row_change` for settings and plan limits so that
 * every process's cached copy is dropped when any process changes them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  let table = db.schema.createTable('plan_limits').addColumn('plan_name', 'text', (c) => c.primaryKey());
  for (const [name, fallback] of PLAN_LIMITS) {
    table = table.addColumn(name, 'bigint', (c) => c.notNull().defaultTo(fallback));
  }
  await table
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('audit_events')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    // No foreign key: the trail outlives the users it names (GitLab keeps author_id too).
    .addColumn('author_id', 'integer')
    .addColumn('entity_id', 'integer', (c) => c.notNull())
    .addColumn('entity_type', 'text', (c) => c.notNull())
    .addColumn('event_name', 'text', (c) => c.notNull())
    .addColumn('details', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('audit_events_created_at').on('audit_events').columns(['created_at', 'id']).execute();

  for (const name of NOTIFYING) {
    await sql`
      CREATE TRIGGER ${sql.id(`${name}_row_change`)}
      AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${sql.table(name)}
      FOR EACH STATEMENT EXECUTE FUNCTION depot_notify_row_change()`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const name of NOTIFYING) {
    await sql`DROP TRIGGER ${sql.id(`${name}_row_change`)} ON ${sql.table(name)}`.execute(db);
  }
  await db.schema.dropTable('audit_events').execute();
  await db.schema.dropTable('plan_limits').execute();
}
