import { type Kysely, sql } from 'kysely';

/**
 * Environments and deployments (issue 20): an environment per project and name (GitLab's
 * environments table, with its slug, state, auto-stop and scheduled-deletion times) and the
 * deployments made to it, by CI jobs (deployable_id) or through the API.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('environments')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('slug', 'text', (c) => c.notNull())
    .addColumn('external_url', 'text')
    .addColumn('state', 'text', (c) => c.notNull().defaultTo('available'))
    .addColumn('tier', 'text', (c) => c.notNull().defaultTo('other'))
    .addColumn('description', 'text')
    .addColumn('auto_stop_at', 'timestamptz')
    .addColumn('auto_delete_at', 'timestamptz')
    // The stop job whose end was last applied: processPipeline runs again whenever any job of a
    // pipeline moves, and an old stop job must not act twice.
    .addColumn('last_stop_build_id', 'integer')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('environments_project_name', ['project_id', 'name'])
    .addUniqueConstraint('environments_project_slug', ['project_id', 'slug'])
    .execute();
  // The recurring jobs scan only environments that are due.
  await sql`CREATE INDEX environments_auto_stop ON environments (auto_stop_at) WHERE auto_stop_at IS NOT NULL`.execute(
    db,
  );
  await sql`CREATE INDEX environments_auto_delete ON environments (auto_delete_at) WHERE auto_delete_at IS NOT NULL`.execute(
    db,
  );

  await db.schema
    .createTable('deployments')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('iid', 'integer', (c) => c.notNull())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('environment_id', 'integer', (c) => c.notNull().references('environments.id').onDelete('cascade'))
    .addColumn('ref', 'text', (c) => c.notNull())
    .addColumn('tag', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('sha', 'text', (c) => c.notNull())
    .addColumn('user_id', 'integer', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('deployable_id', 'integer', (c) => c.unique().references('ci_builds.id').onDelete('set null'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('on_stop', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .addUniqueConstraint('deployments_project_iid', ['project_id', 'iid'])
    .execute();
  await db.schema.createIndex('deployments_environment').on('deployments').columns(['environment_id', 'id']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('deployments').execute();
  await db.schema.dropTable('environments').execute();
}
