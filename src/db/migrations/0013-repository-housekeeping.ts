import type { Kysely } from 'kysely';

/**
 * Pushes since a project's repository was last garbage-collected (GitLab's
 * `project_statistics.pushes_since_gc`): the housekeeping periods count them. Kept apart from
 * `projects` so a push does not change the project row every process caches.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('repository_housekeeping')
    .addColumn('project_id', 'integer', (c) => c.primaryKey().references('projects.id').onDelete('cascade'))
    .addColumn('pushes_since_gc', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('repository_housekeeping').execute();
}
