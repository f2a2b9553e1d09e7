import { type Kysely, sql } from 'kysely';

/**
 * Members: LDAP (directory) links of groups, the daily billable-member snapshot of top-level
 * groups with its refresh times, and indexes for member lists, expiry and group events.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // A group named in a directory synchronisation file is LDAP-synchronised: its members follow
  // the directory unless their level is overridden.
  await db.schema
    .createTable('ldap_group_links')
    .addColumn('group_id', 'integer', (c) => c.primaryKey().references('namespaces.id').onDelete('cascade'))
    .addColumn('cn', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('synced_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  // One row per billable user of a top-level group, rebuilt by the daily refresh job.
  await db.schema
    .createTable('billable_members')
    .addColumn('group_id', 'integer', (c) => c.notNull().references('namespaces.id').onDelete('cascade'))
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('membership_type', 'text', (c) => c.notNull())
    .addColumn('access_level', 'integer', (c) => c.notNull())
    .addColumn('joined_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('billable_members_pkey', ['group_id', 'user_id'])
    .execute();
  await db.schema
    .createTable('billable_member_refreshes')
    .addColumn('group_id', 'integer', (c) => c.primaryKey().references('namespaces.id').onDelete('cascade'))
    .addColumn('refreshed_at', 'timestamptz', (c) => c.notNull())
    .execute();

  await sql`CREATE INDEX members_source ON members (source_type, source_id, id)`.execute(db);
  await sql`CREATE INDEX members_expires_at ON members (expires_at) WHERE expires_at IS NOT NULL`.execute(db);
  await sql`CREATE INDEX events_group ON events (group_id, id) WHERE group_id IS NOT NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS events_group`.execute(db);
  await sql`DROP INDEX IF EXISTS members_expires_at`.execute(db);
  await sql`DROP INDEX IF EXISTS members_source`.execute(db);
  await db.schema.dropTable('billable_member_refreshes').execute();
  await db.schema.dropTable('billable_members').execute();
  await db.schema.dropTable('ldap_group_links').execute();
}
