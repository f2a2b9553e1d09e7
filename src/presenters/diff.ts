import type { FileDiff } from '../git/diff.js';

/** Patches this big are shown collapsed (emptied) in non-expanded lists of several files. */
const COLLAPSE_BYTES = 20_480;

/**
 * GitLab's Diff entity. `unidiff` adds the `---`/`+++` header GitLab's Diff#unidiff writes; a
 * `collapseLarge` list empties patches of 20 KiB or more unless it holds one file only.
 */
export function presentDiff(file: FileDiff, options: { unidiff?: boolean; collapseLarge?: boolean } = {}) {
  let diff = file.diff;
  if (options.collapseLarge && Buffer.byteLength(diff) >= COLLAPSE_BYTES) diff = '';
  if (options.unidiff && diff !== '' && !diff.startsWith('Binary files ')) {
    const from = file.newFile ? '/dev/null' : `a/${file.oldPath}`;
    const to = file.deletedFile ? '/dev/null' : `b/${file.newPath}`;
    diff = `--- ${from}\n+++ ${to}\n${diff}`;
  }
  return {
    diff,
    new_path: file.newPath,
    old_path: file.oldPath,
    a_mode: file.aMode,
    b_mode: file.bMode,
    new_file: file.newFile,
    renamed_file: file.renamedFile,
    deleted_file: file.deletedFile,
    generated_file: null,
  };
}
