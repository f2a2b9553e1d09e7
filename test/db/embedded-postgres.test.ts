import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import {
  EmbeddedPostgresError,
  type EmbeddedServer,
  findBinaries,
  RELOCATED_ROOT,
  startEmbeddedPostgres,
} from '../../src/db/embedded-postgres.js';
import { tempStorageDir } from '../support/server-process.js';

/** The embedded database server Depot starts itself (src/db/embedded-postgres.ts). */
const dirs: string[] = [];
const servers: EmbeddedServer[] = [];
afterAll(async () => {
  for (const server of servers) await server.stop();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

async function start(storageDir: string, notices: string[] = [], durable = false) {
  const server = await startEmbeddedPostgres({ storageDir, durable, onNotice: (m) => notices.push(m) });
  servers.push(server);
  return server;
}

async function query(url: string, text: string): Promise<unknown[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}

const pidFile = (dataDir: string) => path.join(dataDir, 'postmaster.pid');
const postmasterPid = (dataDir: string) => Number(fs.readFileSync(pidFile(dataDir), 'utf8').split('\n')[0]);
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('the embedded PostgreSQL server', () => {
  it('creates its cluster in STORAGE_DIR/db once, behind a generated password, on a Unix socket only', {
    timeout: 60_000,
  }, async () => {
    const storage = tempStorageDir('depot-pg-');
    dirs.push(storage);
    const first = await start(storage);
    expect(first.created).toBe(true);
    expect(first.dataDir).toBe(path.join(storage, 'db'));
    expect(fs.statSync(path.join(storage, 'db.password')).mode & 0o777).toBe(0o600);
    const password = fs.readFileSync(path.join(storage, 'db.password'), 'utf8').trim();
    expect(password.length).toBeGreaterThanOrEqual(32);
    const url = new URL(first.url);
    expect(url.searchParams.get('host')).toBe(first.dataDir);
    expect(decodeURIComponent(url.password)).toBe(password);
    // No TCP listener: postmaster.pid's listen address line is empty.
    expect(fs.readFileSync(pidFile(first.dataDir), 'utf8').split('\n')[5]).toBe('');
    // A wrong password is refused.
    const wrong = new URL(first.url);
    wrong.password = 'not-the-password';
    await expect(query(wrong.toString(), 'SELECT 1')).rejects.toThrow(/password authentication failed/);
    await query(first.url, 'CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)');
    await first.stop();
    expect(fs.existsSync(pidFile(first.dataDir))).toBe(false);

    const later = await start(storage);
    expect(later.created).toBe(false);
    expect(await query(later.url, 'SELECT n FROM kept')).toEqual([{ n: 42 }]);
    await later.stop();
  });

  it('recovers from a crash: a dead or foreign postmaster.pid is removed, a live server is taken over', {
    timeout: 60_000,
  }, async () => {
    const storage = tempStorageDir('depot-pg-');
    dirs.push(storage);
    // Durable, as `npm start` runs it: a committed row survives the kill below.
    const first = await start(storage, [], true);
    await query(first.url, 'CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)');
    // Depot died, its database did not: the next start takes the running server over.
    const orphan = postmasterPid(first.dataDir);
    const adopted = await start(storage);
    expect(postmasterPid(adopted.dataDir)).toBe(orphan);
    expect(await query(adopted.url, 'SELECT n FROM kept')).toEqual([{ n: 7 }]);
    // A power cut: the server is killed, its postmaster.pid names a process that is gone.
    process.kill(orphan, 'SIGKILL');
    while (alive(orphan)) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(fs.existsSync(pidFile(first.dataDir))).toBe(true);
    const recovered = await start(storage);
    expect(postmasterPid(recovered.dataDir)).not.toBe(orphan);
    expect(await query(recovered.url, 'SELECT n FROM kept')).toEqual([{ n: 7 }]);
    await recovered.stop();
    // After a reboot the old pid may belong to another process (here: this one).
    fs.writeFileSync(
      pidFile(first.dataDir),
      `${process.pid}\n${first.dataDir}\n0\n5432\n${first.dataDir}\n\n0 0\nready   \n`,
    );
    const again = await start(storage);
    expect(await query(again.url, 'SELECT n FROM kept')).toEqual([{ n: 7 }]);
    expect(postmasterPid(again.dataDir)).not.toBe(process.pid);
    await again.stop();
  });

  it('refuses a database directory left by the PGlite engine, naming what to do', async () => {
    const storage = tempStorageDir('depot-pg-');
    dirs.push(storage);
    fs.mkdirSync(path.join(storage, 'db', 'base'), { recursive: true });
    fs.writeFileSync(path.join(storage, 'db', 'PG_VERSION'), '17\n');
    const error = await startEmbeddedPostgres({ storageDir: storage }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EmbeddedPostgresError);
    expect((error as Error).message).toMatch(/PGlite/);
    expect((error as Error).message).toMatch(/DATABASE_URL/);
    expect(fs.readdirSync(path.join(storage, 'db')).sort()).toEqual(['PG_VERSION', 'base']);
  });

  it('names DATABASE_URL on a platform it has no binaries for', async () => {
    await expect(findBinaries('sunos-sparc')).rejects.toThrow(
      /no embedded PostgreSQL binaries for sunos-sparc\. Set DATABASE_URL/,
    );
    expect(fs.existsSync(path.join(await findBinaries(), 'postgres'))).toBe(true);
  });

  it.runIf(process.getuid?.() === 0)(
    'as root, runs as postgres and places the cluster outside a STORAGE_DIR that user cannot reach',
    { timeout: 60_000 },
    async () => {
      // A clone under /root: mode 0700, which Depot must not widen.
      const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-pg-private-'));
      dirs.push(parent);
      const storage = path.join(parent, 'storage');
      const notices: string[] = [];
      const server = await start(storage, notices);
      dirs.push(path.dirname(server.dataDir));
      expect(fs.statSync(parent).mode & 0o777).toBe(0o700);
      expect(server.dataDir.startsWith(`${RELOCATED_ROOT}/`)).toBe(true);
      expect(fs.readlinkSync(path.join(storage, 'db'))).toBe(server.dataDir);
      expect(notices.join('\n')).toContain(server.dataDir);
      const owner = fs.statSync(server.dataDir).uid;
      expect(owner).not.toBe(0);
      expect(fs.statSync(`/proc/${postmasterPid(server.dataDir)}`).uid).toBe(owner);
      expect(await query(server.url, 'SELECT current_user AS who')).toEqual([{ who: 'depot' }]);
      await server.stop();
      // The next start finds it through the link.
      const later = await start(storage);
      expect(later.dataDir).toBe(server.dataDir);
      expect(later.created).toBe(false);
      await later.stop();
    },
  );
});
