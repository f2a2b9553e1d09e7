import { type Kysely, sql } from 'kysely';

/** LFS objects (content lives on the storage under `@lfs/`), and fixed-window rate-limit counters. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('lfs_objects')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('oid', 'text', (c) => c.notNull().unique())
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('lfs_objects_projects')
    .addColumn('lfs_object_id', 'integer', (c) => c.notNull().references('lfs_objects.id').onDelete('cascade'))
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('lfs_objects_projects_pkey', ['project_id', 'lfs_object_id'])
    .execute();

  // One row per (limit, scope): the current window's start and its hit count.
  await db.schema
    .createTable('rate_limit_counters')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('window_started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('hits', 'integer', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['rate_limit_counters', 'lfs_objects_projects', 'lfs_objects']) {
    await db.schema.dropTable(table).execute();
  }
}
