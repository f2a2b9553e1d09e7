import { type Kysely, sql } from 'kysely';

/** Users, namespaces (user and group), projects, memberships, tokens, events and settings. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('users')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('password_digest', 'text')
    .addColumn('admin', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('state', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('bio', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('location', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('public_email', 'text')
    .addColumn('website_url', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('organization', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('job_title', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('pronouns', 'text')
    .addColumn('linkedin', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('twitter', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('discord', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('skype', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('note', 'text')
    .addColumn('can_create_group', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('projects_limit', 'integer', (c) => c.notNull().defaultTo(100000))
    .addColumn('external', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('private_profile', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('bot', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('two_factor_enabled', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('theme_id', 'integer', (c) => c.notNull().defaultTo(3))
    .addColumn('color_scheme_id', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('created_by_id', 'integer')
    .addColumn('confirmed_at', 'timestamptz')
    .addColumn('last_sign_in_at', 'timestamptz')
    .addColumn('current_sign_in_at', 'timestamptz')
    .addColumn('last_activity_on', 'date')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE UNIQUE INDEX users_username_lower ON users (lower(username))`.execute(db);
  await sql`CREATE UNIQUE INDEX users_email_lower ON users (lower(email))`.execute(db);

  await db.schema
    .createTable('namespaces')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind IN ('user', 'group')`))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('full_path', 'text', (c) => c.notNull())
    .addColumn('parent_id', 'integer', (c) => c.references('namespaces.id').onDelete('cascade'))
    .addColumn('traversal_ids', sql`integer[]`, (c) => c.notNull())
    .addColumn('owner_id', 'integer', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('visibility', 'text', (c) => c.notNull())
    .addColumn('request_access_enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('project_creation_level', 'text', (c) => c.notNull().defaultTo('developer'))
    .addColumn('subgroup_creation_level', 'text', (c) => c.notNull().defaultTo('maintainer'))
    .addColumn('lfs_enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('share_with_group_lock', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('require_two_factor_authentication', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('two_factor_grace_period', 'integer', (c) => c.notNull().defaultTo(48))
    .addColumn('emails_enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('mentions_disabled', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('default_branch', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  // Full paths are unique across namespaces and projects alike; projects check namespaces in
  // their service, and each table holds its own unique index.
  await sql`CREATE UNIQUE INDEX namespaces_full_path_lower ON namespaces (lower(full_path))`.execute(db);
  await sql`CREATE INDEX namespaces_traversal_ids ON namespaces USING gin (traversal_ids)`.execute(db);
  await sql`CREATE INDEX namespaces_parent_id ON namespaces (parent_id)`.execute(db);

  await db.schema
    .createTable('projects')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('namespace_id', 'integer', (c) => c.notNull().references('namespaces.id'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('full_path', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('visibility', 'text', (c) => c.notNull())
    .addColumn('default_branch', 'text')
    .addColumn('creator_id', 'integer', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('repository_storage', 'text', (c) => c.notNull())
    .addColumn('repository_read_only', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('archived', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('request_access_enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('lfs_enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('features', 'jsonb', (c) => c.notNull())
    .addColumn('topics', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('settings', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_activity_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE UNIQUE INDEX projects_full_path_lower ON projects (lower(full_path))`.execute(db);
  await sql`CREATE UNIQUE INDEX projects_namespace_path_lower ON projects (namespace_id, lower(path))`.execute(db);
  await sql`CREATE INDEX projects_repository_storage ON projects (repository_storage)`.execute(db);

  await db.schema
    .createTable('members')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('source_type', 'text', (c) => c.notNull().check(sql`source_type IN ('group', 'project')`))
    .addColumn('source_id', 'integer', (c) => c.notNull())
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('access_level', 'integer', (c) => c.notNull())
    .addColumn('expires_at', 'date')
    .addColumn('created_by_id', 'integer', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('requested_at', 'timestamptz')
    .addColumn('invite_source', 'text')
    .addColumn('ldap', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('override', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('members_source_user', ['source_type', 'source_id', 'user_id'])
    .execute();
  await sql`CREATE INDEX members_user ON members (user_id)`.execute(db);

  await db.schema
    .createTable('personal_access_tokens')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('token_digest', 'text', (c) => c.notNull().unique())
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('expires_at', 'date')
    .addColumn('revoked', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('impersonation', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('previous_personal_access_token_id', 'integer')
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE INDEX personal_access_tokens_user ON personal_access_tokens (user_id)`.execute(db);

  await db.schema
    .createTable('events')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('author_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('project_id', 'integer')
    .addColumn('group_id', 'integer')
    .addColumn('target_type', 'text')
    .addColumn('target_id', 'integer')
    .addColumn('target_title', 'text')
    .addColumn('push_data', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE INDEX events_project ON events (project_id, id)`.execute(db);
  await sql`CREATE INDEX events_author ON events (author_id, id)`.execute(db);

  await db.schema
    .createTable('application_settings')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('value', 'jsonb', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of [
    'application_settings',
    'events',
    'personal_access_tokens',
    'members',
    'projects',
    'namespaces',
    'users',
  ]) {
    await db.schema.dropTable(table).execute();
  }
}
