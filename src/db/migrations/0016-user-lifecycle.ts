import { type Kysely, sql } from 'kysely';

/**
 * User lifecycle (issue 26): the ghost user that keeps what deleted users authored (GitLab's
 * `user_type: ghost`, one per instance, enforced by a partial unique index so two deletions
 * racing to create it end with one), and `deleting_at`, set when an administrator asks for a
 * deletion that a durable job then carries out.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('users')
    .addColumn('ghost', 'boolean', (c) => c.notNull().defaultTo(sql`false`))
    .addColumn('deleting_at', 'timestamptz')
    .execute();
  await sql`CREATE UNIQUE INDEX users_one_ghost ON users (ghost) WHERE ghost`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX users_one_ghost`.execute(db);
  await db.schema.alterTable('users').dropColumn('deleting_at').dropColumn('ghost').execute();
}
