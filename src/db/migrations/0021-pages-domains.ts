import { type Kysely, sql } from 'kysely';

/**
 * Custom Pages domains (GitLab's pages_domains): one row per domain, unique without regard to
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
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('pages_domains').execute();
}
