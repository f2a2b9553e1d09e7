import { runGit, streamGit } from './command.js';
import { GitError } from './errors.js';

/** One changed file, as Gitaly describes it to GitLab. */
export interface FileDiff {
  oldPath: string;
  newPath: string;
  /** Octal modes; '0' for the missing side of an added or deleted file. */
  aMode: string;
  bMode: string;
  newFile: boolean;
  deletedFile: boolean;
  renamedFile: boolean;
  /** Hunks only (from the first `@@`, or git's `Binary files … differ` line); '' when none. */
  diff: string;
  collapsed: boolean;
  tooLarge: boolean;
}

export interface DiffLimits {
  maxFiles: number;
  maxLines: number;
  maxBytes: number;
  safeMaxFiles: number;
  safeMaxLines: number;
  safeMaxBytes: number;
  maxPatchBytes: number;
  /** Empty patches past the safe limits (GitLab's compare path; not the commit-diff path). */
  collapse: boolean;
}

/** GitLab's defaults (application settings diff_max_files/lines, DiffCollection, Gitaly). */
export const DEFAULT_DIFF_LIMITS: DiffLimits = {
  maxFiles: 1000,
  maxLines: 50_000,
  maxBytes: 1000 * 5120,
  safeMaxFiles: 100,
  safeMaxLines: 5000,
  safeMaxBytes: 100 * 5120,
  maxPatchBytes: 204_800,
  collapse: true,
};

export interface DiffResult {
  files: FileDiff[];
  /** A max limit was reached: later files are left out (GitLab's `overflow?`). */
  overflow: boolean;
}

const ZERO = /^0+$/;
const commonFlags = ['--no-color', '--no-ext-diff', '--find-renames=30%', '--no-abbrev', '--full-index'];

interface RawEntry {
  aMode: string;
  bMode: string;
  aId: string;
  bId: string;
  status: string;
  oldPath: string;
  newPath: string;
}

/** `git diff --raw -z`: modes, ids, status and paths, with any file name. */
function parseRaw(text: string): RawEntry[] {
  const parts = text.split('\0');
  const entries: RawEntry[] = [];
  for (let i = 0; i < parts.length; ) {
    const meta = parts[i++] as string;
    if (!meta.startsWith(':')) continue;
    const [aMode, bMode, aId, bId, status] = meta.slice(1).split(' ') as [string, string, string, string, string];
    const first = parts[i++] as string;
    const renamed = status.startsWith('R') || status.startsWith('C');
    const second = renamed ? (parts[i++] as string) : first;
    if (status === 'T') {
      // Gitaly splits a type change into a deletion and an addition.
      entries.push({ aMode, bMode: '000000', aId, bId: '0', status: 'D', oldPath: first, newPath: first });
      entries.push({ aMode: '000000', bMode, aId: '0', bId, status: 'A', oldPath: first, newPath: first });
      continue;
    }
    entries.push({ aMode, bMode, aId, bId, status, oldPath: first, newPath: second });
  }
  return entries;
}

/** Splits `git diff --patch` output into per-file hunk texts, in order. */
function splitPatches(text: string): string[] {
  const patches: string[] = [];
  const sections = text.split(/^diff --git /m).slice(1);
  for (const section of sections) {
    const lines = section.split('\n');
    let start = lines.findIndex((l) => l.startsWith('@@') || /^Binary files .* differ$/.test(l));
    if (start < 0) start = lines.length;
    const body = lines.slice(start).join('\n');
    patches.push(body === '' ? '' : body.endsWith('\n') ? body : `${body}\n`);
  }
  return patches;
}

const octal = (mode: string) => (ZERO.test(mode) ? '0' : mode.replace(/^0+/, ''));
const lineCount = (patch: string) => (patch === '' ? 0 : patch.split('\n').length - (patch.endsWith('\n') ? 1 : 0));

/** Bytes of patch text git may print before we stop reading (the limits stop well before). */
const MAX_PATCH_READ = 32 * 1024 * 1024;

async function readBounded(
  gitDir: string,
  flags: string[],
  args: string[],
): Promise<{ text: string; truncated: boolean }> {
  const git = streamGit({ gitDir, subcommand: 'diff', flags, args });
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  for await (const chunk of git.stdout) {
    size += (chunk as Buffer).length;
    if (size > MAX_PATCH_READ) {
      truncated = true;
      git.kill();
      break;
    }
    chunks.push(chunk as Buffer);
  }
  if (!truncated) await git.done;
  return { text: Buffer.concat(chunks).toString('utf8'), truncated };
}

/**
 * The diff between two commits (ids, not user input), with GitLab's limits applied the way
 * Gitaly applies them: past the safe limits patches are emptied (`collapsed`), patches of
 * `maxPatchBytes` or more are emptied (`tooLarge`), and past a max limit the list stops
 * (`overflow`). git's output is read up to a bound, never whole.
 */
export async function diffCommits(
  gitDir: string,
  left: string,
  right: string,
  limits: DiffLimits = DEFAULT_DIFF_LIMITS,
): Promise<DiffResult> {
  for (const id of [left, right]) {
    if (!/^[0-9a-f]{40,64}$/.test(id)) throw new GitError('invalid_argument', 'diff takes commit or tree ids');
  }
  // The file list and the patches come from two git processes, run side by side.
  const [raw, patch] = await Promise.all([
    runGit({ gitDir, subcommand: 'diff', flags: [...commonFlags, '--raw', '-z'], args: [left, right] }),
    readBounded(gitDir, [...commonFlags, '--patch'], [left, right]),
  ]);
  const entries = parseRaw(raw.stdout.toString('utf8'));
  const patches = splitPatches(patch.text);
  const files: FileDiff[] = [];
  let fileCount = 0;
  let lines = 0;
  let bytes = 0;
  let overflow = false;
  for (const [index, entry] of entries.entries()) {
    let text = patches[index] ?? '';
    if (patch.truncated && index >= patches.length - 1) {
      overflow = true;
      break;
    }
    const fileLines = lineCount(text);
    const fileBytes = Buffer.byteLength(text);
    fileCount += 1;
    lines += fileLines;
    bytes += fileBytes;
    let collapsed = false;
    let tooLarge = false;
    if (
      limits.collapse &&
      (fileCount > limits.safeMaxFiles || lines > limits.safeMaxLines || bytes > limits.safeMaxBytes) &&
      fileLines > 0
    ) {
      collapsed = true;
      text = '';
      lines -= fileLines;
      bytes -= fileBytes;
    } else if (fileBytes >= limits.maxPatchBytes) {
      tooLarge = true;
      text = '';
    }
    if (fileCount > limits.maxFiles || bytes >= limits.maxBytes || lines >= limits.maxLines) {
      overflow = true;
      break;
    }
    files.push({
      oldPath: entry.oldPath,
      newPath: entry.newPath,
      aMode: octal(entry.aMode),
      bMode: octal(entry.bMode),
      newFile: entry.status === 'A' || ZERO.test(entry.aId),
      deletedFile: entry.status === 'D' || ZERO.test(entry.bId),
      renamedFile: entry.oldPath !== entry.newPath,
      diff: text,
      collapsed,
      tooLarge,
    });
  }
  return { files, overflow };
}

/** The tree of an empty repository: the left side of a root commit's diff. */
export const EMPTY_TREE_ID = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/** Additions and deletions of a commit against its first parent (numstat; binary files count 0). */
export async function commitStats(gitDir: string, commitId: string, parentId: string | undefined) {
  const out = await runGit({
    gitDir,
    subcommand: 'diff-tree',
    flags: ['--numstat', '-r', '--no-renames', '--no-commit-id'],
    args: [parentId ?? EMPTY_TREE_ID, commitId],
  });
  let additions = 0;
  let deletions = 0;
  for (const line of out.stdout.toString('utf8').split('\n')) {
    const [a, d] = line.split('\t');
    if (a && a !== '-') additions += Number(a);
    if (d && d !== '-') deletions += Number(d);
  }
  return { additions, deletions, total: additions + deletions };
}
