import fs from 'node:fs/promises';
import path from 'node:path';
import { ownString } from '../lib/own.js';
import { gitText, runGit } from './command.js';
import { InvalidArgumentError } from './errors.js';
import { isValidBranchName } from './validate.js';

/**
 * Cheap facts about a repository for project responses, read from the filesystem where git's
 * layout allows (refs) and cached per branch tip where it needs git (the README lookup).
 */

/** The commit a branch points at, read from loose or packed refs; null when missing. */
export async function readBranchTip(repoPath: string, branch: string): Promise<string | null> {
  if (!isValidBranchName(branch)) return null;
  const ref = `refs/heads/${branch}`;
  try {
    const loose = (await fs.readFile(path.join(repoPath, ref), 'utf8')).trim();
    if (/^[0-9a-f]{40,64}$/.test(loose)) return loose;
  } catch {
    // Not loose; look in packed-refs.
  }
  try {
    const packed = await fs.readFile(path.join(repoPath, 'packed-refs'), 'utf8');
    for (const line of packed.split('\n')) {
      const space = line.indexOf(' ');
      if (space > 0 && line.slice(space + 1) === ref) return line.slice(0, space);
    }
  } catch {
    // No packed refs.
  }
  return null;
}

async function hasAnyBranch(repoPath: string): Promise<boolean> {
  const walk = async (dir: string): Promise<boolean> => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      return false;
    }
    for (const entry of entries) {
      if (entry.isFile()) return true;
      if (entry.isDirectory() && (await walk(path.join(dir, entry.name)))) return true;
    }
    return false;
  };
  if (await walk(path.join(repoPath, 'refs', 'heads'))) return true;
  try {
    const packed = await fs.readFile(path.join(repoPath, 'packed-refs'), 'utf8');
    return /^[0-9a-f]+ refs\/heads\//m.test(packed);
  } catch {
    return false;
  }
}

const README = /^readme(\.[A-Za-z0-9]+)?$/i;
const README_CACHE_LIMIT = 10_000;
const readmeCache = new Map<string, string | null>();

/** The README file name at the root of a commit (GitLab prefers markup over plain text). */
async function readmeAt(repoPath: string, commit: string): Promise<string | null> {
  const key = `${repoPath}\0${commit}`;
  const cached = readmeCache.get(key);
  if (cached !== undefined) return cached;
  let names: string[] = [];
  try {
    const out = await gitText({
      gitDir: repoPath,
      subcommand: 'ls-tree',
      flags: ['--name-only', '-z'],
      args: [commit],
    });
    names = out.split('\0').filter((n) => README.test(n));
  } catch {
    names = [];
  }
  const rank = (n: string) =>
    /\.(md|markdown|mdown|mkd|rst|adoc|asciidoc|org|textile|rdoc)$/i.test(n)
      ? 0
      : /\.txt$/i.test(n) || !n.includes('.')
        ? 1
        : 2;
  names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const found = names[0] ?? null;
  if (readmeCache.size >= README_CACHE_LIMIT) readmeCache.clear();
  // Own copies: a name cut from ls-tree's output would keep all of that output cached.
  readmeCache.set(ownString(key), found === null ? null : ownString(found));
  return found;
}

export interface RepositoryInfo {
  empty: boolean;
  /** README file name at the default branch's root, or null. */
  readme: string | null;
}

export async function repositoryInfo(repoPath: string, defaultBranch: string | null): Promise<RepositoryInfo> {
  if (!(await hasAnyBranch(repoPath))) return { empty: true, readme: null };
  const tip = defaultBranch ? await readBranchTip(repoPath, defaultBranch) : null;
  return { empty: false, readme: tip ? await readmeAt(repoPath, tip) : null };
}

/** Points the repository's HEAD at `refs/heads/<branch>` (the project's default branch). */
export async function setHeadBranch(repoPath: string, branch: string): Promise<void> {
  if (!isValidBranchName(branch)) throw new InvalidArgumentError('invalid branch name');
  await runGit({ gitDir: repoPath, subcommand: 'symbolic-ref', args: ['HEAD', `refs/heads/${branch}`] });
}
