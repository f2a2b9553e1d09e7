import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Program } from './programs.js';
import { freePort, tempStorageDir } from './server-process.js';

/**
 * A private PostgreSQL cluster from the same Debian binaries as the server of DATABASE_URL, for
 * tests that must stop and start "the external database" under Depot (faults): the shared
 * server of the run cannot be restarted while other test files use it.
 */
export interface PrivateCluster {
  url: string;
  /** Fast shutdown, `downMs` with no database, start again. */
  restart(downMs: number): Promise<void>;
  stop(): void;
}

/** The Debian binaries of DATABASE_URL's major version, as a program a test may lack. */
export async function clusterProgram(url: string): Promise<Program & { bindir: string }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ server_version_num: string }>('SHOW server_version_num');
  await client.end();
  const major = Math.floor(Number(rows[0]?.server_version_num) / 10_000);
  const bindir = `/usr/lib/postgresql/${major}/bin`;
  return {
    name: `PostgreSQL ${major}'s initdb (${bindir})`,
    debianPackage: `postgresql-${major}`,
    probe: [path.join(bindir, 'initdb'), '--version'],
    bindir,
  };
}

/** The postgres system user's ids when running as root (PostgreSQL refuses to run as root). */
export function postgresIdentity(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
}

export async function startPrivateCluster(bindir: string): Promise<PrivateCluster> {
  const dir = tempStorageDir('depot-pg-');
  const identity = postgresIdentity();
  if (identity) fs.chownSync(dir, identity.uid, identity.gid);
  const data = path.join(dir, 'data');
  const port = await freePort();
  const run = (program: string, args: string[]) => {
    const result = spawnSync(path.join(bindir, program), args, { ...identity, encoding: 'utf8', timeout: 120_000 });
    if (result.status !== 0) throw new Error(`${program} ${args.join(' ')}: ${result.stderr || result.stdout}`);
  };
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off`;
  const start = () =>
    run('pg_ctl', ['-D', data, '-l', path.join(dir, 'server.log'), '-w', '-t', '60', '-o', options, 'start']);
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restart: async (downMs) => {
      run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      await new Promise((resolve) => setTimeout(resolve, downMs));
      start();
    },
    stop: () => {
      spawnSync(path.join(bindir, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], { ...identity });
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
