import { type Kysely, sql } from 'kysely';

/**
 * The OAuth 2.0 provider: applications, authorization codes (grants), access/refresh tokens, and
 * the browser sessions of the sign-in and consent pages. Every secret is stored as a SHA-256 digest.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('oauth_applications')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('uid', 'text', (c) => c.notNull().unique())
    .addColumn('secret_digest', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('confidential', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('ropc_enabled', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('owner_id', 'integer', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE INDEX oauth_applications_owner_id ON oauth_applications (owner_id)`.execute(db);

  await db.schema
    .createTable('oauth_access_tokens')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('application_id', 'integer', (c) => c.notNull().references('oauth_applications.id').onDelete('cascade'))
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('token_digest', 'text', (c) => c.notNull().unique())
    .addColumn('refresh_token_digest', 'text', (c) => c.unique())
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('expires_in', 'integer', (c) => c.notNull())
    // Every token minted by refreshing another shares its family: a replayed refresh token revokes it.
    .addColumn('family', 'text', (c) => c.notNull())
    .addColumn('previous_token_id', 'integer', (c) => c.references('oauth_access_tokens.id').onDelete('set null'))
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`CREATE INDEX oauth_access_tokens_family ON oauth_access_tokens (family)`.execute(db);

  await db.schema
    .createTable('oauth_access_grants')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('application_id', 'integer', (c) => c.notNull().references('oauth_applications.id').onDelete('cascade'))
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('code_digest', 'text', (c) => c.notNull().unique())
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('code_challenge', 'text')
    .addColumn('code_challenge_method', 'text')
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    // The token the code was exchanged for: a replayed code revokes it (RFC 6749 §4.1.2).
    .addColumn('access_token_id', 'integer', (c) => c.references('oauth_access_tokens.id').onDelete('set null'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('web_sessions')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('session_digest', 'text', (c) => c.notNull().unique())
    .addColumn('user_id', 'integer', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('csrf_token', 'text', (c) => c.notNull())
    .addColumn('return_to', 'text')
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`CREATE INDEX web_sessions_expires_at ON web_sessions (expires_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('web_sessions').execute();
  await db.schema.dropTable('oauth_access_grants').execute();
  await db.schema.dropTable('oauth_access_tokens').execute();
  await db.schema.dropTable('oauth_applications').execute();
}
