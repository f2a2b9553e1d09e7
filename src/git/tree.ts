import { readObject } from './catfile.js';
import { runGit } from './command.js';
import { isValidRepoPath } from './validate.js';

export type EntryType = 'tree' | 'blob' | 'commit';

export interface TreeEntry {
  id: string;
  name: string;
  type: EntryType;
  /** Path from the repository root. */
  path: string;
  /** Six octal digits, as git prints them (`040000`, `100644`, `120000`, `160000`). */
  mode: string;
}

const typeOfMode = (mode: string): EntryType =>
  mode === '40000' || mode === '040000' ? 'tree' : mode === '160000' ? 'commit' : 'blob';

/** Parses a raw tree object: `<mode> <name>\0<binary id>` repeated. */
export function parseTreeObject(data: Buffer, prefix: string, hashBytes = 20): TreeEntry[] {
  const entries: TreeEntry[] = [];
  let offset = 0;
  while (offset < data.length) {
    const space = data.indexOf(32, offset);
    const nul = data.indexOf(0, space);
    if (space < 0 || nul < 0) break;
    const mode = data.subarray(offset, space).toString('ascii').padStart(6, '0');
    const name = data.subarray(space + 1, nul).toString('utf8');
    const id = data.subarray(nul + 1, nul + 1 + hashBytes).toString('hex');
    offset = nul + 1 + hashBytes;
    entries.push({ id, name, type: typeOfMode(mode), path: prefix ? `${prefix}/${name}` : name, mode });
  }
  return entries;
}

/** Normalises a user tree path: no leading/trailing slashes; '' for the root. Null when invalid. */
export function normaliseTreePath(path: string | undefined): string | null {
  if (path === undefined) return '';
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  if (trimmed === '') return '';
  return isValidRepoPath(trimmed) ? trimmed : null;
}

/**
 * Lists the entries of the directory `path` at `commitId` (one level, or everything below it
 * when `recursive`), in git's tree order. Null when the path does not exist or is not a
 * directory.
 */
export async function readTree(
  gitDir: string,
  commitId: string,
  path: string,
  recursive: boolean,
): Promise<TreeEntry[] | null> {
  const object = await readObject(gitDir, path === '' ? `${commitId}^{tree}` : `${commitId}:${path}`);
  if (object?.type !== 'tree') return null;
  if (!recursive) return parseTreeObject(object.data, path);
  const { stdout } = await runGit({
    gitDir,
    subcommand: 'ls-tree',
    flags: ['-z', '-r', '-t', '--full-tree'],
    args: [object.oid],
  });
  const entries: TreeEntry[] = [];
  for (const record of stdout.toString('utf8').split('\0')) {
    if (record === '') continue;
    const tab = record.indexOf('\t');
    const [mode, type, id] = record.slice(0, tab).split(' ') as [string, EntryType, string];
    const rel = record.slice(tab + 1);
    const full = path ? `${path}/${rel}` : rel;
    entries.push({ id, name: rel.slice(rel.lastIndexOf('/') + 1), type, path: full, mode });
  }
  return entries;
}

/**
 * The entry at `path` (a file, directory, symlink or submodule) in the tree of `commitId`, read
 * from its parent directory so the mode is known; null when any part of the path is missing.
 */
export async function readTreeEntry(gitDir: string, commitId: string, path: string): Promise<TreeEntry | null> {
  if (!isValidRepoPath(path) || path.split('/').includes('')) return null;
  const slash = path.lastIndexOf('/');
  const parent = slash < 0 ? '' : path.slice(0, slash);
  const name = path.slice(slash + 1);
  const object = await readObject(gitDir, parent === '' ? `${commitId}^{tree}` : `${commitId}:${parent}`);
  if (object?.type !== 'tree') return null;
  return parseTreeObject(object.data, parent).find((entry) => entry.name === name) ?? null;
}
