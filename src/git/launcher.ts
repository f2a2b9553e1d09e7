import { type ChildProcess, fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/** What the git runners need of a child process: stdio streams, kill, `error` and `close` events. */
export interface Launched extends EventEmitter {
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  kill(): void;
}

const SPAWNER = fileURLToPath(new URL('./spawner.mjs', import.meta.url));

let spawner: { process: ChildProcess; socketPath: string; ready: Promise<boolean> } | undefined;

/** Starts the spawner process once (src/git/spawner.mjs says why it exists). */
function startSpawner() {
  if (spawner) return spawner;
  const socketPath = path.join(os.tmpdir(), `depot-spawner-${process.pid}-${randomBytes(4).toString('hex')}.sock`);
  const child = fork(SPAWNER, [socketPath], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv: [] });
  const ready = new Promise<boolean>((resolve) => {
    child.once('message', () => resolve(true));
    child.once('error', () => resolve(false));
    child.once('exit', () => resolve(false));
  });
  child.on('exit', () => {
    if (spawner?.process === child) spawner = undefined;
    fs.rm(socketPath, { force: true }, () => {});
  });
  // Neither keeps the server alive, nor outlives it.
  child.unref();
  child.channel?.unref();
  spawner = { process: child, socketPath, ready };
  return spawner;
}

function frame(type: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt8(type, 0);
  header.writeUInt32BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}

class RemoteProcess extends EventEmitter implements Launched {
  readonly stdout: Readable;
  readonly stderr = new Readable({ read() {} });
  readonly stdin: Writable;
  private socket: net.Socket | undefined;
  private readonly connected: Promise<net.Socket | null>;
  private finished = false;

  constructor(argv: string[], env: NodeJS.ProcessEnv, socketPath: Promise<string | null>) {
    super();
    this.stdout = new Readable({ read: () => this.socket?.resume() });
    this.connected = socketPath.then(
      (p) =>
        new Promise<net.Socket | null>((resolve) => {
          if (!p) return resolve(null);
          const socket = net.connect(p, () => resolve(socket));
          socket.once('error', () => resolve(null));
        }),
    );
    this.stdin = new Writable({
      write: (chunk: Buffer, _encoding, callback) => {
        void this.connected.then((s) =>
          s?.write(frame(2, chunk)) === false ? s.once('drain', () => callback()) : callback(),
        );
      },
      final: (callback) => {
        void this.connected.then((s) => {
          s?.write(frame(3, Buffer.alloc(0)));
          callback();
        });
      },
    });
    void this.connected.then((socket) => {
      if (!socket)
        return this.end(() =>
          this.emit('error', Object.assign(new Error('spawner unavailable'), { code: 'ESPAWNER' })),
        );
      this.socket = socket;
      this.attach(socket);
      socket.write(frame(1, Buffer.from(JSON.stringify({ argv, env }))));
    });
  }

  kill(): void {
    void this.connected.then((s) => {
      if (s && !s.destroyed) s.write(frame(4, Buffer.alloc(0)));
    });
  }

  private end(after: () => void): void {
    if (this.finished) return;
    this.finished = true;
    this.stdout.push(null);
    this.stderr.push(null);
    after();
  }

  private attach(socket: net.Socket): void {
    let buffer: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      while (buffer.length >= 5) {
        const length = buffer.readUInt32BE(1);
        if (buffer.length < 5 + length) break;
        const type = buffer.readUInt8(0);
        const payload = buffer.subarray(5, 5 + length);
        buffer = buffer.subarray(5 + length);
        if (type === 5) {
          if (!this.stdout.push(payload)) socket.pause();
        } else if (type === 6) {
          this.stderr.push(payload);
        } else if (type === 7) {
          const { code, signal } = JSON.parse(payload.toString('utf8')) as {
            code: number | null;
            signal: string | null;
          };
          this.end(() => this.emit('close', code, signal));
        } else if (type === 8) {
          const { code, message } = JSON.parse(payload.toString('utf8')) as { code: string; message: string };
          this.end(() => this.emit('error', Object.assign(new Error(message), { code })));
        }
      }
    });
    socket.on('close', () => this.end(() => this.emit('close', null, 'SIGKILL')));
    socket.on('error', () => {});
  }
}

/** Runs `argv[0]` as a local child (when the spawner cannot be used). */
function launchLocal(argv: string[], env: NodeJS.ProcessEnv): Launched {
  const child = spawn(argv[0] as string, argv.slice(1), { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const kill = child.kill.bind(child);
  const launched = child as unknown as Launched;
  launched.kill = () => {
    kill('SIGKILL');
  };
  return launched;
}

/** DEPOT_SPAWNER=off starts processes directly (debugging; slower with PGlite). */
const useSpawner = process.env.DEPOT_SPAWNER !== 'off';

/**
 * Starts a process through the spawner (off the server's event loop, see spawner.mjs), or
 * directly when asked (`direct`: bulk streams, where one more copy of every byte through the
 * spawner costs more than the fork) or when the spawner is off.
 */
export function launch(argv: string[], env: NodeJS.ProcessEnv, options: { direct?: boolean } = {}): Launched {
  if (!useSpawner || options.direct) return launchLocal(argv, env);
  const s = startSpawner();
  return new RemoteProcess(
    argv,
    env,
    s.ready.then((ok) => (ok ? s.socketPath : null)),
  );
}

/** Stops the spawner (tests, shutdown). */
export function stopSpawner(): void {
  spawner?.process.kill();
  spawner = undefined;
}
