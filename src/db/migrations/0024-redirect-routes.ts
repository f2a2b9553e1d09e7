import { type Kysely, sql } from 'kysely';

/**
 * GitLab's redirect routes, for projects: when a project's full path changes (a rename, a
 * transfer, or a rename or transfer of any namespace above it, a user's rename included), its
 * old path keeps naming it, so that `GET /projects/old%2Fpath` answers 301 and `git` keeps
 * working with an old remote.
 *
 * Triggers keep the table, so that every way a path changes is covered (the services rewrite
 * paths in four places, one of them a bulk UPDATE). A path that a project or a namespace takes
 * again drops the redirects at it and below it, as GitLab's Route#delete_conflicting_redirects
 * does. The rows change only within statements on `projects` and `namespaces`, whose notices
 * already clear the cached project lookups (0009), so this table needs none of its own.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('redirect_routes')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('project_id', 'integer', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  // Paths are found case-insensitively, one redirect per path. The pattern operator class
  // compares bytes, so the paths below `a/b` are one range of the index, ['a/b/', 'a/b0'): '0'
  // is the byte after '/'.
  await sql`CREATE UNIQUE INDEX redirect_routes_path ON redirect_routes (lower(path) text_pattern_ops)`.execute(db);
  await sql`CREATE INDEX redirect_routes_project ON redirect_routes (project_id)`.execute(db);

  await sql`
    CREATE FUNCTION depot_redirect_old_project_path() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO redirect_routes (project_id, path) VALUES (NEW.id, OLD.full_path)
      ON CONFLICT (lower(path)) DO UPDATE SET project_id = EXCLUDED.project_id, path = EXCLUDED.path, created_at = now();
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE FUNCTION depot_drop_conflicting_redirects() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM redirect_routes
      WHERE lower(path) = lower(NEW.full_path)
        OR (lower(path) ~>=~ (lower(NEW.full_path) || '/') AND lower(path) ~<~ (lower(NEW.full_path) || '0'));
      RETURN NULL;
    END $$`.execute(db);
  // A change of case only is no move: the path still finds the project.
  await sql`
    CREATE TRIGGER projects_redirect_old_path AFTER UPDATE OF full_path ON projects
    FOR EACH ROW WHEN (lower(OLD.full_path) <> lower(NEW.full_path))
    EXECUTE FUNCTION depot_redirect_old_project_path()`.execute(db);
  for (const table of ['projects', 'namespaces']) {
    await sql`
      CREATE TRIGGER ${sql.id(`${table}_drop_conflicting_redirects`)} AFTER INSERT OR UPDATE OF full_path ON ${sql.table(table)}
      FOR EACH ROW EXECUTE FUNCTION depot_drop_conflicting_redirects()`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER projects_redirect_old_path ON projects`.execute(db);
  await sql`DROP TRIGGER projects_drop_conflicting_redirects ON projects`.execute(db);
  await sql`DROP TRIGGER namespaces_drop_conflicting_redirects ON namespaces`.execute(db);
  await sql`DROP FUNCTION depot_redirect_old_project_path()`.execute(db);
  await sql`DROP FUNCTION depot_drop_conflicting_redirects()`.execute(db);
  await db.schema.dropTable('redirect_routes').execute();
}
