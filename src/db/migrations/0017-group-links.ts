import { type Kysely, sql } from 'kysely';

/** The link tables: their changes alter access levels, so they notify as `members` does. */
const TABLES = ['project_group_links', 'group_group_links'];

/**
 * Sharing: a project shared with a group (`project_group_links`) and a group shared with a
 * group (`group_group_links`). Members of the invited group, and of its ancestors, get the lower
 * of their own level and `group_access` on the shared project, or on the shared group and
 * everything below it, until `expires_at`. Rows go with either side (cascade). Every change
 * notifies `depot_row_change` (0008's function) so that cached access levels are forgotten.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('project_group_links')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('group_id', 'integer', (c) => c.notNull().references('namespaces.id').onDelete('cascade'))
    .addColumn('group_access', 'integer', (c) => c.notNull())
    .addColumn('expires_at', 'date')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addUniqueConstraint('project_group_links_pair', ['project_id', 'group_id'])
    .execute();
  await sql`CREATE INDEX project_group_links_group ON project_group_links (group_id)`.execute(db);
  await db.schema
    .createTable('group_group_links')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('shared_group_id', 'integer', (c) => c.notNull().references('namespaces.id').onDelete('cascade'))
    .addColumn('shared_with_group_id', 'integer', (c) => c.notNull().references('namespaces.id').onDelete('cascade'))
    .addColumn('group_access', 'integer', (c) => c.notNull())
    .addColumn('expires_at', 'date')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addUniqueConstraint('group_group_links_pair', ['shared_group_id', 'shared_with_group_id'])
    .execute();
  await sql`CREATE INDEX group_group_links_shared_with ON group_group_links (shared_with_group_id)`.execute(db);
  for (const table of TABLES) {
    await sql`
      CREATE TRIGGER ${sql.id(`${table}_row_change`)}
      AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${sql.table(table)}
      FOR EACH STATEMENT EXECUTE FUNCTION depot_notify_row_change()`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('group_group_links').execute();
  await db.schema.dropTable('project_group_links').execute();
}
