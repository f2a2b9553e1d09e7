import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * Durable file copies for storage moves: every file and directory written is fsynced before the
 * copy counts as done, and progress is reported in bytes (large files while they copy).
 */

/** Progress of a large file is sampled this often while the kernel copies it. */
const PROGRESS_SAMPLE_MS = 200;
/** Files at least this large get sampled progress. */
const SAMPLE_FILE_BYTES = 32 * 1024 * 1024;

export type ProgressFn = (bytesDone: number) => void;

/** Total size in bytes of the regular files under `dir` (0 when it does not exist). */
export async function directorySize(dir: string): Promise<number> {
  let total = 0;
  let entries: import('node:fs').Dirent[];
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += await directorySize(full);
    else if (entry.isFile()) total += (await fs.stat(full)).size;
  }
  return total;
}

/** fsyncs a file or directory. */
export async function fsyncPath(target: string): Promise<void> {
  const handle = await fs.open(target, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * How files reach the destination: `auto` hard-links them when source and destination share a
 * filesystem (no data to copy, as GitLab skips replication between storages on one filesystem;
 * git never rewrites a repository file in place, so the two names cannot diverge) and copies
 * otherwise; `copy` always copies.
 */
export type TransferMode = 'auto' | 'copy';

/** link(2) errors that mean "not on this filesystem": fall back to a copy. */
const LINK_FALLBACK = new Set(['EXDEV', 'EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EMLINK', 'ENOSYS']);

/**
 * Puts one file at `dest`: a hard link when `mode` allows and the filesystem can, else a copy
 * (reflink when the filesystem can, else the kernel's copy). Then fsyncs it. `onBytes` gets
 * the bytes done so far of this file. Returns whether the file was linked.
 */
export async function transferFileDurably(
  src: string,
  dest: string,
  size: number,
  mode: TransferMode,
  onBytes: ProgressFn,
): Promise<boolean> {
  if (mode === 'auto') {
    try {
      await fs.link(src, dest);
      await fsyncPath(dest);
      onBytes(size);
      return true;
    } catch (error) {
      if (!LINK_FALLBACK.has((error as NodeJS.ErrnoException).code ?? '')) throw error;
    }
  }
  let sampler: NodeJS.Timeout | undefined;
  if (size >= SAMPLE_FILE_BYTES) {
    sampler = setInterval(() => {
      fs.stat(dest).then(
        (s) => onBytes(Math.min(s.size, size)),
        () => {},
      );
    }, PROGRESS_SAMPLE_MS);
  }
  try {
    await fs.copyFile(src, dest, fsConstants.COPYFILE_FICLONE);
  } finally {
    if (sampler) clearInterval(sampler);
  }
  await fsyncPath(dest);
  onBytes(size);
  return false;
}

/** Files copied at once: copyFile runs in libuv's thread pool (4 threads by default). */
const COPY_CONCURRENCY = 4;

/** Runs `task` over `items` with at most `limit` at once; the first failure rejects. */
export async function eachLimited<T>(items: readonly T[], limit: number, task: (item: T) => Promise<void>) {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await task(item);
    }
  });
  await Promise.all(lanes);
}

/**
 * Copies (or links, see TransferMode) the tree `src` into `dest`, which must not exist; every
 * file and directory is fsynced before this resolves. `onProgress` gets the running total of
 * bytes done; `check` runs before each file so a caller can stop (it throws to abort).
 */
export async function copyTreeDurably(
  src: string,
  dest: string,
  options: { mode: TransferMode; onProgress: ProgressFn; check?: (file: string) => void },
): Promise<number> {
  const dirs: string[] = [];
  const files: { from: string; to: string; size: number }[] = [];
  const walk = async (from: string, to: string): Promise<void> => {
    const stat = await fs.stat(from);
    await fs.mkdir(to, { mode: stat.mode & 0o7777 });
    dirs.push(to);
    for (const entry of await fs.readdir(from, { withFileTypes: true })) {
      const a = path.join(from, entry.name);
      const b = path.join(to, entry.name);
      if (entry.isDirectory()) await walk(a, b);
      else if (entry.isSymbolicLink()) await fs.symlink(await fs.readlink(a), b);
      else if (entry.isFile()) files.push({ from: a, to: b, size: (await fs.stat(a)).size });
    }
  };
  await walk(src, dest);
  let completed = 0;
  const inFlight = new Map<string, number>();
  const report = () => {
    let sum = completed;
    for (const bytes of inFlight.values()) sum += bytes;
    options.onProgress(sum);
  };
  await eachLimited(files, COPY_CONCURRENCY, async (file) => {
    options.check?.(file.from);
    inFlight.set(file.to, 0);
    await transferFileDurably(file.from, file.to, file.size, options.mode, (bytes) => {
      inFlight.set(file.to, bytes);
      report();
    });
    inFlight.delete(file.to);
    completed += file.size;
    report();
  });
  // Directory entries are durable once each directory is fsynced (together: the journal
  // commits them in one go).
  await Promise.all([...dirs, path.dirname(dest)].map(fsyncPath));
  return completed;
}

/**
 * Creates `dir` and any missing parents; returns the directories that gained an entry, which
 * the caller fsyncs (ensureDirDurably does it at once).
 */
export async function createDirs(dir: string): Promise<string[]> {
  const missing: string[] = [];
  let current = dir;
  while (!(await pathExists(current))) {
    missing.push(current);
    const parent = path.dirname(current);
    if (parent === current) break;
    current = parent;
  }
  for (const created of missing.reverse()) {
    await fs.mkdir(created).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
  }
  return missing.map((created) => path.dirname(created));
}

/** Creates `dir` and any missing parents, fsyncing each parent that gained an entry. */
export async function ensureDirDurably(dir: string): Promise<void> {
  await Promise.all((await createDirs(dir)).map(fsyncPath));
}

/** Renames and makes the rename durable by fsyncing both parent directories. */
export async function renameDurably(from: string, to: string): Promise<void> {
  await ensureDirDurably(path.dirname(to));
  await fs.rename(from, to);
  await fsyncPath(path.dirname(to));
  if (path.dirname(from) !== path.dirname(to)) await fsyncPath(path.dirname(from));
}

export async function pathExists(target: string): Promise<boolean> {
  try {
    await fs.lstat(target);
    return true;
  } catch {
    return false;
  }
}
