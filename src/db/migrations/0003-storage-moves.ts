import { type Kysely, sql } from 'kysely';

/**
 * Durable background jobs (claimed with FOR UPDATE SKIP LOCKED) and repository storage moves
 * with GitLab's numeric states.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('jobs')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    // queued → running → done | failed; a running job whose worker died is claimed again.
    .addColumn('state', 'text', (c) => c.notNull().defaultTo('queued'))
    .addColumn('run_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_attempts', 'integer', (c) => c.notNull().defaultTo(3))
    .addColumn('locked_by', 'text')
    .addColumn('locked_at', 'timestamptz')
    .addColumn('heartbeat_at', 'timestamptz')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .execute();
  await sql`CREATE INDEX jobs_claimable ON jobs (state, run_at, id)`.execute(db);

  await db.schema
    .createTable('repository_storage_moves')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('container_type', 'text', (c) => c.notNull())
    .addColumn('container_id', 'integer', (c) => c.notNull())
    // GitLab's values: 1 initial, 2 scheduled, 3 started, 4 finished, 5 failed, 6 replicated, 7 cleanup_failed.
    .addColumn('state', 'smallint', (c) => c.notNull().defaultTo(1))
    .addColumn('source_storage_name', 'text', (c) => c.notNull())
    .addColumn('destination_storage_name', 'text', (c) => c.notNull())
    .addColumn('error_message', 'text')
    .addColumn('step', 'text')
    .addColumn('bytes_total', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes_copied', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE INDEX repository_storage_moves_container ON repository_storage_moves (container_type, container_id, id)`.execute(
    db,
  );
  // One move in flight per repository: a second one could delete the first one's copy.
  await sql`CREATE UNIQUE INDEX repository_storage_moves_one_active ON repository_storage_moves (container_type, container_id) WHERE state IN (1, 2, 3, 6)`.execute(
    db,
  );
  // When the instance's settings came to be (GET /application/settings shows it as created_at).
  await sql`INSERT INTO application_settings (key, value) VALUES ('instance', jsonb_build_object('created_at', now())) ON CONFLICT (key) DO NOTHING`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('repository_storage_moves').execute();
  await db.schema.dropTable('jobs').execute();
}
