/**
 * Validation of user values before they reach git or the filesystem (DESIGN.md "Git engine
 * rules", docs/reliability-security.md §4).
 */

// Control characters, space, and the characters git forbids anywhere in a ref name.
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we refuse
const REF_FORBIDDEN = /[\x00-\x20\x7f~^:?*[\\]/;

/** git's check-ref-format rules for one full ref name such as `refs/heads/main`. */
export function isValidRefFormat(ref: string): boolean {
  if (ref === '' || ref === '@' || ref.length > 1024) return false;
  if (REF_FORBIDDEN.test(ref)) return false;
  if (ref.includes('..') || ref.includes('@{') || ref.includes('//')) return false;
  if (ref.startsWith('/') || ref.endsWith('/') || ref.endsWith('.')) return false;
  for (const component of ref.split('/')) {
    if (component.startsWith('.') || component.endsWith('.lock')) return false;
  }
  return true;
}

/**
 * A branch or tag name as GitLab accepts it for creation (lib/gitlab/git_ref_validator.rb):
 * git's rules for `refs/heads/<name>`, plus no leading `-`, not `HEAD`, not already qualified.
 */
export function isValidBranchName(name: string): boolean {
  if (name === '' || name === 'HEAD' || name === '@' || name.startsWith('-')) return false;
  if (name.startsWith('refs/heads/') || name.startsWith('refs/remotes/') || name.startsWith('refs/tags/')) {
    return false;
  }
  if (/^[0-9a-f]{40}$/.test(name) || /^[0-9a-f]{64}$/.test(name)) return false;
  return isValidRefFormat(`refs/heads/${name}`);
}

export const isValidTagName = isValidBranchName;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we refuse
const REVISION_FORBIDDEN = /[\x00-\x20\x7f\\:]/;

/**
 * A revision a user may name for reading (branch, tag, sha, `main~1`): Gitaly's rules. No
 * leading `-`, no whitespace or control characters, no `\` or `:`, and not a range.
 */
export function isValidRevision(rev: string): boolean {
  if (rev === '' || rev.length > 1024 || rev.startsWith('-')) return false;
  if (REVISION_FORBIDDEN.test(rev)) return false;
  if (rev.includes('..')) return false;
  return true;
}

export const SHA_PATTERN = /^[0-9a-f]{4,64}$/;

export function isValidSha(sha: string): boolean {
  return SHA_PATTERN.test(sha);
}

/**
 * A repository-relative file path: not absolute, no `.` or `..` segment, no NUL or newline,
 * no backslash segments that Windows tools would read as traversal.
 */
export function isValidRepoPath(path: string): boolean {
  if (path === '' || path.length > 4096) return false;
  if (path.startsWith('/') || path.includes('\0') || path.includes('\n') || path.includes('\r')) return false;
  for (const segment of path.split(/[/\\]/)) {
    if (segment === '..' || segment === '.') return false;
  }
  return true;
}

/** A storage name as configured: letters, digits, `_`, `-`, `.`; no path characters. */
export function isValidStorageName(name: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(name) && !name.includes('..');
}
