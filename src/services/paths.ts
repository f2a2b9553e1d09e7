/**
 * Name and path rules for users, groups and projects (GitLab's lib/gitlab/path_regex.rb and
 * lib/gitlab/regex.rb, paraphrased).
 */

/** Letters, digits, `_`, `-`, `.`; not starting with `-`; not ending in `.git` or `.atom`. */
const PATH_FORMAT = /^[A-Za-z0-9_.][A-Za-z0-9_.-]*$/;

export const PATH_FORMAT_MESSAGE =
  "can contain only letters, digits, '_', '-' and '.'. Cannot start with '-', end in '.git' or end in '.atom'";

export const PROJECT_PATH_MESSAGE =
  "can contain only letters, digits, '_', '-' and '.'. Cannot start with '-', end in '.git' or end in '.atom'";

export const PROJECT_NAME_MESSAGE =
  "can contain only letters, digits, emoji, '_', '.', '+', dashes, or spaces. It must start with a letter, digit, emoji, or '_'.";

export const GROUP_NAME_MESSAGE =
  "can contain only letters, digits, emoji, '_', '.', dash, space, parenthesis. It must start with letter, digit, emoji or '_'.";

/** Top-level names that would collide with Depot's own routes. */
const RESERVED_TOP_LEVEL = new Set([
  '-',
  '.well-known',
  '404.html',
  '422.html',
  '500.html',
  '502.html',
  '503.html',
  'admin',
  'api',
  'apple-touch-icon.png',
  'assets',
  'dashboard',
  'explore',
  'favicon.ico',
  'favicon.png',
  'files',
  'groups',
  'health_check',
  'help',
  'import',
  'jwt',
  'login',
  'oauth',
  'profile',
  'projects',
  'public',
  'robots.txt',
  's',
  'search',
  'sitemap',
  'snippets',
  'uploads',
  'users',
  'v2',
]);

/** Names a subgroup or project may not take because they are route words under a namespace. */
const RESERVED_CHILD = new Set(['-', 'badges', 'blame', 'blob', 'builds', 'commits', 'create', 'edit', 'raw', 'tree']);

export function isValidPath(path: string): boolean {
  return (
    path.length > 0 &&
    path.length <= 255 &&
    PATH_FORMAT.test(path) &&
    !/\.(git|atom)$/i.test(path) &&
    !/^\.+$/.test(path)
  );
}

export function isReservedTopLevel(path: string): boolean {
  return RESERVED_TOP_LEVEL.has(path.toLowerCase());
}

export function isReservedChild(path: string): boolean {
  return RESERVED_CHILD.has(path.toLowerCase());
}

const PROJECT_NAME = /^[\p{L}\p{N}\u00A9-\u{1F9FF}_][\p{L}\p{N}\p{Pd}+\u00A9-\u{1F9FF}_. ]*$/u;
const GROUP_NAME = /^[\p{L}\p{N}\u00A9-\u{1F9FF}_][\p{L}\p{N}\p{Pd}\u00A9-\u{1F9FF}_. ()]*$/u;

export function isValidProjectName(name: string): boolean {
  return name.length > 0 && name.length <= 255 && PROJECT_NAME.test(name);
}

export function isValidGroupName(name: string): boolean {
  return name.length > 0 && name.length <= 255 && GROUP_NAME.test(name);
}

export const EMAIL_FORMAT = /^[^\s@]+@[^\s@]+$/;
