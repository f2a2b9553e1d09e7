import { type Kysely, sql } from 'kysely';

/**
 * CI (issue 19): runners and the scopes they serve, registration tokens (hashed), pipelines,
 * their jobs (GitLab's ci_builds), job logs kept as appended chunks, and job artifacts (the
 * files live under STORAGE_DIR/ci/artifacts, the rows say where).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('ci_registration_tokens')
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('scope_id', 'integer', (c) => c.notNull())
    .addColumn('token_digest', 'text', (c) => c.notNull().unique())
    // Sealed with the instance key: GitLab shows the token again (runners_token) to maintainers.
    .addColumn('token_sealed', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('ci_registration_tokens_pkey', ['scope', 'scope_id'])
    .execute();

  await db.schema
    .createTable('ci_runners')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('runner_type', 'text', (c) => c.notNull())
    .addColumn('token_digest', 'text', (c) => c.notNull().unique())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('active', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('locked', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('run_untagged', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('access_level', 'text', (c) => c.notNull().defaultTo('not_protected'))
    .addColumn('maximum_timeout', 'integer')
    .addColumn('tag_list', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'::text[]`))
    .addColumn('name', 'text')
    .addColumn('version', 'text')
    .addColumn('revision', 'text')
    .addColumn('platform', 'text')
    .addColumn('architecture', 'text')
    .addColumn('ip_address', 'text')
    .addColumn('contacted_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('ci_runner_projects')
    .addColumn('runner_id', 'integer', (c) => c.notNull().references('ci_runners.id').onDelete('cascade'))
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('ci_runner_projects_pkey', ['runner_id', 'project_id'])
    .execute();
  await db.schema.createIndex('ci_runner_projects_project').on('ci_runner_projects').column('project_id').execute();

  await db.schema
    .createTable('ci_runner_namespaces')
    .addColumn('runner_id', 'integer', (c) => c.notNull().references('ci_runners.id').onDelete('cascade'))
    .addColumn('namespace_id', 'integer', (c) => c.notNull().references('namespaces.id').onDelete('cascade'))
    .addPrimaryKeyConstraint('ci_runner_namespaces_pkey', ['runner_id', 'namespace_id'])
    .execute();
  await db.schema.createIndex('ci_runner_namespaces_ns').on('ci_runner_namespaces').column('namespace_id').execute();

  await db.schema
    .createTable('ci_pipelines')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('iid', 'integer', (c) => c.notNull())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('ref', 'text', (c) => c.notNull())
    .addColumn('tag', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('sha', 'text', (c) => c.notNull())
    .addColumn('before_sha', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('protected', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('user_id', 'integer', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('yaml_errors', 'text')
    .addColumn('variables', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .addUniqueConstraint('ci_pipelines_project_iid', ['project_id', 'iid'])
    .execute();

  await db.schema
    .createTable('ci_builds')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('pipeline_id', 'integer', (c) => c.notNull().references('ci_pipelines.id').onDelete('cascade'))
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('stage', 'text', (c) => c.notNull())
    .addColumn('stage_idx', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('when', 'text', (c) => c.notNull().defaultTo('on_success'))
    .addColumn('allow_failure', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('retried', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('needs', sql`text[]`)
    .addColumn('tag_list', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'::text[]`))
    .addColumn('options', 'jsonb', (c) => c.notNull())
    .addColumn('ref', 'text', (c) => c.notNull())
    .addColumn('tag', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('sha', 'text', (c) => c.notNull())
    .addColumn('protected', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('timeout', 'integer', (c) => c.notNull())
    .addColumn('user_id', 'integer', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('runner_id', 'integer', (c) => c.references('ci_runners.id').onDelete('set null'))
    .addColumn('token_digest', 'text', (c) => c.unique())
    .addColumn('failure_reason', 'text')
    .addColumn('exit_code', 'integer')
    .addColumn('coverage', 'double precision')
    .addColumn('trace_size', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('artifacts_file', 'text')
    .addColumn('artifacts_size', 'bigint')
    .addColumn('artifacts_expire_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('queued_at', 'timestamptz')
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('ci_builds_pipeline').on('ci_builds').column('pipeline_id').execute();
  await db.schema.createIndex('ci_builds_project').on('ci_builds').columns(['project_id', 'id']).execute();
  await db.schema.createIndex('ci_builds_runner').on('ci_builds').columns(['runner_id', 'id']).execute();
  // The queue: the runner protocol scans only pending jobs.
  await sql`CREATE INDEX ci_builds_pending ON ci_builds (id) WHERE status = 'pending'`.execute(db);
  // Changes to jobs are announced like 0008/0009's tables: runner polls cache whether any job is
  // pending (src/db/lookup-cache.ts) and every process must forget that when jobs change.
  await sql`
    CREATE TRIGGER ci_builds_row_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ci_builds
    FOR EACH STATEMENT EXECUTE FUNCTION depot_notify_row_change()`.execute(db);

  await db.schema
    .createTable('ci_build_trace_chunks')
    .addColumn('build_id', 'integer', (c) => c.notNull().references('ci_builds.id').onDelete('cascade'))
    .addColumn('offset', 'integer', (c) => c.notNull())
    .addColumn('data', 'bytea', (c) => c.notNull())
    .addPrimaryKeyConstraint('ci_build_trace_chunks_pkey', ['build_id', 'offset'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of [
    'ci_build_trace_chunks',
    'ci_builds',
    'ci_pipelines',
    'ci_runner_namespaces',
    'ci_runner_projects',
    'ci_runners',
    'ci_registration_tokens',
  ]) {
    await db.schema.dropTable(table).execute();
  }
}
