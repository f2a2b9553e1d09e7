import { randomBytes } from 'node:crypto';
import type { Stats } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { processAlive } from './process-alive.js';

/**
 * A file made once and read by many, across server processes that share a directory: the first
 * process to want it claims it and writes it; every reader, in any process, reads it while it
 * grows, at its own pace, and the finished file is then served as it is.
 *
 * On disk, for a finished file `<name>`:
 *   `<name>.<nonce>.part`  the file being written (one per generation)
 *   `<name>.lock`          the claim: `{host, pid, boot, nonce}`, hard-linked into place so it
 *                          appears whole or not at all
 *   `<name>`               the finished file: fsynced, renamed into place, then made read-only
 *
 * A reader holds its file open and learns how it ends from the file itself, whatever happens to
 * the names: read-only (no owner write bit) means finished, unlinked means the generation failed,
 * an owner process that is gone or a heartbeat (mtime) older than STALE_MS means it died. A
 * partial file is never reachable under the finished name, also after a crash: only a rename of
 * a complete, fsynced file puts it there. Claims of dead processes are taken over; two takeovers
 * racing can at worst generate twice, each reader following its own generation.
 */

/** How often a producer touches its claim and its partial file. */
export const HEARTBEAT_MS = 1000;
/** A partial file or claim untouched this long belongs to a producer that died. */
export const STALE_MS = 15_000;
/** How long a reader at the end of a growing file waits before it looks again. */
const POLL_MS = 10;
/** One read of a shared file; with the stream's buffer, what a reader holds at most. */
const CHUNK_BYTES = 256 * 1024;
const PART_MODE = 0o600;
const DONE_MODE = 0o444;
/** Tells this process from an earlier one that had the same pid (containers). */
const BOOT = randomBytes(8).toString('hex');
const HOST = os.hostname();

interface Claim {
  host: string;
  pid: number;
  boot: string;
  nonce: string;
}

/** Where a reader's file came from: finished, generated for it, or joined while generating. */
export type SharedFileOrigin = 'hit' | 'miss' | 'joined';

/** How a generation ended, for the producer's caller (metrics, eviction). */
export type Generated = { ok: true; size: number } | { ok: false; error: unknown };

export interface SharedFileOptions {
  /** Writes the content into `out` and resolves once it is all written. */
  produce(out: Writable): Promise<void>;
  /** Called once the producer is done, in the producing process. */
  settled?(result: Generated): void;
}

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether a claim's producer can still be running: its heartbeat is fresh and, on this host, it lives. */
function claimAlive(claim: Claim, touchedMs: number): boolean {
  if (Date.now() - touchedMs > STALE_MS) return false;
  if (claim.host !== HOST) return true;
  if (claim.pid === process.pid) return claim.boot === BOOT;
  return processAlive(claim.pid);
}

const isFinished = (stat: Stats) => (stat.mode & 0o200) === 0;

async function openIfExists(file: string): Promise<FileHandle | null> {
  try {
    return await fs.open(file, 'r');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return null;
    throw error;
  }
}

async function removeQuietly(file: string): Promise<void> {
  await fs.rm(file, { force: true });
}

async function readClaim(lock: string): Promise<{ claim: Claim; touchedMs: number } | null> {
  try {
    const [text, stat] = await Promise.all([fs.readFile(lock, 'utf8'), fs.stat(lock)]);
    const claim = JSON.parse(text) as Claim;
    if (typeof claim.nonce !== 'string' || !/^[0-9a-f]+$/.test(claim.nonce)) throw new Error('bad claim');
    return { claim, touchedMs: stat.mtimeMs };
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return null;
    // A claim that cannot be read was left half-written by hand or by a full disk: stale.
    return { claim: { host: '', pid: 0, boot: '', nonce: '0' }, touchedMs: 0 };
  }
}

/** Puts a claim into place whole, or returns false when another one is there. */
async function publishClaim(lock: string, claim: Claim): Promise<boolean> {
  const temp = `${lock}.${claim.nonce}.tmp`;
  try {
    // Inside the try: a write that fails (a full disk) leaves its empty file to remove too.
    await fs.writeFile(temp, JSON.stringify(claim), { mode: PART_MODE });
    await fs.link(temp, lock);
    return true;
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return false;
    throw error;
  } finally {
    await removeQuietly(temp);
  }
}

const partPath = (file: string, nonce: string) => `${file}.${nonce}.part`;
const lockPath = (file: string) => `${file}.lock`;

/** Whether a name in a shared-file directory is a partial file, a claim or a claim being written. */
export const isWorkFile = (name: string) => /\.(part|lock|lock\.[0-9a-f]+\.tmp)$/.test(name);

/** One reader's open file. Read it with `read` (which closes it at the end) or `close` it. */
export class SharedFile {
  private closed = false;

  constructor(
    private readonly handle: FileHandle,
    readonly origin: SharedFileOrigin,
    /** The producer being followed; null for a finished file. */
    private readonly claim: Claim | null,
  ) {}

  /** Where the file stands: finished, still growing, or abandoned; and how much of it there is. */
  private async state(): Promise<{ state: 'done' | 'growing' | 'failed'; size: number }> {
    const stat = await this.handle.stat();
    if (this.claim === null || isFinished(stat)) return { state: 'done', size: stat.size };
    if (stat.nlink === 0 || !claimAlive(this.claim, stat.mtimeMs)) return { state: 'failed', size: stat.size };
    return { state: 'growing', size: stat.size };
  }

  private async settledState(): Promise<{ state: 'done' | 'growing'; size: number }> {
    const state = await this.state();
    if (state.state === 'failed') throw new Error('the generation of a shared file failed');
    return state as { state: 'done' | 'growing'; size: number };
  }

  /** The size of the finished file, or null while it grows. Throws when its generation failed. */
  async size(): Promise<number | null> {
    const { state, size } = await this.settledState();
    return state === 'done' ? size : null;
  }

  /** Waits until the file has its first byte or is finished. Throws when its generation failed first. */
  async started(): Promise<void> {
    for (;;) {
      const { state, size } = await this.settledState();
      if (state === 'done' || size > 0) return;
      await sleep(POLL_MS);
    }
  }

  /** Waits until the file is finished; its size. Throws when its generation failed. */
  async finished(): Promise<number> {
    for (;;) {
      const size = await this.size();
      if (size !== null) return size;
      await sleep(POLL_MS);
    }
  }

  /**
   * The bytes from `start` to `end` (inclusive; to the end of the file when left out), as they
   * are written. The stream errors if the generation fails; it closes the file when it ends.
   */
  read(start = 0, end?: number): Readable {
    let position = start;
    const stream = new Readable({
      highWaterMark: CHUNK_BYTES,
      read: () => void pump(),
      destroy: (error, callback) => {
        this.close().then(
          () => callback(error),
          () => callback(error),
        );
      },
    });
    const pump = async () => {
      try {
        for (;;) {
          const want = end === undefined ? CHUNK_BYTES : Math.min(CHUNK_BYTES, end + 1 - position);
          if (want <= 0) {
            stream.push(null);
            return;
          }
          const buffer = Buffer.allocUnsafe(want);
          const { bytesRead } = await this.handle.read(buffer, 0, want, position);
          if (stream.destroyed) return;
          if (bytesRead > 0) {
            position += bytesRead;
            stream.push(bytesRead === want ? buffer : buffer.subarray(0, bytesRead));
            return;
          }
          const state = await this.settledState();
          if (state.state === 'done') {
            // Bytes written between the read and the look at the file are read first.
            if (position >= state.size) {
              stream.push(null);
              return;
            }
            continue;
          }
          await sleep(POLL_MS);
          if (stream.destroyed) return;
        }
      } catch (error) {
        stream.destroy(error as Error);
      }
    };
    stream.once('end', () => void this.close());
    return stream;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.handle.close().catch(() => {});
  }
}

/** The finished file at `file`, or null; a hit does not start anything. */
export async function openFinished(file: string): Promise<SharedFile | null> {
  const handle = await openIfExists(file);
  return handle ? new SharedFile(handle, 'hit', null) : null;
}

/**
 * Opens `file`: the finished one when it exists, else the generation in flight in any process,
 * else a new generation by `options.produce`, which runs to its end even when every reader has
 * gone (the next request then finds the file finished).
 */
export async function openShared(file: string, options: SharedFileOptions): Promise<SharedFile> {
  const lock = lockPath(file);
  for (let attempt = 0; attempt < 200; attempt++) {
    const finished = await openFinished(file);
    if (finished) return finished;

    const current = await readClaim(lock);
    if (current) {
      if (claimAlive(current.claim, current.touchedMs)) {
        const part = await openIfExists(partPath(file, current.claim.nonce));
        if (part) return new SharedFile(part, 'joined', current.claim);
        // Renamed (finished) or removed (failed) since the claim was read: look again.
        await sleep(POLL_MS);
      } else {
        // Its producer died: the claim and what it wrote go.
        await removeQuietly(partPath(file, current.claim.nonce));
        await removeQuietly(lock);
      }
      continue;
    }

    const claim: Claim = { host: HOST, pid: process.pid, boot: BOOT, nonce: randomBytes(12).toString('hex') };
    const part = partPath(file, claim.nonce);
    await fs.mkdir(path.dirname(file), { recursive: true });
    const writer = await fs.open(part, 'wx', PART_MODE).catch((error: unknown) => {
      // The clean-up removed the folder, empty, in between: make it again.
      if (errorCode(error) === 'ENOENT') return null;
      throw error;
    });
    if (!writer) continue;
    let reader: FileHandle | null = null;
    try {
      // The mode decides what readers see: owner-writable until finished, whatever the umask.
      await writer.chmod(PART_MODE);
      if (await publishClaim(lock, claim)) {
        // Finished by another process between the first look and the claim.
        if (!(await fs.stat(file).catch(() => null))) {
          reader = await fs.open(part, 'r');
          void generate(file, part, lock, writer, options);
          return new SharedFile(reader, 'miss', claim);
        }
        await removeQuietly(lock);
      }
    } catch (error) {
      await reader?.close();
      await writer.close();
      await removeQuietly(part);
      throw error;
    }
    await writer.close();
    await removeQuietly(part);
  }
  throw new Error(`could not open the shared file ${file}`);
}

/**
 * Writes to the end of `file`, in order, with back-pressure. (A FileHandle's own write stream
 * keeps the handle referenced when it does not close it, and the handle's close then never ends.)
 */
function appendTo(file: FileHandle): Writable {
  const writeAll = async (chunk: Buffer) => {
    for (let offset = 0; offset < chunk.length; ) {
      offset += (await file.write(chunk, offset, chunk.length - offset)).bytesWritten;
    }
  };
  return new Writable({
    highWaterMark: CHUNK_BYTES,
    write(chunk: Buffer, _encoding, callback) {
      writeAll(chunk).then(() => callback(), callback);
    },
  });
}

/**
 * The producer: writes, fsyncs, renames into place, drops its claim, then marks the file finished;
 * on failure it drops the claim, then removes the partial file.
 */
async function generate(
  file: string,
  part: string,
  lock: string,
  writer: FileHandle,
  options: SharedFileOptions,
): Promise<void> {
  const beat = setInterval(() => {
    const now = new Date();
    void writer.utimes(now, now).catch(() => {});
    void fs.utimes(lock, now, now).catch(() => {});
  }, HEARTBEAT_MS);
  beat.unref();
  let result: Generated;
  try {
    await options.produce(appendTo(writer));
    await writer.sync();
    await fs.rename(part, file);
    const dir = await fs.open(path.dirname(file), 'r');
    await dir.sync().finally(() => dir.close());
    // The claim goes before readers learn the end: once they have, only the finished file is left.
    await removeQuietly(lock);
    // Readers finish now, once the name is in place: a request they make next finds the file.
    await writer.chmod(DONE_MODE);
    const { size } = await writer.stat();
    await writer.close();
    result = { ok: true, size };
  } catch (error) {
    // The claim first, then the partial file: its unlinking tells readers the generation failed,
    // and by then nothing of it is left.
    await removeQuietly(lock);
    await removeQuietly(part);
    await writer.close().catch(() => {});
    result = { ok: false, error };
  } finally {
    clearInterval(beat);
  }
  options.settled?.(result);
}
