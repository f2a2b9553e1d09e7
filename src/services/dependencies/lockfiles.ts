import { parseSyml } from '@yarnpkg/parsers';
import { XMLParser } from 'fast-xml-parser';
import { parse as parseToml } from 'smol-toml';

/**
 * What the lock files of each ecosystem declare, read with that ecosystem's parser where a
 * well-kept one exists (yarn's own, a TOML and an XML parser) and as JSON or lines otherwise.
 */

/** The package managers GitLab's dependency list filters by (spec part 2). */
export const PACKAGE_MANAGERS = ['bundler', 'composer', 'conan', 'maven', 'npm', 'pip', 'yarn'] as const;
export type PackageManager = (typeof PACKAGE_MANAGERS)[number];

export interface DeclaredDependency {
  name: string;
  version: string;
  packageManager: PackageManager;
}

type Parser = (text: string) => { name: string; version: string }[];

const record = (value: unknown): Record<string, unknown> =>
  value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/** package-lock.json / npm-shrinkwrap.json, lockfileVersion 1 (nested) and 2–3 (`packages`). */
function npmLock(source: string) {
  const lock = record(JSON.parse(source));
  const found: { name: string; version: string }[] = [];
  const packages = record(lock.packages);
  if (Object.keys(packages).length > 0) {
    for (const [key, value] of Object.entries(packages)) {
      const entry = record(value);
      if (key === '' || entry.link === true) continue;
      const at = key.lastIndexOf('node_modules/');
      const name = text(entry.name) ?? (at === -1 ? undefined : key.slice(at + 'node_modules/'.length));
      const version = text(entry.version);
      if (name && version) found.push({ name, version });
    }
    return found;
  }
  const walk = (dependencies: unknown) => {
    for (const [name, value] of Object.entries(record(dependencies))) {
      const entry = record(value);
      const version = text(entry.version);
      if (version && !version.startsWith('file:')) found.push({ name, version });
      walk(entry.dependencies);
    }
  };
  walk(lock.dependencies);
  return found;
}

/** The package name of a yarn descriptor (`@scope/name@^1`, `name@npm:^1`). */
function descriptorName(descriptor: string): string {
  const at = descriptor.indexOf('@', 1);
  return (at === -1 ? descriptor : descriptor.slice(0, at)).trim();
}

/** yarn.lock, classic (v1) and Berry (YAML with `__metadata`), both through yarn's own parser. */
function yarnLock(source: string) {
  const lock = parseSyml(source) as Record<string, unknown>;
  const found: { name: string; version: string }[] = [];
  for (const [key, value] of Object.entries(lock)) {
    if (key === '__metadata') continue;
    const entry = record(value);
    const version = text(entry.version);
    const resolution = text(entry.resolution);
    // Berry lists the workspace itself and linked packages: not dependencies.
    if (!version || (resolution && /@(workspace|link|portal|file):/.test(resolution))) continue;
    const descriptor = resolution ?? (key.split(',')[0] as string);
    found.push({ name: descriptorName(descriptor.trim().replace(/^"|"$/g, '')), version });
  }
  return found;
}

/** Gemfile.lock: the `specs:` of its GEM, GIT and PATH sections (four spaces: the gems themselves). */
function gemfileLock(source: string) {
  const found: { name: string; version: string }[] = [];
  let inSpecs = false;
  for (const line of source.split(/\r?\n/)) {
    if (/^\S/.test(line)) inSpecs = false;
    if (/^ {2}specs:\s*$/.test(line)) {
      inSpecs = true;
      continue;
    }
    const match = inSpecs ? /^ {4}([^\s(]+) \(([^)]+)\)\s*$/.exec(line) : null;
    if (match) found.push({ name: match[1] as string, version: match[2] as string });
  }
  return found;
}

function composerLock(source: string) {
  const lock = record(JSON.parse(source));
  return [lock.packages, lock['packages-dev']].flatMap((list) =>
    (Array.isArray(list) ? list : []).flatMap((value) => {
      const entry = record(value);
      const name = text(entry.name);
      const version = text(entry.version);
      return name && version ? [{ name, version }] : [];
    }),
  );
}

function pipfileLock(source: string) {
  const lock = record(JSON.parse(source));
  return ['default', 'develop'].flatMap((section) =>
    Object.entries(record(lock[section])).flatMap(([name, value]) => {
      const version = text(record(value).version)?.replace(/^===?/, '');
      return version ? [{ name, version }] : [];
    }),
  );
}

function poetryLock(source: string) {
  const lock = parseToml(source) as Record<string, unknown>;
  return (Array.isArray(lock.package) ? lock.package : []).flatMap((value) => {
    const entry = record(value);
    const name = text(entry.name);
    const version = text(entry.version);
    return name && version ? [{ name, version }] : [];
  });
}

/** requirements.txt: pinned requirements (`name==1.2`, extras and markers allowed); the rest is not a version. */
function requirementsTxt(source: string) {
  const found: { name: string; version: string }[] = [];
  for (const raw of source.split(/\r?\n/)) {
    const line = raw.replace(/(^|\s)#.*$/, '').trim();
    if (line === '' || line.startsWith('-')) continue;
    const match = /^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*===?\s*([^\s;,]+)\s*(;.*)?$/.exec(line);
    if (match) found.push({ name: match[1] as string, version: match[3] as string });
  }
  return found;
}

/** pom.xml: the declared dependencies with a version, properties (`${x}`) filled in. */
function pomXml(source: string) {
  const parser = new XMLParser({
    ignoreAttributes: true,
    parseTagValue: false,
    isArray: (name) => name === 'dependency',
  });
  const project = record(record(parser.parse(source)).project);
  const properties: Record<string, string> = {};
  for (const [key, value] of Object.entries(record(project.properties))) {
    if (typeof value === 'string') properties[key] = value.trim();
  }
  if (typeof project.version === 'string') properties['project.version'] = project.version.trim();
  const fill = (value: string) => value.replace(/\$\{([^}]+)\}/g, (whole, key: string) => properties[key] ?? whole);
  const list = record(project.dependencies).dependency;
  return (Array.isArray(list) ? list : []).flatMap((value) => {
    const entry = record(value);
    const group = text(entry.groupId)?.trim();
    const artifact = text(entry.artifactId)?.trim();
    const version = text(entry.version) ? fill((entry.version as string).trim()) : undefined;
    if (!group || !artifact || !version || version.includes('${')) return [];
    return [{ name: `${fill(group)}/${fill(artifact)}`, version }];
  });
}

/** A Conan reference `name/version[@user/channel][#revision]`. */
function conanReference(reference: string): { name: string; version: string } | null {
  const match = /^([^/@#\s]+)\/([^@#\s%]+)/.exec(reference);
  return match ? { name: match[1] as string, version: match[2] as string } : null;
}

/** conan.lock: Conan 2's `requires` lists (0.5) or Conan 1's graph nodes (0.4). */
function conanLock(source: string) {
  const lock = record(JSON.parse(source));
  const references: string[] = [];
  for (const key of ['requires', 'build_requires', 'python_requires']) {
    const list = lock[key];
    if (Array.isArray(list)) references.push(...list.filter((v): v is string => typeof v === 'string'));
  }
  for (const node of Object.values(record(record(lock.graph_lock).nodes))) {
    const ref = text(record(node).ref);
    if (ref) references.push(ref);
  }
  return references.flatMap((reference) => {
    const parsed = conanReference(reference);
    return parsed ? [parsed] : [];
  });
}

/** Lock file names (the file's base name) with their package manager and parser. */
const LOCK_FILES: Record<string, { manager: PackageManager; parse: Parser }> = {
  'package-lock.json': { manager: 'npm', parse: npmLock },
  'npm-shrinkwrap.json': { manager: 'npm', parse: npmLock },
  'yarn.lock': { manager: 'yarn', parse: yarnLock },
  'Gemfile.lock': { manager: 'bundler', parse: gemfileLock },
  'gems.locked': { manager: 'bundler', parse: gemfileLock },
  'composer.lock': { manager: 'composer', parse: composerLock },
  'Pipfile.lock': { manager: 'pip', parse: pipfileLock },
  'poetry.lock': { manager: 'pip', parse: poetryLock },
  'requirements.txt': { manager: 'pip', parse: requirementsTxt },
  'pom.xml': { manager: 'maven', parse: pomXml },
  'conan.lock': { manager: 'conan', parse: conanLock },
};

/** Directories GitLab's dependency scanning leaves out by default (DS_EXCLUDED_PATHS). */
const EXCLUDED_DIRECTORIES = new Set(['spec', 'test', 'tests', 'tmp']);

/** Whether a repository path is a lock file Depot reads. */
export function isLockFile(path: string): boolean {
  const segments = path.split('/');
  const base = segments.at(-1) as string;
  return base in LOCK_FILES && !segments.slice(0, -1).some((dir) => EXCLUDED_DIRECTORIES.has(dir));
}

/**
 * The dependencies a lock file declares, each once; a file that does not parse declares none
 * (a broken lock file in a repository is not the caller's error).
 */
export function parseLockFile(path: string, source: string): DeclaredDependency[] {
  const kind = LOCK_FILES[path.split('/').at(-1) as string];
  if (!kind) return [];
  let found: { name: string; version: string }[];
  try {
    found = kind.parse(source);
  } catch {
    return [];
  }
  const seen = new Set<string>();
  const result: DeclaredDependency[] = [];
  for (const { name, version } of found) {
    const key = `${name}\0${version}`;
    if (seen.has(key)) continue;
    seen.add(key);
    result.push({ name, version, packageManager: kind.manager });
  }
  return result;
}
