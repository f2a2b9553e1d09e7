import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import pino from 'pino';
import { inject } from 'vitest';
import { createApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { type Database, openPostgres, withDatabase } from '../../src/db/database.js';
import { Metrics } from '../../src/http/metrics.js';
import { type Clock, ManualClock } from '../../src/lib/clock.js';
import type { Deps } from '../../src/services/deps.js';
import { Storages } from '../../src/storage/storages.js';

export interface TestApp {
  deps: Deps;
  /** This app's pool on the test database (its url, its statement count). */
  database: Database;
  clock: ManualClock;
  baseUrl: string;
  storageDir: string;
  /** Requests `/api/v4<path>` (or any absolute path starting with `/-/`, `/oauth`...). */
  request(path: string, options?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface RequestOptions {
  method?: string;
  token?: string;
  headers?: Record<string, string>;
  /** JSON body (objects), a raw form body (URLSearchParams) or raw bytes (Blob). */
  body?: unknown;
  query?: Record<string, string | number | boolean | (string | number)[]>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  body: any;
}

/**
 * A fresh database for one test file (or one server process it starts): a clone of the run's
 * migrated template. `drop` waits for its connections to close, then removes it.
 */
export async function createTestDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const server = inject('databaseServer');
  const name = `depot_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} TEMPLATE ${inject('databaseTemplate')}`);
  return {
    url: withDatabase(server, name),
    drop: async () => {
      // pg's pool resolves end() before its sockets are closed; forcing the drop while they
      // close makes the server kill them (57P01), an unhandled error that fails the run.
      for (let i = 0; i < 100; i++) {
        const { rows } = await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [
          name,
        ]);
        if (rows[0].n === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

/** Opens a fresh database for one test file (createTestDatabase). */
async function openTestDatabase(): Promise<{ database: Database; drop: () => Promise<void> }> {
  const created = await createTestDatabase();
  const database = openPostgres(created.url, { maxConnections: 5 });
  await database.listening;
  return {
    database,
    drop: async () => {
      await database.close();
      await created.drop();
    },
  };
}

export interface TestAppOptions {
  storages?: string[];
  clock?: Clock;
  env?: Record<string, string>;
  /**
   * Another server process of the same instance: this app shares `peer`'s database and storage
   * but has its own pool, lookup cache and port (and leaves both to `peer` when it closes).
   */
  peer?: TestApp;
}

/** A pool of its own on `peer`'s database. */
async function openPeerDatabase(peer: TestApp): Promise<{ database: Database; drop: () => Promise<void> }> {
  const database = openPostgres(peer.database.url, { maxConnections: 5 });
  await database.listening;
  return { database, drop: () => database.close() };
}

/**
 * Starts Depot in-process on a loopback port with a fresh database and temporary storage.
 * `storages` adds named storage roots besides `default`.
 */
export async function startTestApp(options: TestAppOptions = {}) {
  const peer = options.peer;
  const storageDir = peer?.storageDir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'depot-app-')));
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const storageList = ['default', ...(options.storages ?? [])]
    .map((name) => `${name}=${path.join(storageDir, 'repositories', name)}`)
    .join(',');
  const config: Config = loadConfig({
    PORT: String(port),
    STORAGE_DIR: storageDir,
    REPOSITORY_STORAGES: storageList,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...options.env,
  });
  const { database, drop } = peer ? await openPeerDatabase(peer) : await openTestDatabase();
  const clock = options.clock instanceof ManualClock ? options.clock : new ManualClock(new Date());
  const storages = new Storages(config.repositoryStorages);
  storages.ensureRoots();
  const deps: Deps = {
    config,
    db: database.db,
    clock,
    logger: pino({ level: config.logLevel }),
    storages,
    lookups: database.lookups,
  };
  const app = createApp(deps, { metrics: new Metrics(false) });
  server.on('request', app.callback());
  const baseUrl = config.baseUrl;

  const request = async (target: string, opts: RequestOptions = {}): Promise<TestResponse> => {
    const url = new URL(
      target.startsWith('/api/') || target.startsWith('/-/') || target.startsWith('/oauth')
        ? target
        : `/api/v4${target}`,
      baseUrl,
    );
    for (const [key, value] of Object.entries(opts.query ?? {})) {
      if (Array.isArray(value)) for (const v of value) url.searchParams.append(`${key}[]`, String(v));
      else url.searchParams.set(key, String(value));
    }
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers['PRIVATE-TOKEN'] = opts.token;
    let body: string | URLSearchParams | Blob | undefined;
    // Form bodies and raw bytes (a Blob, typed by the caller's Content-Type) go as they are.
    if (opts.body instanceof URLSearchParams || opts.body instanceof Blob) body = opts.body;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['Content-Type'] = 'application/json';
    }
    const res = await fetch(url, { method: opts.method ?? 'GET', headers, body, redirect: 'manual' });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, text, body: parsed };
  };

  const testApp: TestApp = {
    deps,
    database,
    clock,
    baseUrl,
    storageDir,
    request,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await drop();
      if (!peer) await fs.rm(storageDir, { recursive: true, force: true });
    },
  };
  return testApp;
}
