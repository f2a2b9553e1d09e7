import fs from 'node:fs/promises';
import path from 'node:path';
import { GIT_TIMEOUT_MS } from './command.js';

/**
 * Files git holds while it writes a repository, besides the refs' own `refs/**\/*.lock`: git
 * takes HEAD.lock even for a branch update (to add to HEAD's reflog), and receive-pack keeps a
 * push's objects in a quarantine directory until its refs are updated.
 */
const TOP_LEVEL_LOCKS = ['HEAD.lock', 'packed-refs.lock', 'config.lock', 'shallow.lock'];
const QUARANTINE_PREFIXES = ['tmp_objdir-incoming-', 'incoming-'];

/**
 * A ref lock older than this cannot belong to a running git: git holds a ref lock for the
 * moment of the update, and every git we start is stopped at GIT_TIMEOUT_MS. An older lock was
 * left by a process killed while holding it (a crash), and would block the ref for ever.
 */
export const STALE_REF_LOCK_MS = 2 * GIT_TIMEOUT_MS;

/** The lock files and quarantine directories present in the repository, as absolute paths. */
export async function writeLeftovers(gitDir: string): Promise<string[]> {
  const found: string[] = [];
  for (const name of TOP_LEVEL_LOCKS) {
    const file = path.join(gitDir, name);
    if (await fs.lstat(file).catch(() => null)) found.push(file);
  }
  const refs = await fs.readdir(path.join(gitDir, 'refs'), { recursive: true }).catch(() => [] as string[]);
  for (const entry of refs) if (entry.endsWith('.lock')) found.push(path.join(gitDir, 'refs', entry));
  const objects = await fs.readdir(path.join(gitDir, 'objects')).catch(() => [] as string[]);
  for (const entry of objects) {
    if (QUARANTINE_PREFIXES.some((prefix) => entry.startsWith(prefix))) found.push(path.join(gitDir, 'objects', entry));
  }
  return found;
}

/**
 * Removes what a killed writer left (writeLeftovers) that was last changed before `cutoff`
 * (epoch ms). Only for a repository no live writer holds: the caller knows, from the write
 * leases, that every writer since `cutoff` is gone. Returns what it removed.
 */
export async function removeWriteLeftovers(gitDir: string, cutoff: number): Promise<string[]> {
  const removed: string[] = [];
  for (const file of await writeLeftovers(gitDir)) {
    const stat = await fs.lstat(file).catch(() => null);
    if (!stat || stat.mtimeMs >= cutoff) continue;
    await fs.rm(file, { recursive: true, force: true });
    removed.push(file);
  }
  return removed;
}

/**
 * Removes the ref lock a failed update named, when it is older than STALE_REF_LOCK_MS and inside
 * the repository. True when it was removed and the update may be tried again.
 */
export async function removeStaleRefLock(gitDir: string, lockPath: string): Promise<boolean> {
  const lock = path.resolve(lockPath);
  if (!lock.startsWith(path.resolve(gitDir) + path.sep) || !lock.endsWith('.lock')) return false;
  const stat = await fs.lstat(lock).catch(() => null);
  if (!stat?.isFile() || Date.now() - stat.mtimeMs < STALE_REF_LOCK_MS) return false;
  await fs.rm(lock, { force: true });
  return true;
}
