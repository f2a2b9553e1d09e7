import { type Kysely, sql } from 'kysely';

/**
 * Project webhooks, integrations and the log of what was delivered to them (issue 21).
 * Webhook event flags live in one JSON object (`events`) so a new kind of event needs no
 * migration; secrets (`token`, integration secrets) are sealed with the instance key.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('web_hooks')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('name', 'text')
    .addColumn('description', 'text')
    .addColumn('sealed_token', 'text')
    .addColumn('events', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('enable_ssl_verification', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('push_events_branch_filter', 'text')
    .addColumn('branch_filter_strategy', 'text', (c) => c.notNull().defaultTo('wildcard'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('web_hooks_project_id').on('web_hooks').column('project_id').execute();

  await db.schema
    .createTable('integrations')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('slug', 'text', (c) => c.notNull())
    .addColumn('active', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('events', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('properties', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('sealed_secrets', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('integrations_project_slug', ['project_id', 'slug'])
    .execute();

  await db.schema
    .createTable('hook_deliveries')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('web_hook_id', 'integer', (c) => c.references('web_hooks.id').onDelete('cascade'))
    .addColumn('integration_id', 'integer', (c) => c.references('integrations.id').onDelete('cascade'))
    .addColumn('trigger', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('request_headers', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('request_data', 'jsonb')
    .addColumn('response_status', 'text')
    .addColumn('response_body', 'text')
    .addColumn('internal_error_message', 'text')
    .addColumn('execution_duration', 'double precision', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createIndex('hook_deliveries_web_hook')
    .on('hook_deliveries')
    .columns(['web_hook_id', 'id'])
    .execute();
  await db.schema
    .createIndex('hook_deliveries_integration')
    .on('hook_deliveries')
    .columns(['integration_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('hook_deliveries').execute();
  await db.schema.dropTable('integrations').execute();
  await db.schema.dropTable('web_hooks').execute();
}
