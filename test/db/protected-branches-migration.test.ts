import { randomBytes } from 'node:crypto';
import { Kysely, Migrator, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { withDatabase } from '../../src/db/database.js';
import { migrations } from '../../src/db/migrations/index.js';

/**
 * Migration 0018 turns the rule Depot enforced before (0014: each project's default branch per
 * its default_branch_protection) into protected_branches rows.
 */
let admin: pg.Client;
let name: string;
let db: Kysely<unknown>;

beforeAll(async () => {
  admin = new pg.Client({ connectionString: inject('databaseServer') });
  await admin.connect();
  name = `depot_migration_${randomBytes(6).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${name}`);
  db = new Kysely({
    dialect: new PostgresDialect({
      pool: new pg.Pool({ connectionString: withDatabase(inject('databaseServer'), name), max: 2 }),
    }),
  });
});
afterAll(async () => {
  await db?.destroy();
  // pg's pool ends before its sockets close; dropping while they close kills them (57P01).
  for (let i = 0; i < 100; i++) {
    const { rows } = await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]);
    if (rows[0].n === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await admin?.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin?.end();
});

const migrator = () => new Migrator({ db, provider: { getMigrations: async () => migrations } });

describe('migration 0018-protected-branches', () => {
  it('protects each existing default branch as its project said, and nothing else', async () => {
    const upTo = await migrator().migrateTo('0014-default-branch-protection');
    expect(upTo.error).toBeUndefined();
    const { rows: namespaces } = await sql<{ id: number }>`
      INSERT INTO namespaces (kind, name, path, full_path, traversal_ids, visibility, created_at, updated_at)
      VALUES ('group', 'g', 'g', 'g', '{}', 'private', now(), now()) RETURNING id`.execute(db);
    const namespace = namespaces[0]?.id as number;
    const project = async (path: string, branch: string | null, protection: number) => {
      const { rows } = await sql<{ id: number }>`
        INSERT INTO projects (namespace_id, name, path, full_path, visibility, default_branch, repository_storage,
          default_branch_protection, features, topics, settings, created_at, updated_at, last_activity_at)
        VALUES (${namespace}, ${path}, ${path}, ${`g/${path}`}, 'private', ${branch}, 'default', ${protection},
          '{}', '[]', '{}', now(), now(), now())
        RETURNING id`.execute(db);
      return rows[0]?.id as number;
    };
    const full = await project('full', 'main', 2);
    const partial = await project('partial', 'trunk', 1);
    const none = await project('none', 'main', 0);
    const empty = await project('empty', null, 2);

    const up = await migrator().migrateToLatest();
    expect(up.error).toBeUndefined();
    const { rows } = await sql<{
      project_id: number;
      name: string;
      push: number[];
      merge: number[];
      unprotect: number[] | null;
    }>`
      SELECT b.project_id, b.name,
        (SELECT array_agg(access_level) FROM protected_branch_push_access_levels WHERE protected_branch_id = b.id) AS push,
        (SELECT array_agg(access_level) FROM protected_branch_merge_access_levels WHERE protected_branch_id = b.id) AS merge,
        (SELECT array_agg(access_level) FROM protected_branch_unprotect_access_levels WHERE protected_branch_id = b.id)
          AS unprotect
      FROM protected_branches b ORDER BY b.project_id`.execute(db);
    expect(rows).toEqual([
      { project_id: full, name: 'main', push: [40], merge: [40], unprotect: null },
      { project_id: partial, name: 'trunk', push: [30], merge: [40], unprotect: null },
    ]);
    expect([none, empty]).toHaveLength(2);

    // And back down, cleanly.
    const down = await migrator().migrateTo('0014-default-branch-protection');
    expect(down.error).toBeUndefined();
    const { rows: left } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_tables WHERE tablename LIKE 'protected_branch%'`.execute(db);
    expect(left[0]?.n).toBe(0);
  });
});
