import { type Kysely, sql } from 'kysely';

/**
 * Indexes for the event feeds and their retention. The feeds page newest-first by id within a
 * project or an author (0001's `events_project` and `events_author`); an `action` or
 * `target_type` filter on a busy project must not walk every event of the project, and the
 * retention job finds old rows by `created_at` without scanning the table. `target_iid` keeps the
 * project-scoped number of a target that has one (a merge request's `!3`), which the feeds show.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('events').addColumn('target_iid', 'integer').execute();
  await sql`CREATE INDEX events_project_action ON events (project_id, action, id)`.execute(db);
  await sql`CREATE INDEX events_project_target_type ON events (project_id, target_type, id)
    WHERE target_type IS NOT NULL`.execute(db);
  await sql`CREATE INDEX events_created_at ON events (created_at, id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const name of ['events_created_at', 'events_project_target_type', 'events_project_action']) {
    await sql`DROP INDEX IF EXISTS ${sql.id(name)}`.execute(db);
  }
  await db.schema.alterTable('events').dropColumn('target_iid').execute();
}
