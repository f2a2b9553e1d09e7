import type { Kysely } from 'kysely';

/**
 * The password grant has no per-application opt-in (GitLab since 15.0 grants it to any
 * application that authenticates; the instance may turn it off): `ropc_enabled` goes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('oauth_applications').dropColumn('ropc_enabled').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('oauth_applications')
    .addColumn('ropc_enabled', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
}
