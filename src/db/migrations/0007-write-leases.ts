import { type Kysely, sql } from 'kysely';

/**
 * Write leases: one row per repository write under way (a push, an API commit, an LFS upload),
 * GitLab's reference counter of git transfers made durable. A storage move waits until its
 * project has none that is alive before it copies.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('repository_write_leases')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    // `<host>:<pid>:<nonce>` of the process writing, so a lease of a dead process can be told apart.
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('acquired_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    // Renewed while the write runs; a lease not renewed for long is stale (its holder is gone).
    .addColumn('heartbeat_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE INDEX repository_write_leases_project ON repository_write_leases (project_id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('repository_write_leases').execute();
}
