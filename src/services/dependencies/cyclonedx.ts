import { type DeclaredDependency, PACKAGE_MANAGERS, type PackageManager } from './lockfiles.js';

/**
 * The dependencies of a CycloneDX SBOM (a `reports:cyclonedx` artifact), as GitLab reads its
 * dependency scanning reports: the package manager and input file from GitLab's metadata
 * properties when present, else from each component's package URL.
 */

const PURL_MANAGERS: Record<string, PackageManager> = {
  npm: 'npm',
  gem: 'bundler',
  composer: 'composer',
  pypi: 'pip',
  maven: 'maven',
  conan: 'conan',
};

const MANAGER_PROPERTY = 'gitlab:dependency_scanning:package_manager:name';
const INPUT_FILE_PROPERTY = 'gitlab:dependency_scanning:input_file:path';

interface Property {
  name?: unknown;
  value?: unknown;
}

const property = (list: unknown, name: string): string | undefined => {
  const found = (Array.isArray(list) ? (list as Property[]) : []).find((p) => p?.name === name);
  return typeof found?.value === 'string' ? found.value : undefined;
};

export interface SbomDependency extends DeclaredDependency {
  /** The input file the SBOM names, when it names one. */
  path: string | undefined;
}

/** Reads an SBOM's components; a document that is not CycloneDX JSON has none. */
export function parseCycloneDx(source: string): SbomDependency[] {
  let document: Record<string, unknown>;
  try {
    document = JSON.parse(source) as Record<string, unknown>;
  } catch {
    return [];
  }
  if (document?.bomFormat !== 'CycloneDX' || !Array.isArray(document.components)) return [];
  const metadata = (document.metadata ?? {}) as { properties?: unknown };
  const declared = property(metadata.properties, MANAGER_PROPERTY);
  const documentManager = (PACKAGE_MANAGERS as readonly string[]).includes(declared ?? '')
    ? (declared as PackageManager)
    : undefined;
  const path = property(metadata.properties, INPUT_FILE_PROPERTY);
  const found: SbomDependency[] = [];
  for (const value of document.components as Record<string, unknown>[]) {
    const name = typeof value?.name === 'string' ? value.name : undefined;
    const version = typeof value?.version === 'string' ? value.version : undefined;
    if (!name || !version) continue;
    const purlType = typeof value.purl === 'string' ? /^pkg:([a-z]+)\//.exec(value.purl)?.[1] : undefined;
    const manager = documentManager ?? (purlType ? PURL_MANAGERS[purlType] : undefined);
    if (!manager) continue;
    const group = typeof value.group === 'string' && value.group !== '' ? value.group : undefined;
    found.push({ name: group ? `${group}/${name}` : name, version, packageManager: manager, path });
  }
  return found;
}
