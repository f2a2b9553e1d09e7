import type { Project } from '../../db/schema.js';
import { MAX_BATCH_OBJECT_BYTES, readObject } from '../../git/catfile.js';
import { resolveCommitId } from '../../git/refs.js';
import { readTree } from '../../git/tree.js';
import type { Deps } from '../deps.js';
import { type MatchedVulnerability, matchAdvisories } from './advisories.js';
import { parseCycloneDx } from './cyclonedx.js';
import { isLockFile, type PackageManager, parseLockFile } from './lockfiles.js';
import { OSV_ECOSYSTEMS } from './versions.js';

/**
 * A project's dependency list (GitLab's Sbom::DependenciesFinder): what the lock files of the
 * default branch declare, read once per commit and kept in memory.
 */

export interface Dependency {
  name: string;
  version: string;
  packageManager: PackageManager;
  /** The lock file's path in the repository (GitLab's `input_file_path`). */
  path: string;
}

/** Lists kept per commit (a commit's files never change). */
const CACHE_ENTRIES = 64;
const cache = new Map<string, Promise<Dependency[]>>();

async function readDependencies(gitDir: string, commitId: string): Promise<Dependency[]> {
  const entries = (await readTree(gitDir, commitId, '', true)) ?? [];
  const found: Dependency[] = [];
  for (const entry of entries) {
    if (entry.type !== 'blob' || entry.mode === '120000' || !isLockFile(entry.path)) continue;
    let object: Awaited<ReturnType<typeof readObject>>;
    try {
      object = await readObject(gitDir, entry.id);
    } catch {
      continue; // Larger than MAX_BATCH_OBJECT_BYTES: not a lock file anyone could read either.
    }
    if (!object || object.size > MAX_BATCH_OBJECT_BYTES) continue;
    for (const dependency of parseLockFile(entry.path, object.data.toString('utf8'))) {
      found.push({ ...dependency, path: entry.path });
    }
  }
  return found.sort(compareDependencies);
}

function compareDependencies(a: Dependency, b: Dependency): number {
  return (
    a.name.localeCompare(b.name) ||
    a.version.localeCompare(b.version) ||
    a.packageManager.localeCompare(b.packageManager) ||
    a.path.localeCompare(b.path)
  );
}

/** The dependencies at a commit, from the per-process cache when it was read before. */
export function dependenciesAt(gitDir: string, commitId: string): Promise<Dependency[]> {
  const key = `${gitDir}\0${commitId}`;
  let pending = cache.get(key);
  if (pending) {
    cache.delete(key);
    cache.set(key, pending);
    return pending;
  }
  pending = readDependencies(gitDir, commitId);
  cache.set(key, pending);
  pending.catch(() => cache.delete(key));
  while (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value as string);
  return pending;
}

/** SBOM lists kept per pipeline (a finished pipeline's reports never change). */
const sbomCache = new Map<number, Promise<Dependency[]>>();

/**
 * The CycloneDX reports of the default branch's latest successful pipeline, as GitLab reads its
 * dependency scanning results; `dependency_file_path` is the input file the SBOM names, else the
 * report's own file name.
 */
async function sbomDependencies(deps: Deps, project: Project, branch: string): Promise<Dependency[]> {
  const pipeline = await deps.db
    .selectFrom('ci_pipelines')
    .select('id')
    .where('project_id', '=', project.id)
    .where('ref', '=', branch)
    .where('tag', '=', false)
    .where('status', '=', 'success')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (!pipeline) return [];
  let pending = sbomCache.get(pipeline.id);
  if (!pending) {
    pending = (async () => {
      const reports = await deps.db
        .selectFrom('ci_build_reports as r')
        .innerJoin('ci_builds as b', 'b.id', 'r.build_id')
        .select(['r.filename', 'r.content'])
        .where('b.pipeline_id', '=', pipeline.id)
        .where('r.file_type', '=', 'cyclonedx')
        .orderBy('r.id')
        .execute();
      return reports.flatMap((report) =>
        parseCycloneDx(report.content.toString('utf8')).map((d) => ({
          name: d.name,
          version: d.version,
          packageManager: d.packageManager,
          path: d.path ?? report.filename,
        })),
      );
    })();
    sbomCache.set(pipeline.id, pending);
    pending.catch(() => sbomCache.delete(pipeline.id));
    while (sbomCache.size > CACHE_ENTRIES) sbomCache.delete(sbomCache.keys().next().value as number);
  }
  return pending;
}

/** Lock-file and SBOM dependencies together, each name, version, manager and file once, in order. */
function mergeDependencies(fromFiles: Dependency[], fromSbom: Dependency[]): Dependency[] {
  if (fromSbom.length === 0) return fromFiles;
  const seen = new Set<string>();
  const key = (d: Dependency) => `${d.name}\0${d.version}\0${d.packageManager}\0${d.path}`;
  return [...fromFiles, ...fromSbom]
    .filter((d) => {
      if (seen.has(key(d))) return false;
      seen.add(key(d));
      return true;
    })
    .sort(compareDependencies);
}

/** The default branch's dependencies, filtered by package manager; empty for an empty repository. */
export async function projectDependencies(
  deps: Deps,
  project: Project,
  managers: readonly PackageManager[] | undefined,
): Promise<Dependency[]> {
  const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
  const branch = project.default_branch;
  const commitId = branch ? await resolveCommitId(gitDir, `refs/heads/${branch}`) : null;
  if (!branch || !commitId) return [];
  const all = mergeDependencies(await dependenciesAt(gitDir, commitId), await sbomDependencies(deps, project, branch));
  return managers && managers.length > 0 ? all.filter((d) => managers.includes(d.packageManager)) : all;
}

/** The advisories affecting each dependency of a page, in order. */
export async function vulnerabilitiesOf(deps: Deps, page: Dependency[]): Promise<MatchedVulnerability[][]> {
  const packages = page.map((d) => ({ ecosystem: OSV_ECOSYSTEMS[d.packageManager], name: d.name, version: d.version }));
  const matched = await matchAdvisories(deps.db, packages);
  return packages.map((p) => matched.get(`${p.ecosystem}\0${p.name}\0${p.version}`) ?? []);
}
