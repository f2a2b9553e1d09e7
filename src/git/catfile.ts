import { ownBytes, ownString } from '../lib/own.js';
import { GIT_TIMEOUT_MS, gitEnvironment } from './command.js';
import { classifyGitFailure, GitError, InvalidArgumentError } from './errors.js';
import { type Launched, launch } from './launcher.js';

/**
 * Long-lived `git cat-file --batch-command` processes per repository (Gitaly's catfile cache):
 * object reads cost a pipe round trip instead of a process start. Each process answers its
 * queue in order; a repository gets up to MAX_PROCESSES_PER_REPO of them under load, the pool
 * holds at most MAX_REPOSITORIES, idle ones are stopped after IDLE_MS, and busy ones retire
 * after CATFILE_MAX_AGE_MS.
 */
const MAX_PROCESSES_PER_REPO = 4;
const MAX_REPOSITORIES = 64;
const IDLE_MS = 30_000;
/**
 * git keeps every commit and tree it parsed to resolve a name (`main:README.md`) for the life of
 * the process, and its delta base cache up to 96 MiB: a process that is never idle grows with the
 * history it is asked about (under the load bench, eight such processes grew 6.3 MiB a minute
 * together, without end). Past this age a process takes no new requests and stops once its queue
 * is answered: at a minute the eight hold under 10 MiB (at five minutes they ran up to 40 MiB
 * before each renewal), and a new process costs a few milliseconds once a minute.
 */
export const CATFILE_MAX_AGE_MS = 60_000;
/** Objects larger than this are never read through the batch process (stream them instead). */
export const MAX_BATCH_OBJECT_BYTES = 16 * 1024 * 1024;

export type ObjectType = 'blob' | 'tree' | 'commit' | 'tag';

export interface ObjectInfo {
  oid: string;
  type: ObjectType;
  size: number;
}

export interface ObjectData extends ObjectInfo {
  data: Buffer;
}

interface Pending {
  kind: 'info' | 'contents';
  resolve(value: ObjectInfo | ObjectData | null): void;
  reject(error: Error): void;
}

class BatchProcess {
  private readonly child: Launched;
  private readonly queue: Pending[] = [];
  private buffer: Buffer = Buffer.alloc(0);
  private header: ObjectInfo | null = null;
  private chunks: Buffer[] = [];
  private received = 0;
  dead = false;
  readonly started = Date.now();
  lastUsed = this.started;
  /** Armed while requests wait: git that answers nothing for GIT_TIMEOUT_MS is stopped. */
  private watchdog: NodeJS.Timeout | undefined;

  constructor(
    readonly gitDir: string,
    private readonly onExit: (p: BatchProcess) => void,
  ) {
    this.child = launch(['git', `--git-dir=${gitDir}`, 'cat-file', '--batch-command'], gitEnvironment());
    let stderr = '';
    this.child.stdout.on('data', (chunk: Buffer) => this.onData(chunk));
    this.child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    this.child.stdin.on('error', () => {});
    this.child.on('error', (error: Error) => this.fail(new GitError('failed', error.message)));
    // A missing repository makes git exit at once: classify it, so callers can answer 404.
    this.child.on('close', (code: number | null) => this.fail(classifyGitFailure(['cat-file'], code, stderr)));
  }

  get pending(): number {
    return this.queue.length;
  }

  request(kind: 'info' | 'contents', rev: string): Promise<ObjectInfo | ObjectData | null> {
    if (this.dead) return Promise.reject(new GitError('failed', 'cat-file process exited'));
    this.lastUsed = Date.now();
    return new Promise((resolve, reject) => {
      this.queue.push({ kind, resolve, reject });
      if (!this.watchdog) {
        this.watchdog = setTimeout(() => this.timeOut(), GIT_TIMEOUT_MS);
        this.watchdog.unref();
      }
      this.child.stdin.write(`${kind} ${rev}\n`);
    });
  }

  /** A process that stopped answering (a hung disk, a stopped process): its callers get a timeout. */
  private timeOut(): void {
    this.watchdog = undefined;
    this.child.kill();
    this.fail(new GitError('timeout', 'git cat-file did not answer in time'));
  }

  /** Past CATFILE_MAX_AGE_MS: given no new requests when another process can take them. */
  expired(now: number): boolean {
    return now - this.started > CATFILE_MAX_AGE_MS;
  }

  /** Leaves the pool at once (so no request is given to a process on its way out), then ends git. */
  stop(): void {
    if (this.dead) return;
    this.fail(new GitError('failed', 'cat-file process stopped'));
    this.child.kill();
  }

  private fail(error: Error): void {
    if (this.dead) return;
    this.dead = true;
    clearTimeout(this.watchdog);
    for (const p of this.queue.splice(0)) p.reject(error);
    this.onExit(this);
  }

  private onData(chunk: Buffer): void {
    this.watchdog?.refresh();
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const current = this.queue[0];
      if (!current) {
        this.buffer = Buffer.alloc(0);
        clearTimeout(this.watchdog);
        this.watchdog = undefined;
        return;
      }
      if (this.header === null) {
        const eol = this.buffer.indexOf(10);
        if (eol < 0) return;
        const line = this.buffer.subarray(0, eol).toString('utf8');
        this.buffer = this.buffer.subarray(eol + 1);
        const parts = line.split(' ');
        if (parts.length !== 3 || !/^[0-9a-f]{40,64}$/.test(parts[0] as string)) {
          // `<rev> missing` or `<rev> ambiguous`
          this.queue.shift();
          current.resolve(null);
          continue;
        }
        const info: ObjectInfo = { oid: parts[0] as string, type: parts[1] as ObjectType, size: Number(parts[2]) };
        if (current.kind === 'info') {
          this.queue.shift();
          current.resolve(info);
          continue;
        }
        this.header = info;
        this.chunks = [];
        this.received = 0;
      }
      // Contents: `size` bytes then a newline.
      const need = this.header.size + 1 - this.received;
      if (this.buffer.length < need) {
        this.chunks.push(this.buffer);
        this.received += this.buffer.length;
        this.buffer = Buffer.alloc(0);
        return;
      }
      this.chunks.push(this.buffer.subarray(0, need));
      this.buffer = this.buffer.subarray(need);
      const data = Buffer.concat(this.chunks).subarray(0, this.header.size);
      const header = this.header;
      this.header = null;
      this.chunks = [];
      this.queue.shift();
      current.resolve({ ...header, data });
    }
  }
}

class CatFilePool {
  private readonly byRepo = new Map<string, BatchProcess[]>();
  private sweeper: NodeJS.Timeout | undefined;

  private pick(gitDir: string): BatchProcess {
    const now = Date.now();
    for (const p of this.byRepo.get(gitDir) ?? []) if (p.pending === 0 && p.expired(now)) p.stop();
    let procs = this.byRepo.get(gitDir);
    if (procs) {
      // Refresh LRU order.
      this.byRepo.delete(gitDir);
      this.byRepo.set(gitDir, procs);
    } else {
      procs = [];
      this.byRepo.set(gitDir, procs);
      this.evictOverflow();
    }
    // Expired processes left are still answering their queue: busy, never idle here, and not
    // counted against the limit (they end as soon as they are done).
    const idle = procs.find((p) => p.pending === 0);
    if (idle) return idle;
    const fresh = procs.filter((p) => !p.expired(now));
    if (fresh.length < MAX_PROCESSES_PER_REPO) {
      const proc = new BatchProcess(gitDir, (p) => this.forget(p));
      procs.push(proc);
      this.startSweeper();
      return proc;
    }
    return fresh.reduce((a, b) => (b.pending < a.pending ? b : a));
  }

  private forget(proc: BatchProcess): void {
    const procs = this.byRepo.get(proc.gitDir);
    if (!procs) return;
    const i = procs.indexOf(proc);
    if (i >= 0) procs.splice(i, 1);
    if (procs.length === 0) this.byRepo.delete(proc.gitDir);
  }

  private evictOverflow(): void {
    while (this.byRepo.size > MAX_REPOSITORIES) {
      const oldest = this.byRepo.keys().next().value as string;
      this.evict(oldest);
    }
  }

  private startSweeper(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const procs of [...this.byRepo.values()]) {
        for (const p of [...procs]) if (p.pending === 0 && (now - p.lastUsed > IDLE_MS || p.expired(now))) p.stop();
      }
      if (this.byRepo.size === 0 && this.sweeper) {
        clearInterval(this.sweeper);
        this.sweeper = undefined;
      }
    }, IDLE_MS / 2);
    this.sweeper.unref();
  }

  /** Stops the processes of a repository (before it is moved or deleted). */
  evict(gitDir: string): void {
    for (const p of this.byRepo.get(gitDir) ?? []) p.stop();
    this.byRepo.delete(gitDir);
  }

  /** Stops every process (shutdown, tests). */
  close(): void {
    for (const gitDir of [...this.byRepo.keys()]) this.evict(gitDir);
  }

  async request(gitDir: string, kind: 'info' | 'contents', rev: string) {
    if (rev === '' || /[\n\r\0]/.test(rev)) throw new InvalidArgumentError('invalid object name');
    // One retry: a pooled process may have died since it was last used.
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.pick(gitDir).request(kind, rev);
      } catch (error) {
        if (attempt >= 1 || !(error instanceof GitError) || ['repository_missing', 'timeout'].includes(error.code)) {
          throw error;
        }
      }
    }
  }
}

const pool = new CatFilePool();

/**
 * A revision that names the same object for ever: a full object id, alone, peeled
 * (`<id>^{commit}`, `<id>^{tree}`) or with a path (`<id>:<path>`). What git answers for it can be
 * kept; names of refs (`main`, `v1.0:README.md`) move and are always asked.
 */
const IMMUTABLE_REV = /^(?:[0-9a-f]{40}|[0-9a-f]{64})(?:\^\{(?:commit|tree)\}|:.*)?$/s;
/** Objects up to this size are kept whole, up to CACHE_BYTES together. */
const CACHE_OBJECT_BYTES = 64 * 1024;
const CACHE_BYTES = 32 * 1024 * 1024;
const CACHE_INFOS = 50_000;
/** What an entry costs beside its bytes (the Buffer, its ArrayBuffer, the record, the Map entry), counted against CACHE_BYTES. */
const CACHE_ENTRY_OVERHEAD = 256;

/**
 * What the batch processes answered about immutable revisions, per repository: the object a
 * revision names, and the contents of small objects by id. Objects never change, so a warm small
 * read (a tree or blob at a commit id, a blob by id) costs no round trip to git. Only objects
 * found are kept (a missing one may be pushed later), and per repository, since another
 * repository may not have them. Bounded by count and bytes, coarsely (a miss costs a round trip).
 */
class ObjectCache {
  /** Per repository: revision → info, and object id → contents. */
  private readonly repos = new Map<string, { infos: Map<string, ObjectInfo>; objects: Map<string, ObjectData> }>();
  private infoCount = 0;
  private bytes = 0;

  private repo(gitDir: string) {
    let repo = this.repos.get(gitDir);
    if (!repo) {
      repo = { infos: new Map(), objects: new Map() };
      this.repos.set(ownString(gitDir), repo);
    }
    return repo;
  }

  info(gitDir: string, rev: string): ObjectInfo | undefined {
    return this.repos.get(gitDir)?.infos.get(rev);
  }

  keepInfo(gitDir: string, rev: string, info: ObjectInfo): void {
    if (!IMMUTABLE_REV.test(rev)) return;
    const { infos } = this.repo(gitDir);
    if (infos.has(rev)) return;
    infos.set(ownString(rev), { ...info, oid: ownString(info.oid) });
    this.infoCount += 1;
    // Too many: forget every answer about revisions (each costs one round trip to ask again).
    if (this.infoCount > CACHE_INFOS) {
      for (const repo of this.repos.values()) repo.infos.clear();
      this.infoCount = 0;
    }
  }

  contents(gitDir: string, oid: string): ObjectData | undefined {
    return this.repos.get(gitDir)?.objects.get(oid);
  }

  keepContents(gitDir: string, object: ObjectData): void {
    if (object.size > CACHE_OBJECT_BYTES) return;
    const { objects } = this.repo(gitDir);
    if (objects.has(object.oid)) return;
    const oid = ownString(object.oid);
    objects.set(oid, { ...object, oid, data: ownBytes(object.data) });
    this.bytes += object.size + CACHE_ENTRY_OVERHEAD;
    // Too big: other repositories lose their objects first, then this one its oldest.
    for (const dir of this.repos.keys()) {
      if (this.bytes <= CACHE_BYTES) break;
      if (dir !== gitDir) this.evict(dir);
    }
    while (this.bytes > CACHE_BYTES) {
      const [oldest, entry] = objects.entries().next().value as [string, ObjectData];
      objects.delete(oldest);
      this.bytes -= entry.size + CACHE_ENTRY_OVERHEAD;
    }
  }

  evict(gitDir: string): void {
    const repo = this.repos.get(gitDir);
    if (!repo) return;
    this.infoCount -= repo.infos.size;
    for (const entry of repo.objects.values()) this.bytes -= entry.size + CACHE_ENTRY_OVERHEAD;
    this.repos.delete(gitDir);
  }
}

const cache = new ObjectCache();

/** Type, size and id of an object named by any revision expression; null when missing. */
export async function objectInfo(gitDir: string, rev: string): Promise<ObjectInfo | null> {
  const cached = cache.info(gitDir, rev);
  if (cached) return cached;
  const info = (await pool.request(gitDir, 'info', rev)) as ObjectInfo | null;
  if (info) cache.keepInfo(gitDir, rev, info);
  return info;
}

/**
 * Reads a whole object (at most MAX_BATCH_OBJECT_BYTES; bigger ones must be streamed), or null
 * when missing. The returned data is shared: read it, never change it.
 */
export async function readObject(gitDir: string, rev: string): Promise<ObjectData | null> {
  const info = await objectInfo(gitDir, rev);
  if (!info) return null;
  if (info.size > MAX_BATCH_OBJECT_BYTES) throw new GitError('failed', 'object too large to read whole');
  const cached = cache.contents(gitDir, info.oid);
  if (cached) return cached;
  const object = (await pool.request(gitDir, 'contents', info.oid)) as ObjectData | null;
  if (object) cache.keepContents(gitDir, object);
  return object;
}

/** Stops a repository's batch processes and forgets its objects (it is moving or going away). */
export const evictRepository = (gitDir: string) => {
  pool.evict(gitDir);
  cache.evict(gitDir);
};
export const closeCatFilePool = () => pool.close();
