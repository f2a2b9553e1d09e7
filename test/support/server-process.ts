import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** The real entry point (`npm start` → src/main.ts) as its own process, for crash tests. */
const root = path.resolve(import.meta.dirname, '..', '..');
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');
/** A clean environment: vitest's own variables (BASE_URL among them) must not leak in. */
const baseEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp' };

/**
 * A temporary STORAGE_DIR for a server or CLI process on the embedded database. mkdtemp makes it
 * 0700; run as root, the database runs as the postgres user, who must reach it (elsewhere Depot
 * would place the cluster under /var/lib/depot, outside the test's clean-up).
 */
export function tempStorageDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(dir, 0o755);
  return dir;
}

/** SIGKILL to the embedded database server of STORAGE_DIR, if one runs. */
export function killEmbeddedDatabase(storageDir: string): void {
  try {
    const pid = Number(fs.readFileSync(path.join(storageDir, 'db', 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (pid > 0) process.kill(pid, 'SIGKILL');
  } catch {
    // none running
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface ServerProcess {
  child: ChildProcess;
  base: string;
  output(): string;
  /** SIGKILL to the whole process group: the server, its git spawner and every git it started. */
  crash(): Promise<void>;
}

/**
 * Starts `src/main.ts` in a process group of its own and waits until it is ready, so a crash
 * can take down everything it started at once, as a power cut would.
 */
export async function startServerProcess(env: Record<string, string>, timeoutMs = 90_000): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(tsx, ['src/main.ts'], {
    cwd: root,
    env: { ...baseEnv, LOG_LEVEL: 'warn', PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout?.on('data', (d) => {
    output += d;
  });
  child.stderr?.on('data', (d) => {
    output += d;
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited during start-up:\n${output}`);
    try {
      if ((await fetch(`${base}/-/readiness`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`server at ${base} did not become ready:\n${output}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    child,
    base,
    output: () => output,
    crash: async () => {
      try {
        process.kill(-(child.pid as number), 'SIGKILL');
      } catch {
        // already gone
      }
      await exited;
      // The group's other members (node under tsx, the spawner, git) may still be dying; the
      // next server must not find the old one holding the database lock.
      // The embedded database runs in a process group of its own: a power cut takes it too.
      if (env.STORAGE_DIR && !env.DATABASE_URL) killEmbeddedDatabase(env.STORAGE_DIR);
      for (let i = 0; i < 500; i++) {
        try {
          process.kill(-(child.pid as number), 0);
        } catch {
          return;
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error('the crashed server group did not go away');
    },
  };
}

export interface ServerAnswer {
  status: number;
  body: any;
  text: string;
}

/** One API request to a server process, its body parsed when it is JSON (30 s at the most). */
export async function serverRequest(
  base: string,
  token: string,
  method: string,
  route: string,
  body?: unknown,
): Promise<ServerAnswer> {
  const res = await fetch(`${base}/api/v4${route}`, {
    method,
    headers: { 'PRIVATE-TOKEN': token, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, text };
}
