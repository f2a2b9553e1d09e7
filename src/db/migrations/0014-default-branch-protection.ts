import { type Kysely, sql } from 'kysely';

/**
 * How a project's default branch is protected (GitLab's default_branch_protection levels:
 * 0 none, 1 developers may push, 2 maintainers only), taken from the application setting when
 * the project is created, as GitLab protects the branch then. Existing projects keep 2, what
 * Depot enforced before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('projects')
    .addColumn('default_branch_protection', 'smallint', (c) => c.notNull().defaultTo(sql`2`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('projects').dropColumn('default_branch_protection').execute();
}
