import { type ChildProcess, fork, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/** What the git runners need of a child process: stdio streams, kill, `error` and `close` events. */
export interface Launched extends EventEmitter {
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** The child's process id, once known. */
  readonly pid?: number | undefined;
  kill(): void;
}

const SPAWNER = fileURLToPath(new URL('./spawner.mjs', import.meta.url));

/** Inputs up to this size travel in the start message; larger ones are written to git's stdin pipe. */
const INLINE_INPUT_BYTES = 64 * 1024;

interface SpawnerMessage {
  op: 'stdio' | 'stderr' | 'exit' | 'error';
  id: number;
  fd?: 0 | 1;
  pid?: number;
  data?: string;
  code?: number | string | null;
  signal?: string | null;
  message?: string;
}

class Spawner {
  readonly process: ChildProcess;
  readonly ready: Promise<boolean>;
  private readonly running = new Map<number, RemoteProcess>();
  private nextId = 1;
  /** Processes asked for and not yet ended. */
  private held = 0;

  constructor() {
    this.process = fork(SPAWNER, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv: [] });
    const child = this.process;
    this.ready = new Promise<boolean>((resolve) => {
      child.once('message', () => resolve(true));
      child.once('error', () => resolve(false));
      child.once('exit', () => resolve(false));
    });
    this.ready.then((ok) => {
      if (ok) child.on('message', (message: SpawnerMessage, handle?: net.Socket) => this.receive(message, handle));
    });
    child.on('error', () => {});
    child.on('exit', () => {
      if (spawner === this) spawner = undefined;
      for (const remote of this.running.values()) remote.lost();
      this.running.clear();
      this.held = 0;
    });
    // Neither keeps the server alive when idle, nor outlives it.
    child.unref();
    child.channel?.unref();
  }

  start(
    remote: RemoteProcess,
    argv: string[],
    env: NodeJS.ProcessEnv,
    input: Buffer | undefined,
    output: net.Socket | undefined,
  ): void {
    // Something is under way: the channel keeps the process alive (a CLI awaiting git) until done.
    this.hold(1);
    void this.ready.then((ok) => {
      if (!ok || !this.process.connected) {
        this.hold(-1);
        return remote.lost();
      }
      // The socket's own handle goes, not the net.Socket: sent as a socket, Node would count the
      // connection as the spawner's (net.Server's worker tracking) and close it here.
      const handle = output && (output as unknown as { _handle: object | null })._handle;
      if (output && !handle) {
        this.hold(-1);
        return remote.failed('EPIPE', 'the output socket is closed');
      }
      const id = this.nextId++;
      remote.id = id;
      this.running.set(id, remote);
      const message = { op: 'start', id, argv, env, input: input?.toString('base64'), output: !!output };
      if (handle) this.process.send(message, handle as net.Socket);
      else this.process.send(message);
    });
  }

  private hold(delta: number): void {
    this.held += delta;
    if (this.held === 0) this.process.channel?.unref();
    else if (this.held === delta) this.process.channel?.ref();
  }

  kill(id: number): void {
    if (this.running.has(id) && this.process.connected) this.process.send({ op: 'kill', id });
  }

  private receive(message: SpawnerMessage, handle: net.Socket | undefined): void {
    const remote = this.running.get(message.id);
    if (!remote) {
      handle?.destroy();
      return;
    }
    if (message.op === 'stdio' && handle) remote.attach(message.fd ?? 1, handle, message.pid);
    else if (message.op === 'stderr') remote.stderr.push(Buffer.from(message.data ?? '', 'base64'));
    else if (message.op === 'exit' || message.op === 'error') {
      this.running.delete(message.id);
      this.hold(-1);
      if (message.op === 'exit') remote.exited(message.code as number | null, message.signal ?? null);
      else remote.failed(String(message.code), message.message ?? 'spawn failed');
    }
  }
}

let spawner: Spawner | undefined;

/**
 * A child started by the spawner. Its stdin and stdout are the child's own pipes, received over
 * the IPC channel; until they arrive, writes wait and reads are empty. `close` follows both the
 * child's exit and the end of its stdout, as with a local child.
 */
class RemoteProcess extends EventEmitter implements Launched {
  readonly stdout: Readable;
  readonly stderr = new Readable({ read() {} });
  readonly stdin: Writable;
  pid: number | undefined;
  id: number | undefined;
  private out: net.Socket | undefined;
  private readonly input: Promise<net.Socket | null>;
  private giveInput!: (socket: net.Socket | null) => void;
  private exit: [number | null, string | null] | undefined;
  private outEnded = false;
  private finished = false;
  private killed = false;

  constructor(
    private readonly owner: Spawner,
    argv: string[],
    env: NodeJS.ProcessEnv,
    input: Buffer | undefined,
    output: net.Socket | undefined,
  ) {
    super();
    this.stdout = new Readable({
      read: () => this.out?.resume(),
      destroy: (error, callback) => {
        // The reader stopped early (client went away): close the pipe, so the child stops too.
        this.out?.destroy();
        callback(error);
      },
    });
    this.input = new Promise((resolve) => {
      this.giveInput = resolve;
    });
    this.stdin = new Writable({
      write: (chunk: Buffer, _encoding, callback) => {
        void this.input.then((s) => {
          if (!s || s.destroyed) return callback();
          if (s.write(chunk)) callback();
          else s.once('drain', () => callback());
        });
      },
      final: (callback) => {
        void this.input.then((s) => {
          s?.end();
          callback();
        });
      },
    });
    if (input !== undefined) this.giveInput(null);
    owner.start(this, argv, env, input, output);
  }

  kill(): void {
    this.killed = true;
    if (this.id !== undefined && !this.exit) this.owner.kill(this.id);
  }

  attach(fd: 0 | 1, socket: net.Socket, pid: number | undefined): void {
    this.pid ??= pid;
    socket.on('error', () => {});
    if (fd === 0) {
      this.giveInput(socket);
      // A child that exits without reading its input ends the pipe: nothing more to write.
      socket.resume();
      return;
    }
    this.out = socket;
    if (this.stdout.destroyed) socket.destroy();
    socket.on('data', (chunk: Buffer) => {
      if (!this.stdout.push(chunk)) socket.pause();
    });
    socket.on('close', () => {
      this.outEnded = true;
      this.settle();
    });
    if (this.killed) this.kill();
  }

  exited(code: number | null, signal: string | null): void {
    this.exit = [code, signal];
    this.giveInput(null);
    this.settle();
  }

  failed(code: string, message: string): void {
    this.out?.destroy();
    this.giveInput(null);
    this.end(() => this.emit('error', Object.assign(new Error(message), { code })));
  }

  /** The spawner went away: its child, orphaned, is stopped here (its exit was not seen yet). */
  lost(): void {
    if (this.pid !== undefined && !this.exit) {
      try {
        process.kill(this.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    this.out?.destroy();
    this.giveInput(null);
    if (this.id === undefined)
      this.end(() => this.emit('error', Object.assign(new Error('spawner unavailable'), { code: 'ESPAWNER' })));
    else this.end(() => this.emit('close', null, 'SIGKILL'));
  }

  private settle(): void {
    if (this.exit && (this.outEnded || !this.out)) {
      const [code, signal] = this.exit;
      this.end(() => this.emit('close', code, signal));
    }
  }

  private end(after: () => void): void {
    if (this.finished) return;
    this.finished = true;
    this.stdout.push(null);
    this.stderr.push(null);
    after();
  }
}

/** Runs `argv[0]` as a local child (when the spawner is off). */
function launchLocal(argv: string[], env: NodeJS.ProcessEnv, output: net.Socket | undefined): Launched {
  const stdio = output ? ['pipe', 'ignore', 'pipe', output] : ['pipe', 'pipe', 'pipe'];
  const child = spawn(argv[0] as string, argv.slice(1), { env, stdio: stdio as ['pipe', 'pipe', 'pipe'] });
  const kill = child.kill.bind(child);
  const launched = child as unknown as Launched;
  // Writing to `output`, the child has no stdout here: an empty one keeps the interface.
  if (output) launched.stdout = Readable.from([]);
  launched.kill = () => {
    kill('SIGKILL');
  };
  return launched;
}

/** DEPOT_SPAWNER=off starts processes from the server itself (debugging; blocks it with PGlite). */
const useSpawner = process.env.DEPOT_SPAWNER !== 'off';

/**
 * Starts a process through the spawner (off the server's event loop, see spawner.mjs). With
 * `input`, that is the whole of the child's stdin; without it, the caller writes and ends `stdin`.
 * With `output`, the child writes its stdout straight to that socket (a client's connection) and
 * `stdout` here is empty; the caller must not write to the socket until the child has exited.
 */
export function launch(
  argv: string[],
  env: NodeJS.ProcessEnv,
  options: { input?: string | Buffer; output?: net.Socket } = {},
): Launched {
  const { output } = options;
  // libuv makes a child's fds 0 to 2 blocking, and a socket's flags are shared by every process
  // holding it: as git's stdout, the server's own connection would turn blocking. The socket goes
  // in as fd 3 instead (left as it is) and sh moves it onto stdout (dup2 keeps the flags). git
  // waits out EAGAIN on a non-blocking stdout with poll().
  if (output) argv = ['sh', '-c', 'exec "$@" >&3 3>&-', 'sh', ...argv];
  if (!useSpawner) return withInput(launchLocal(argv, env, output), options.input);
  spawner ??= new Spawner();
  const input = options.input === undefined ? undefined : Buffer.from(options.input);
  if (input !== undefined && input.length > INLINE_INPUT_BYTES)
    return withInput(new RemoteProcess(spawner, argv, env, undefined, output), input);
  return new RemoteProcess(spawner, argv, env, input, output);
}

/** Writes `input` (when given) to a child's stdin and closes it. */
function withInput(child: Launched, input: string | Buffer | undefined): Launched {
  if (input !== undefined) {
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  }
  return child;
}

/** Stops the spawner (tests, shutdown). */
export function stopSpawner(): void {
  spawner?.process.kill();
  spawner = undefined;
}
