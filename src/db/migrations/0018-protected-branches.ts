import { type Kysely, sql } from 'kysely';

/** GitLab's three access-level tables of a protected branch, one per action. */
const ACCESS_TABLES = [
  'protected_branch_push_access_levels',
  'protected_branch_merge_access_levels',
  'protected_branch_unprotect_access_levels',
] as const;

const TABLES = ['protected_branches', ...ACCESS_TABLES];

/**
 * Protected branches as GitLab models them: a rule per name or wildcard (`release/*`), and per
 * action (push, merge, unprotect) rows that each admit a role (access_level), a user or a group.
 * Every change notifies `depot_row_change` so every process forgets the rules it kept.
 *
 * The rule Depot enforced before (0014: the default branch per the project's
 * default_branch_protection) becomes rows: 1 lets developers push, 2 only maintainers; nobody
 * force pushes; 0 protects nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('protected_branches')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('allow_force_push', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('code_owner_approval_required', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addUniqueConstraint('protected_branches_project_name', ['project_id', 'name'])
    .execute();
  for (const table of ACCESS_TABLES) {
    let create = db.schema
      .createTable(table)
      .addColumn('id', 'serial', (c) => c.primaryKey())
      .addColumn('protected_branch_id', 'integer', (c) =>
        c.notNull().references('protected_branches.id').onDelete('cascade'),
      )
      .addColumn('access_level', 'smallint')
      .addColumn('user_id', 'integer', (c) => c.references('users.id').onDelete('cascade'))
      .addColumn('group_id', 'integer', (c) => c.references('namespaces.id').onDelete('cascade'));
    if (table === 'protected_branch_push_access_levels') create = create.addColumn('deploy_key_id', 'integer');
    await create
      .addColumn('created_at', 'timestamptz', (c) => c.notNull())
      .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
      // Exactly one of role, user or group (or deploy key) per row.
      .addCheckConstraint(
        `${table}_one_grantee`,
        sql`num_nonnulls(access_level, user_id, group_id${sql.raw(table === 'protected_branch_push_access_levels' ? ', deploy_key_id' : '')}) = 1`,
      )
      .execute();
    // One row per role, user or group on a branch, whoever writes concurrently.
    for (const column of ['access_level', 'user_id', 'group_id']) {
      await sql`
        CREATE UNIQUE INDEX ${sql.id(`${table}_unique_${column}`)} ON ${sql.table(table)} (protected_branch_id, ${sql.ref(column)})
        WHERE ${sql.ref(column)} IS NOT NULL`.execute(db);
    }
  }
  await db.schema.createIndex('protected_branches_project').on('protected_branches').column('project_id').execute();

  // The default branch's protection, as rows.
  await sql`
    INSERT INTO protected_branches (project_id, name, created_at, updated_at)
    SELECT id, default_branch, now(), now() FROM projects
    WHERE default_branch IS NOT NULL AND default_branch_protection <> 0`.execute(db);
  await sql`
    INSERT INTO protected_branch_push_access_levels (protected_branch_id, access_level, created_at, updated_at)
    SELECT b.id, CASE WHEN p.default_branch_protection = 1 THEN 30 ELSE 40 END, now(), now()
    FROM protected_branches b JOIN projects p ON p.id = b.project_id`.execute(db);
  // No unprotect rows, as GitLab's ProtectDefaultBranchService: maintainers may unprotect.
  await sql`
    INSERT INTO protected_branch_merge_access_levels (protected_branch_id, access_level, created_at, updated_at)
    SELECT id, 40, now(), now() FROM protected_branches`.execute(db);

  for (const table of TABLES) {
    await sql`
      CREATE TRIGGER ${sql.id(`${table}_row_change`)}
      AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${sql.table(table)}
      FOR EACH STATEMENT EXECUTE FUNCTION depot_notify_row_change()`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ACCESS_TABLES) await db.schema.dropTable(table).execute();
  await db.schema.dropTable('protected_branches').execute();
}
