import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { buildSampleRepository } from '../../fixtures/sample-repo.js';
import { migrateToLatest, openPglite, openPostgres } from '../../src/db/database.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A migrated PGlite data directory dump, loaded by each test file (PGlite runs). */
    pgliteSnapshot: string;
    /** Name of a migrated template database (PostgreSQL runs). */
    postgresTemplate: string;
    /** A bare copy of the fixture repository (fixtures/sample-repo.ts). */
    sampleRepository: string;
    sampleCommits: Record<string, string>;
  }
}

/** Builds what every test file starts from, once per run: a migrated database and the fixture repository. */
export default async function setup(project: TestProject) {
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-test-'));
  const sampleRepository = path.join(scratch, 'sample.git');
  const sampleCommits = await buildSampleRepository(sampleRepository);
  project.provide('sampleRepository', sampleRepository);
  project.provide('sampleCommits', sampleCommits);
  let dropTemplate: (() => Promise<void>) | undefined;
  if (process.env.DATABASE_URL) {
    const template = `depot_template_${process.pid}`;
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${template}`);
    await admin.query(`CREATE DATABASE ${template}`);
    const url = new URL(process.env.DATABASE_URL);
    url.pathname = `/${template}`;
    const database = openPostgres(url.toString(), 1);
    await migrateToLatest(database.db);
    await database.close();
    project.provide('postgresTemplate', template);
    project.provide('pgliteSnapshot', '');
    dropTemplate = async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${template}`);
      await admin.end();
    };
  } else {
    const database = await openPglite(undefined);
    await migrateToLatest(database.db);
    await sql`CHECKPOINT`.execute(database.db);
    const dump = await database.pglite!.dumpDataDir('none');
    const file = path.join(scratch, 'pglite.tar');
    await fs.writeFile(file, Buffer.from(await dump.arrayBuffer()));
    await database.close();
    project.provide('pgliteSnapshot', file);
    project.provide('postgresTemplate', '');
  }
  return async () => {
    await dropTemplate?.();
    await fs.rm(scratch, { recursive: true, force: true });
  };
}
