import { type Kysely, sql } from 'kysely';

/**
 * Issue 22's tables (and CI's report artifacts, which the dependency list reads). Custom Pages domains (GitLab's pages_domains): one row per domain, unique without regard to
 * case; the certificate kept as given, its private key sealed with the instance key, and the
 * DNS verification state (`verified_at`, `enabled_until`) the verification job keeps.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('pages_domains')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('domain', 'text', (c) => c.notNull())
    .addColumn('certificate', 'text')
    .addColumn('certificate_text', 'text')
    .addColumn('key_sealed', 'text')
    .addColumn('certificate_source', 'text', (c) => c.notNull().defaultTo('user_provided'))
    .addColumn('certificate_valid_not_before', 'timestamptz')
    .addColumn('certificate_valid_not_after', 'timestamptz')
    .addColumn('auto_ssl_enabled', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('verification_code', 'text', (c) => c.notNull())
    .addColumn('verified_at', 'timestamptz')
    .addColumn('enabled_until', 'timestamptz')
    .addColumn('remove_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE UNIQUE INDEX pages_domains_domain ON pages_domains (lower(domain))`.execute(db);
  await sql`CREATE INDEX pages_domains_project ON pages_domains (project_id, domain)`.execute(db);
  await sql`CREATE INDEX pages_domains_verification ON pages_domains (enabled_until NULLS FIRST, id)`.execute(db);

  // Integrated error tracking: a project's switch, the client keys error SDKs authenticate with,
  // errors grouped by what they are, and each event received.
  await db.schema
    .createTable('error_tracking_settings')
    .addColumn('project_id', 'integer', (c) => c.primaryKey().references('projects.id').onDelete('cascade'))
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('integrated', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('api_url', 'text')
    .addColumn('project_name', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('error_tracking_client_keys')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('active', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('public_key', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE INDEX error_tracking_client_keys_project ON error_tracking_client_keys (project_id, id)`.execute(db);
  await db.schema
    .createTable('error_tracking_errors')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('platform', 'text')
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('unresolved'))
    .addColumn('events_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('first_seen_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_seen_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`CREATE UNIQUE INDEX error_tracking_errors_fingerprint ON error_tracking_errors (project_id, fingerprint)`.execute(
    db,
  );
  await sql`CREATE INDEX error_tracking_errors_last_seen ON error_tracking_errors (project_id, last_seen_at DESC, id)`.execute(
    db,
  );
  await db.schema
    .createTable('error_tracking_error_events')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('error_id', 'integer', (c) => c.notNull().references('error_tracking_errors.id').onDelete('cascade'))
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('environment', 'text')
    .addColumn('level', 'text')
    .addColumn('occurred_at', 'timestamptz', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    .execute();
  await sql`CREATE INDEX error_tracking_error_events_error ON error_tracking_error_events (error_id, occurred_at DESC)`.execute(
    db,
  );

  // Security advisories an administrator imported (OSV), one row per advisory and package.
  await db.schema
    .createTable('security_advisories')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('osv_id', 'text', (c) => c.notNull())
    .addColumn('ecosystem', 'text', (c) => c.notNull())
    .addColumn('package_name', 'text', (c) => c.notNull())
    .addColumn('summary', 'text')
    .addColumn('severity', 'text', (c) => c.notNull())
    .addColumn('affected', 'jsonb', (c) => c.notNull())
    .addColumn('modified_at', 'timestamptz')
    .addColumn('withdrawn_at', 'timestamptz')
    .execute();
  await sql`CREATE UNIQUE INDEX security_advisories_identity ON security_advisories (osv_id, ecosystem, package_name)`.execute(
    db,
  );
  await sql`CREATE INDEX security_advisories_package ON security_advisories (ecosystem, package_name)`.execute(db);

  // Report artifacts a CI job uploads (reports:cyclonedx): read by the dependency list.
  await db.schema
    .createTable('ci_build_reports')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('build_id', 'integer', (c) => c.notNull().references('ci_builds.id').onDelete('cascade'))
    .addColumn('file_type', 'text', (c) => c.notNull())
    .addColumn('filename', 'text', (c) => c.notNull())
    .addColumn('content', 'bytea', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE INDEX ci_build_reports_build ON ci_build_reports (build_id, file_type)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('ci_build_reports').execute();
  await db.schema.dropTable('security_advisories').execute();
  await db.schema.dropTable('error_tracking_error_events').execute();
  await db.schema.dropTable('error_tracking_errors').execute();
  await db.schema.dropTable('error_tracking_client_keys').execute();
  await db.schema.dropTable('error_tracking_settings').execute();
  await db.schema.dropTable('pages_domains').execute();
}
