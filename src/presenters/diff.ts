import type { FileDiff } from '../git/diff.js';

/**
 * GitLab's Diff entity; `collapsed` and `too_large` say why a patch is empty. `unidiff` adds the
 * `---`/`+++` header GitLab's Diff#unidiff writes; a list given `collapseBytes` (lists of several
 * files) empties patches of that many bytes or more, as collapsed.
 */
export function presentDiff(file: FileDiff, options: { unidiff?: boolean; collapseBytes?: number } = {}) {
  let diff = file.diff;
  let collapsed = file.collapsed;
  if (options.collapseBytes !== undefined && Buffer.byteLength(diff) >= options.collapseBytes) {
    diff = '';
    collapsed = true;
  }
  if (options.unidiff && diff !== '' && !diff.startsWith('Binary files ')) {
    const from = file.newFile ? '/dev/null' : `a/${file.oldPath}`;
    const to = file.deletedFile ? '/dev/null' : `b/${file.newPath}`;
    diff = `--- ${from}\n+++ ${to}\n${diff}`;
  }
  return {
    diff,
    collapsed,
    too_large: file.tooLarge,
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
