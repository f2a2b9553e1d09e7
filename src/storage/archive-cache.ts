import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import type { Config } from '../config.js';
import { ARCHIVE_EXTENSIONS, type ArchiveFormat, type ArchiveStream } from '../git/archive.js';
import type { Metrics } from '../http/metrics.js';
import { type Generated, isWorkFile, openFinished, openShared, type SharedFile } from '../lib/shared-file.js';

/**
 * Generated archives, kept under STORAGE_DIR/cache/archive/<project id>/<key>.<ext> as GitLab
 * keeps them in shared/cache/archive. The directory is the only state: every server process
 * shares it (src/lib/shared-file.ts makes one generation serve all of them), the size bound and
 * the age clean-up read it. A file's mtime is when it was made (the age clean-up reads it, as
 * GitLab's `find -mmin +120` does); its atime is set when it is served (least recently used
 * goes first when the cache is over its size).
 */

/** Everything that changes an archive's bytes. */
export interface ArchiveVariant {
  commitId: string;
  format: ArchiveFormat;
  /** The folder archived (`path`), '' for the whole tree. */
  path: string;
  /** The top-level folder, which follows the project's path and the ref asked for. */
  prefix: string;
  /** The project's LFS version when pointers are replaced by its stored objects, else null. */
  lfs: string | null;
}

/** GitLab's RepositoryArchiveCleanUpService: archives older than this are deleted... */
export const ARCHIVE_MAX_AGE_MS = 120 * 60 * 1000;

/** The name of an archive in the cache, and its strong validator: a digest of its variant. */
export function archiveKey(variant: ArchiveVariant): string {
  const { commitId, format, path: folder, prefix, lfs } = variant;
  return createHash('sha256')
    .update(JSON.stringify([commitId, format, folder, prefix, lfs]))
    .digest('hex');
}

const ARCHIVE_NAME = /^[0-9a-f]{64}\.(tar\.gz|tar\.bz2|tar|zip)$/;
const errorCode = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code;

interface CachedFile {
  file: string;
  size: number;
  usedMs: number;
  madeMs: number;
}

export class ArchiveCache {
  /** Requests by where their archive came from: the cache, a new generation, or one in flight. */
  readonly requests = new Counter({
    name: 'depot_archive_cache_requests_total',
    help: 'Archive downloads by result: hit (cached), miss (generated), joined (a generation in flight)',
    labelNames: ['result'],
    registers: [],
  });
  readonly evictions = new Counter({
    name: 'depot_archive_cache_evictions_total',
    help: 'Cached archives deleted, by reason: size (least recently used), age, project (deleted)',
    labelNames: ['reason'],
    registers: [],
  });
  readonly generatedBytes = new Counter({
    name: 'depot_archive_cache_generated_bytes_total',
    help: 'Bytes of archives generated into the cache',
    registers: [],
  });

  constructor(
    readonly root: string,
    /** 0: no cache, archives stream from git to each client. */
    readonly maxBytes: number,
  ) {}

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  private projectDir(projectId: number): string {
    return path.join(this.root, String(projectId));
  }

  private file(projectId: number, variant: ArchiveVariant): string {
    return path.join(this.projectDir(projectId), `${archiveKey(variant)}.${ARCHIVE_EXTENSIONS[variant.format]}`);
  }

  /**
   * The archive, from the cache, from a generation in flight, or generated now by `generate`
   * (written to the cache as it streams). The caller has authorized the request.
   */
  async open(
    projectId: number,
    variant: ArchiveVariant,
    generate: () => ArchiveStream,
    logger: Logger,
    /** Told how the generation ended, when this call started it (origin `miss`). */
    onSettled?: (result: Generated) => void,
  ): Promise<SharedFile> {
    const file = this.file(projectId, variant);
    const shared = await openShared(file, {
      async produce(out) {
        const archive = generate();
        try {
          await pipeline(archive.stream, out);
        } catch (error) {
          archive.kill();
          throw error;
        }
      },
      settled: (result) => {
        onSettled?.(result);
        if (!result.ok) {
          logger.warn({ err: result.error, project: projectId }, 'archive generation failed');
          return;
        }
        this.generatedBytes.inc(result.size);
        void this.enforceLimit().catch((error: unknown) =>
          logger.warn({ err: error }, 'archive cache size bound failed'),
        );
      },
    });
    this.requests.inc({ result: shared.origin });
    if (shared.origin === 'hit') await this.touch(file);
    return shared;
  }

  /** The cached archive when there is one (HEAD asks without generating). */
  async peek(projectId: number, variant: ArchiveVariant): Promise<SharedFile | null> {
    return openFinished(this.file(projectId, variant));
  }

  /** Marks a cached archive as used now (atime), keeping when it was made (mtime). */
  private async touch(file: string): Promise<void> {
    const stat = await fs.stat(file).catch(() => null);
    if (stat) await fs.utimes(file, new Date(), stat.mtime).catch(() => {});
  }

  /** Every finished archive in the cache. */
  private async list(): Promise<CachedFile[]> {
    const out: CachedFile[] = [];
    for (const dir of await readDir(this.root)) {
      const projectDir = path.join(this.root, dir);
      for (const name of await readDir(projectDir)) {
        if (!ARCHIVE_NAME.test(name)) continue;
        const file = path.join(projectDir, name);
        const stat = await fs.stat(file).catch(() => null);
        if (stat?.isFile()) out.push({ file, size: stat.size, usedMs: stat.atimeMs, madeMs: stat.mtimeMs });
      }
    }
    return out;
  }

  /** Bytes and files held (for /-/metrics). */
  async usage(): Promise<{ bytes: number; files: number }> {
    const files = await this.list();
    return { bytes: files.reduce((sum, f) => sum + f.size, 0), files: files.length };
  }

  /**
   * Deletes the least recently used archives until the cache fits its size. Readers that have
   * an archive open keep reading it. Returns how many went.
   */
  async enforceLimit(): Promise<number> {
    const files = await this.list();
    let total = files.reduce((sum, f) => sum + f.size, 0);
    let evicted = 0;
    for (const f of files.sort((a, b) => a.usedMs - b.usedMs)) {
      if (total <= this.maxBytes) break;
      if (await removeFile(f.file)) {
        evicted += 1;
        this.evictions.inc({ reason: 'size' });
      }
      total -= f.size;
    }
    return evicted;
  }

  /**
   * GitLab's age-based clean-up: archives made more than `maxAgeMs` before `now`, what crashed
   * generations left (their partial files and claims stop being touched), and empty project
   * folders. Returns how many archives went.
   */
  async sweep(now: Date, maxAgeMs = ARCHIVE_MAX_AGE_MS): Promise<number> {
    const cutoff = now.getTime() - maxAgeMs;
    let removed = 0;
    for (const dir of await readDir(this.root)) {
      const projectDir = path.join(this.root, dir);
      for (const name of await readDir(projectDir)) {
        if (!ARCHIVE_NAME.test(name) && !isWorkFile(name)) continue;
        const file = path.join(projectDir, name);
        const stat = await fs.stat(file).catch(() => null);
        if (!stat || stat.mtimeMs > cutoff) continue;
        if ((await removeFile(file)) && ARCHIVE_NAME.test(name)) {
          removed += 1;
          this.evictions.inc({ reason: 'age' });
        }
      }
      // Only an empty folder goes (a generation may be starting in it: then it is not empty).
      await fs.rmdir(projectDir).catch(() => {});
    }
    return removed;
  }

  /** Deletes every cached archive of a project (it was deleted). Returns how many went. */
  async purgeProject(projectId: number): Promise<number> {
    const dir = this.projectDir(projectId);
    const archives = (await readDir(dir)).filter((name) => ARCHIVE_NAME.test(name)).length;
    await fs.rm(dir, { recursive: true, force: true });
    this.evictions.inc({ reason: 'project' }, archives);
    return archives;
  }
}

async function readDir(dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (error) {
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') return [];
    throw error;
  }
}

async function removeFile(file: string): Promise<boolean> {
  try {
    await fs.unlink(file);
    return true;
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return false;
    throw error;
  }
}

const caches = new Map<string, ArchiveCache>();

/** The archive cache of a configuration: one per directory and size in a process, shared by its apps and jobs. */
export function archiveCache(config: Pick<Config, 'storageDir' | 'archiveCacheMaxBytes'>): ArchiveCache {
  const root = path.join(config.storageDir, 'cache', 'archive');
  const id = `${root}\0${config.archiveCacheMaxBytes}`;
  let cache = caches.get(id);
  if (!cache) {
    cache = new ArchiveCache(root, config.archiveCacheMaxBytes);
    caches.set(id, cache);
  }
  return cache;
}

/** Hits, misses, evictions and generated bytes, and the bytes and files held (read from the directory when scraped). */
export function registerArchiveCacheMetrics(metrics: Metrics, cache: ArchiveCache): void {
  metrics.registry.registerMetric(cache.requests);
  metrics.registry.registerMetric(cache.evictions);
  metrics.registry.registerMetric(cache.generatedBytes);
  metrics.addGauge('depot_archive_cache_bytes', 'Bytes of archives in the archive cache', [], async (g) => {
    g.set((await cache.usage()).bytes);
  });
  metrics.addGauge('depot_archive_cache_files', 'Archives in the archive cache', [], async (g) => {
    g.set((await cache.usage()).files);
  });
}
