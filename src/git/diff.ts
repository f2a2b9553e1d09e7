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

/** GitLab's ratio of the max limits to the safe ones (Commit::DIFF_SAFE_LIMIT_FACTOR). */
const DIFF_SAFE_LIMIT_FACTOR = 10;
/** Bytes of patch GitLab's DiffCollection allows per file of its file limits. */
const DIFF_BYTES_PER_FILE = 5120;

/**
 * The limits GitLab derives from the instance's `diff_max_files`, `diff_max_lines` and
 * `diff_max_patch_bytes`: the safe limits are a tenth of the max ones (Commit.diff_safe_max_*),
 * the byte limits 5 KiB per file of the file limits (DiffCollection.default_limits).
 */
export function diffLimitsFor(settings: { maxFiles: number; maxLines: number; maxPatchBytes: number }): DiffLimits {
  const safeMaxFiles = Math.floor(settings.maxFiles / DIFF_SAFE_LIMIT_FACTOR);
  return {
    maxFiles: settings.maxFiles,
    maxLines: settings.maxLines,
    maxBytes: settings.maxFiles * DIFF_BYTES_PER_FILE,
    safeMaxFiles,
    safeMaxLines: Math.floor(settings.maxLines / DIFF_SAFE_LIMIT_FACTOR),
    safeMaxBytes: safeMaxFiles * DIFF_BYTES_PER_FILE,
    maxPatchBytes: settings.maxPatchBytes,
    collapse: true,
  };
}

/** Patches of this many bytes are collapsed in lists of several files (Diff.patch_safe_limit_bytes). */
export const patchSafeLimitBytes = (limits: Pick<DiffLimits, 'maxPatchBytes'>) =>
  Math.floor(limits.maxPatchBytes / DIFF_SAFE_LIMIT_FACTOR);

/** GitLab's defaults (application settings diff_max_files/lines/patch_bytes at their defaults). */
export const DEFAULT_DIFF_LIMITS: DiffLimits = diffLimitsFor({
  maxFiles: 1000,
  maxLines: 50_000,
  maxPatchBytes: 204_800,
});

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
  for (const section of text.split(/^diff --git /m).slice(1)) {
    const start = hunkStart(section);
    const body = start < 0 ? '' : section.slice(start);
    patches.push(body === '' ? '' : body.endsWith('\n') ? body : `${body}\n`);
  }
  return patches;
}

/**
 * Where a file's hunks begin: its first line starting with `@@`, or git's `Binary files … differ`
 * line; -1 when it has neither. The header lines before them (index, modes, renames, ---/+++)
 * start otherwise, and the first line of a section is the `a/… b/…` rest of its `diff --git`.
 */
function hunkStart(section: string): number {
  const hunk = section.indexOf('\n@@');
  for (let at = section.indexOf('\nBinary files '); at >= 0 && (hunk < 0 || at < hunk); ) {
    const end = section.indexOf('\n', at + 1);
    if ((end < 0 ? section.slice(at + 1) : section.slice(at + 1, end)).endsWith(' differ')) return at + 1;
    at = section.indexOf('\nBinary files ', at + 1);
  }
  return hunk < 0 ? -1 : hunk + 1;
}

const octal = (mode: string) => (ZERO.test(mode) ? '0' : mode.replace(/^0+/, ''));
const lineCount = (patch: string) => (patch === '' ? 0 : patch.split('\n').length - (patch.endsWith('\n') ? 1 : 0));

/** Bytes of diff output git may print before we stop reading (the limits stop well before). */
const MAX_PATCH_READ = 32 * 1024 * 1024;

const PATCH_HEADER = Buffer.from('\ndiff --git ');
const RAW_END = Buffer.from('\0\0');

/**
 * Runs `git diff --raw --patch -z` and reads its two parts: the raw records (NUL-terminated, then
 * one more NUL) and the patches. Reading stops, and git with it, once `maxPatches` patches are
 * complete (the next one has begun) or past MAX_PATCH_READ; `truncated` says so, and the last
 * patch is then partial.
 */
async function readDiff(
  gitDir: string,
  args: string[],
  maxPatches: number,
): Promise<{ raw: string; patch: string; truncated: boolean }> {
  const git = streamGit({ gitDir, subcommand: 'diff', flags: [...commonFlags, '--raw', '--patch', '-z'], args });
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  /** Where the patches begin in the whole output; -1 until the raw part has ended. */
  let patchStart = -1;
  let patchesBegun = 0;
  let carry = Buffer.alloc(0); // the last bytes before this chunk: a marker may straddle chunks
  for await (const chunk of git.stdout) {
    const view = Buffer.concat([carry, chunk as Buffer]);
    const viewStart = size - carry.length;
    size += (chunk as Buffer).length;
    chunks.push(chunk as Buffer);
    let from = 0;
    if (patchStart < 0) {
      const end = view.indexOf(RAW_END);
      if (end >= 0) {
        patchStart = viewStart + end + RAW_END.length;
        patchesBegun = 1;
        from = end + RAW_END.length;
      }
    }
    if (patchStart >= 0) {
      // The carry is one byte shorter than a header: none is counted twice.
      for (let at = view.indexOf(PATCH_HEADER, from); at >= 0; at = view.indexOf(PATCH_HEADER, at + 1))
        patchesBegun += 1;
    }
    if (patchesBegun > maxPatches || size > MAX_PATCH_READ) {
      truncated = true;
      git.kill();
      break;
    }
    carry = view.subarray(Math.max(0, view.length - (PATCH_HEADER.length - 1)));
  }
  if (!truncated) await git.done;
  const whole = Buffer.concat(chunks);
  if (patchStart < 0) return { raw: whole.toString('utf8'), patch: '', truncated };
  return {
    raw: whole.subarray(0, patchStart).toString('utf8'),
    patch: whole.subarray(patchStart).toString('utf8'),
    truncated,
  };
}

/**
 * The diff between two commits (ids, not user input), with GitLab's limits applied the way
 * Gitaly applies them: past the safe limits patches are emptied (`collapsed`), patches of
 * `maxPatchBytes` or more are emptied (`tooLarge`), and past a max limit the list stops
 * (`overflow`). git's output is read up to the first file past the limits, never whole.
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
  // Patches up to the one past maxFiles decide the answer; the list stops there.
  const diff = await readDiff(gitDir, [left, right], limits.maxFiles + 1);
  const entries = parseRaw(diff.raw);
  const patches = splitPatches(diff.patch);
  const files: FileDiff[] = [];
  let fileCount = 0;
  let lines = 0;
  let bytes = 0;
  let overflow = false;
  for (const [index, entry] of entries.entries()) {
    let text = patches[index] ?? '';
    if (diff.truncated && index >= patches.length - 1) {
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
