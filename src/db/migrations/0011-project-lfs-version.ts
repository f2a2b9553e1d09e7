import { type Kysely, sql } from 'kysely';

/**
 * A version of each project's set of LFS objects, raised with every object linked to it: what an
 * archive with LFS objects depends on, read with the project row instead of a query of its own
 * on every archive request (its ETag and its cache key).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('projects')
    .addColumn('lfs_objects_version', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`UPDATE projects SET lfs_objects_version =
    (SELECT count(*) FROM lfs_objects_projects l WHERE l.project_id = projects.id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('projects').dropColumn('lfs_objects_version').execute();
}
