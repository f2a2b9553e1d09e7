/**
 * The previous release tag for a version (app/finders/repositories/changelog_tag_finder.rb) and
 * GitHub's version_sorter ordering that GitLab uses for tags and changelog sections.
 */
import { RE2JS } from 're2js';
import { ChangelogError } from './errors.js';

/** GitLab's default `tag_regex`: an optional `v` and a semantic version (RE2 syntax). */
export const DEFAULT_TAG_REGEX =
  '^v?(?P<major>0|[1-9]\\d*)\\.(?P<minor>0|[1-9]\\d*)\\.(?P<patch>0|[1-9]\\d*)' +
  '(?:-(?P<pre>(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\\.(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?' +
  '(?:\\+(?P<meta>[0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*))?$';

export const VERSION_REQUIRED_MESSAGE = 'The `version` attribute is required.';
export const VERSION_FORMAT_MESSAGE =
  'The requested `version` attribute format is not correct. Use formats such as `1.0.0` or `v1.0.0`.';
const INVALID_REGEX_PREFIX = 'The regular expression to use for finding the previous tag for a version is invalid: ';

// version_sorter keeps at most 64 components and reads numbers as 32-bit values.
const MAX_COMPONENTS = 64;
const MAX_NUMBER = 2 ** 31 - 1;

type Component = number | string;

function components(version: string): Component[] {
  const out: Component[] = [];
  let i = 0;
  while (i < version.length && out.length < MAX_COMPONENTS) {
    const start = i;
    if (/[0-9]/.test(version[i] as string)) {
      while (i < version.length && /[0-9]/.test(version[i] as string)) i++;
      const digits = version.slice(start, i);
      const value = Number(digits);
      out.push(value > MAX_NUMBER ? digits : value);
    } else if (/[A-Za-z-]/.test(version[i] as string)) {
      while (i < version.length && /[A-Za-z-]/.test(version[i] as string)) i++;
      out.push(version.slice(start, i));
    } else {
      i++; // every other character only separates components
    }
  }
  return out;
}

/** Bytewise comparison where, on a common prefix, the shorter string is smaller. */
function compareBytes(a: string, b: string): number {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return Buffer.compare(x, y);
}

/**
 * version_sorter's order: numbers compare numerically and beat strings; strings compare
 * bytewise; when one list is a prefix of the other, the longer one is greater if its next
 * component is a number and smaller if it is a string (so `1.0.0-rc1 < 1.0.0 < 1.0.0.1`).
 */
export function compareVersions(a: string, b: string): number {
  const x = components(a);
  const y = components(b);
  if (x.length === 0 && y.length === 0) return compareBytes(a, b);
  const common = Math.min(x.length, y.length);
  for (let n = 0; n < common; n++) {
    const p = x[n] as Component;
    const q = y[n] as Component;
    const pNumber = typeof p === 'number';
    if (pNumber !== (typeof q === 'number')) return pNumber ? 1 : -1;
    const order = pNumber ? (p as number) - (q as number) : compareBytes(p as string, q as string);
    if (order !== 0) return Math.sign(order);
  }
  if (x.length < y.length) return typeof y[common] === 'number' ? -1 : 1;
  if (x.length > y.length) return typeof x[common] === 'number' ? 1 : -1;
  return 0;
}

/** Compiles a tag regex with RE2 semantics, or a ChangelogError naming the engine's complaint. */
export function compileTagRegex(source: string): RE2JS {
  try {
    return RE2JS.compile(source);
  } catch (error) {
    throw new ChangelogError(INVALID_REGEX_PREFIX + (error instanceof Error ? error.message : String(error)));
  }
}

interface VersionParts {
  major: string | null;
  minor: string | null;
  patch: string | null;
  pre: string | null;
  meta: string | null;
}

/** Named groups of the first match of `regex` in `text` (unanchored unless the regex anchors). */
function matchVersion(regex: RE2JS, text: string): VersionParts | null {
  const matcher = regex.matcher(text);
  if (!matcher.find()) return null;
  const groups = regex.namedGroups();
  const group = (name: string) => (name in groups ? matcher.group(name) : null);
  return {
    major: group('major'),
    minor: group('minor'),
    patch: group('patch'),
    pre: group('pre'),
    meta: group('meta'),
  };
}

const versionKey = (parts: VersionParts) =>
  `${parts.major}.${parts.minor}.${parts.patch}${parts.meta !== null ? `+${parts.meta}` : ''}`;

let defaultRegex: RE2JS | undefined;

/**
 * The tag of the highest stable version strictly below `version`, or null. Tags matching
 * `tagRegex` with a `pre` capture are skipped; build metadata stays in the compared key; the
 * requested version is read with the default regex and its pre-release part dropped. Of tags
 * with the same key, the later one in `tags` wins.
 */
export function findPreviousTag<T extends { name: string }>(
  tags: readonly T[],
  version: string | null | undefined,
  tagRegex: string = DEFAULT_TAG_REGEX,
): T | null {
  if (version === null || version === undefined || version.trim() === '') {
    throw new ChangelogError(VERSION_REQUIRED_MESSAGE);
  }
  const regex = compileTagRegex(tagRegex);
  defaultRegex ??= RE2JS.compile(DEFAULT_TAG_REGEX);
  const requested = matchVersion(defaultRegex, version);
  if (!requested) throw new ChangelogError(VERSION_FORMAT_MESSAGE);
  const wanted = versionKey({ ...requested, pre: null });

  const byKey = new Map<string, T>();
  for (const tag of tags) {
    const parts = matchVersion(regex, tag.name);
    if (!parts || parts.pre !== null) continue;
    if (parts.major === null || parts.minor === null || parts.patch === null) continue;
    byKey.set(versionKey(parts), tag);
  }
  let best: { key: string; tag: T } | null = null;
  for (const [key, tag] of byKey) {
    if (compareVersions(key, wanted) >= 0) continue;
    if (!best || compareVersions(key, best.key) > 0) best = { key, tag };
  }
  return best?.tag ?? null;
}
