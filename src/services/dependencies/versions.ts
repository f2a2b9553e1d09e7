import * as pep440 from '@renovatebot/pep440';
import * as rubygems from '@renovatebot/ruby-semver';
import semver from 'semver';
import type { PackageManager } from './lockfiles.js';

/**
 * Version order per ecosystem, for matching OSV ranges: npm's semver, PEP 440, RubyGems'
 * Gem::Version, Maven's ComparableVersion; Composer and Conan versions read as loose semver.
 * A comparison that cannot be made answers null (the range is then not matched).
 */

/** The OSV ecosystem of each package manager. */
export const OSV_ECOSYSTEMS: Record<PackageManager, string> = {
  npm: 'npm',
  yarn: 'npm',
  bundler: 'RubyGems',
  composer: 'Packagist',
  pip: 'PyPI',
  maven: 'Maven',
  conan: 'ConanCenter',
};

/** How an ecosystem spells package names in advisories (PyPI normalizes; Maven joins with `:`). */
export function advisoryName(ecosystem: string, name: string): string {
  switch (ecosystem) {
    case 'PyPI':
      return name.toLowerCase().replace(/[-_.]+/g, '-');
    case 'Maven':
      return name.replace('/', ':');
    case 'Packagist':
      return name.toLowerCase();
    default:
      return name;
  }
}

type Compare = (a: string, b: string) => number | null;

function looseSemver(a: string, b: string): number | null {
  const clean = (v: string) => semver.valid(v.replace(/^v/i, ''), { loose: true }) ?? semver.coerce(v)?.version ?? null;
  const x = clean(a);
  const y = clean(b);
  return x && y ? semver.compare(x, y, { loose: true }) : null;
}

function npmCompare(a: string, b: string): number | null {
  return semver.valid(a) && semver.valid(b) ? semver.compare(a, b) : looseSemver(a, b);
}

function pypiCompare(a: string, b: string): number | null {
  return pep440.valid(a) && pep440.valid(b) ? pep440.compare(a, b) : null;
}

function rubyCompare(a: string, b: string): number | null {
  if (!rubygems.valid(a) || !rubygems.valid(b)) return null;
  return rubygems.eq(a, b) ? 0 : rubygems.lt(a, b) ? -1 : 1;
}

/** Maven's qualifier order (ComparableVersion): unknown qualifiers sort after these, by name. */
const MAVEN_QUALIFIERS = ['alpha', 'beta', 'milestone', 'rc', 'snapshot', '', 'sp'];
const MAVEN_ALIASES: Record<string, string> = {
  a: 'alpha',
  b: 'beta',
  m: 'milestone',
  cr: 'rc',
  ga: '',
  final: '',
  release: '',
};

function mavenItems(version: string): (number | string)[] {
  const items: (number | string)[] = [];
  // Each `-` part is a sublist in ComparableVersion; trailing zeros and release qualifiers of a
  // part do not count (1.0 = 1 = 1.0.0-final), so they are trimmed per part.
  for (const part of version.toLowerCase().split('-')) {
    const tokens: (number | string)[] = [];
    for (const token of part.split(/\.|(?<=\d)(?=[a-z])|(?<=[a-z])(?=\d)/)) {
      if (token === '') continue;
      tokens.push(/^\d+$/.test(token) ? Number(token) : (MAVEN_ALIASES[token] ?? token));
    }
    while (tokens.length > 0 && (tokens.at(-1) === 0 || tokens.at(-1) === '')) tokens.pop();
    items.push(...tokens);
  }
  return items;
}

function qualifierRank(q: string): [number, string] {
  const at = MAVEN_QUALIFIERS.indexOf(q);
  return at === -1 ? [MAVEN_QUALIFIERS.length, q] : [at, ''];
}

function compareMavenItem(a: number | string | undefined, b: number | string | undefined): number {
  if (a === undefined && b === undefined) return 0;
  // A missing item is a release ('' ); numbers beat qualifiers.
  const x = a ?? '';
  const y = b ?? '';
  if (typeof x === 'number' && typeof y === 'number') return Math.sign(x - y);
  if (typeof x === 'number') return 1;
  if (typeof y === 'number') return -1;
  const [rx, nx] = qualifierRank(x);
  const [ry, ny] = qualifierRank(y);
  return rx !== ry ? Math.sign(rx - ry) : nx.localeCompare(ny);
}

export function mavenCompare(a: string, b: string): number {
  const x = mavenItems(a);
  const y = mavenItems(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const order = compareMavenItem(x[i], y[i]);
    if (order !== 0) return order;
  }
  return 0;
}

const COMPARATORS: Record<string, Compare> = {
  npm: npmCompare,
  PyPI: pypiCompare,
  RubyGems: rubyCompare,
  Maven: mavenCompare,
  Packagist: looseSemver,
  ConanCenter: looseSemver,
};

export interface OsvRange {
  type?: string;
  events?: Record<string, string>[];
}

export interface OsvAffected {
  package?: { ecosystem?: string; name?: string };
  ranges?: OsvRange[];
  versions?: string[];
}

/**
 * Whether `version` is affected, by OSV's rules: listed in `versions`, or inside a SEMVER or
 * ECOSYSTEM range (events in order: `introduced` opens, `fixed` closes before, `last_affected`
 * closes after).
 */
export function isAffected(ecosystem: string, version: string, affected: OsvAffected): boolean {
  if (affected.versions?.includes(version)) return true;
  const compare = COMPARATORS[ecosystem];
  if (!compare) return false;
  for (const range of affected.ranges ?? []) {
    if (range.type !== 'SEMVER' && range.type !== 'ECOSYSTEM') continue;
    let inside = false;
    for (const event of range.events ?? []) {
      if (event.introduced !== undefined) {
        if (event.introduced === '0') inside = true;
        else {
          const order = compare(version, event.introduced);
          if (order !== null && order >= 0) inside = true;
        }
      } else if (event.fixed !== undefined) {
        const order = compare(version, event.fixed);
        if (order !== null && order >= 0) inside = false;
      } else if (event.last_affected !== undefined) {
        const order = compare(version, event.last_affected);
        if (order !== null && order > 0) inside = false;
      }
    }
    if (inside) return true;
  }
  return false;
}
