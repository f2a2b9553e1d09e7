import { type Kysely, sql } from 'kysely';

/**
 * Merge requests (iid per target project), their approvals, approval rules at project and merge
 * request level, and each project's approval settings (issue 18, parts 2 to 4).
 *
 * `approval_project_rules.protected_branch_ids` holds protected branch ids as plain integers
 * without a foreign key: the protected branches table (migration 0018) lands on its own branch,
 * and a rule must outlive the protection it names the way GitLab's join rows are cleaned up.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('merge_requests')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('iid', 'integer', (c) => c.notNull())
    .addColumn('target_project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('source_project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('source_branch', 'text', (c) => c.notNull())
    .addColumn('target_branch', 'text', (c) => c.notNull())
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('state', 'text', (c) => c.notNull().defaultTo('opened'))
    .addColumn('author_id', 'integer', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('assignee_ids', sql`integer[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('reviewer_ids', sql`integer[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('merge_status', 'text', (c) => c.notNull().defaultTo('unchecked'))
    .addColumn('sha', 'text')
    .addColumn('base_sha', 'text')
    .addColumn('merge_commit_sha', 'text')
    .addColumn('squash_commit_sha', 'text')
    .addColumn('squash', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('remove_source_branch', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('merged_by_id', 'integer', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('merged_at', 'timestamptz')
    .addColumn('closed_by_id', 'integer', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('closed_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('merge_requests_project_iid', ['target_project_id', 'iid'])
    .execute();
  await sql`CREATE INDEX merge_requests_source ON merge_requests (source_project_id, source_branch) WHERE state = 'opened'`.execute(
    db,
  );
  await sql`CREATE INDEX merge_requests_target ON merge_requests (target_project_id, target_branch) WHERE state = 'opened'`.execute(
    db,
  );
  await sql`CREATE INDEX merge_requests_merge_commit ON merge_requests (target_project_id, merge_commit_sha) WHERE merge_commit_sha IS NOT NULL`.execute(
    db,
  );

  // The commits a merge request brought, recorded when it is merged (GitLab's
  // merge_request_diff_commits), so the changelog finds the merge request of a commit.
  await db.schema
    .createTable('merge_request_commits')
    .addColumn('merge_request_id', 'integer', (c) => c.notNull().references('merge_requests.id').onDelete('cascade'))
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('sha', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('merge_request_commits_pkey', ['merge_request_id', 'sha'])
    .execute();
  await sql`CREATE INDEX merge_request_commits_sha ON merge_request_commits (project_id, sha)`.execute(db);

  await db.schema
    .createTable('merge_request_approvals')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('merge_request_id', 'integer', (c) => c.notNull().references('merge_requests.id').onDelete('cascade'))
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('merge_request_approvals_once', ['merge_request_id', 'user_id'])
    .execute();

  await db.schema
    .createTable('approval_project_rules')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('rule_type', 'text', (c) => c.notNull().defaultTo('regular'))
    .addColumn('approvals_required', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('user_ids', sql`integer[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('group_ids', sql`integer[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('protected_branch_ids', sql`integer[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('approval_project_rules_name', ['project_id', 'name'])
    .execute();

  await db.schema
    .createTable('approval_merge_request_rules')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('merge_request_id', 'integer', (c) => c.notNull().references('merge_requests.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('rule_type', 'text', (c) => c.notNull().defaultTo('regular'))
    .addColumn('approvals_required', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('user_ids', sql`integer[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('group_ids', sql`integer[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('approval_project_rule_id', 'integer', (c) =>
      c.references('approval_project_rules.id').onDelete('set null'),
    )
    /** code_owner rules: the CODEOWNERS section they come from. */
    .addColumn('section', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`CREATE INDEX approval_merge_request_rules_mr ON approval_merge_request_rules (merge_request_id, id)`.execute(
    db,
  );

  await db.schema
    .createTable('project_approval_settings')
    .addColumn('project_id', 'integer', (c) => c.primaryKey().references('projects.id').onDelete('cascade'))
    .addColumn('approvals_before_merge', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('reset_approvals_on_push', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('disable_overriding_approvers_per_merge_request', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('merge_requests_author_approval', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('merge_requests_disable_committers_approval', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('require_password_to_approve', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of [
    'project_approval_settings',
    'approval_merge_request_rules',
    'approval_project_rules',
    'merge_request_approvals',
    'merge_request_commits',
    'merge_requests',
  ]) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
