import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { buildSampleRepository } from '../../fixtures/sample-repo.js';
import { migrateToLatest, openPostgres, withDatabase } from '../../src/db/database.js';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The server every test file clones its database on: DATABASE_URL, or the run's embedded one. */
    databaseServer: string;
    /** Name of a migrated template database on it. */
    databaseTemplate: string;
    /** A bare copy of the fixture repository (fixtures/sample-repo.ts). */
    sampleRepository: string;
    sampleCommits: Record<string, string>;
  }
}

/**
 * Builds what every test file starts from, once per run: the fixture repository, and a migrated
 * template database on PostgreSQL (DATABASE_URL), or else on an embedded server of its own.
 */
export default async function setup(project: TestProject) {
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-test-'));
  // The embedded server runs as the postgres user when the tests run as root: it must reach this.
  await fs.chmod(scratch, 0o755);
  const sampleRepository = path.join(scratch, 'sample.git');
  const sampleCommits = await buildSampleRepository(sampleRepository);
  project.provide('sampleRepository', sampleRepository);
  project.provide('sampleCommits', sampleCommits);
  const embedded = process.env.DATABASE_URL
    ? undefined
    : await startEmbeddedPostgres({ storageDir: path.join(scratch, 'postgres'), durable: false });
  const server = process.env.DATABASE_URL ?? (embedded?.url as string);
  const template = `depot_template_${process.pid}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${template}`);
  await admin.query(`CREATE DATABASE ${template}`);
  const database = openPostgres(withDatabase(server, template), { maxConnections: 1, lookups: false });
  await migrateToLatest(database.db);
  await database.close();
  project.provide('databaseServer', server);
  project.provide('databaseTemplate', template);
  return async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${template}`);
    await admin.end();
    await embedded?.stop();
    await fs.rm(scratch, { recursive: true, force: true });
  };
}
