import { type Kysely, sql } from 'kysely';

/**
 * Brute-force lockout of password authentication (Devise :lockable with GitLab's settings):
 * failed password attempts per user and the moment the account was locked.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('users')
    .addColumn('failed_attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('locked_at', 'timestamptz')
    .execute();
  // The pruning job finds expired grants and old revoked tokens without reading every row.
  await sql`CREATE INDEX oauth_access_grants_expires_at ON oauth_access_grants (expires_at)`.execute(db);
  await sql`CREATE INDEX oauth_access_tokens_revoked_at ON oauth_access_tokens (revoked_at) WHERE revoked_at IS NOT NULL`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS oauth_access_tokens_revoked_at`.execute(db);
  await sql`DROP INDEX IF EXISTS oauth_access_grants_expires_at`.execute(db);
  await db.schema.alterTable('users').dropColumn('locked_at').dropColumn('failed_attempts').execute();
}
