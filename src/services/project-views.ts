import { activeMemberships } from '../db/queries/access.js';
import { findNamespacesByIds } from '../db/queries/namespaces.js';
import { findUsersByIds } from '../db/queries/users.js';
import type { Namespace, Project, User } from '../db/schema.js';
import { repositoryInfo } from '../git/repo-info.js';
import { projectAllows } from '../policies/abilities.js';
import { AccessLevel } from '../policies/access-levels.js';
import type { ProjectView } from '../presenters/project.js';
import { registrationTokens } from './ci/runners.js';
import { cachedLookup, cachedRowsById, type Deps, today } from './deps.js';

/** The human names of namespaces from the root down (`Group / Sub`), by namespace id. */
export async function namespaceFullNames(deps: Deps, namespaces: Namespace[]): Promise<Map<number, string>> {
  const ids = new Set<number>();
  for (const ns of namespaces) for (const id of ns.traversal_ids) ids.add(id);
  const all = await cachedRowsById(deps, 'namespace', [...ids], (missing) => findNamespacesByIds(deps.db, missing));
  const names = new Map<number, string>();
  for (const ns of namespaces) {
    names.set(ns.id, ns.traversal_ids.map((id) => all.get(id)?.name ?? '').join(' / '));
  }
  return names;
}

/** Gathers what project responses need for `viewer`, in a few batched queries. */
export async function buildProjectViews(deps: Deps, viewer: User | null, projects: Project[]): Promise<ProjectView[]> {
  if (projects.length === 0) return [];
  const byId = await cachedRowsById(
    deps,
    'namespace',
    projects.map((p) => p.namespace_id),
    (missing) => findNamespacesByIds(deps.db, missing),
  );
  const namespaces = [...byId.values()];
  const fullNames = await namespaceFullNames(deps, namespaces);
  const ownerIds = namespaces
    .filter((ns) => ns.kind === 'user' && ns.owner_id !== null)
    .map((ns) => ns.owner_id as number);
  const owners = await cachedRowsById(deps, 'user', ownerIds, (missing) => findUsersByIds(deps.db, missing));
  // Administrators too: `permissions` shows their own memberships, not their admin rights.
  const date = today(deps);
  const memberships = viewer
    ? ((await cachedLookup(deps, 'memberships', `${viewer.id}:${date}`, () =>
        activeMemberships(deps.db, viewer.id, date),
      )) as Awaited<ReturnType<typeof activeMemberships>>)
    : null;
  const views = await Promise.all(
    projects.map(async (project): Promise<ProjectView> => {
      const namespace = byId.get(project.namespace_id) as Namespace;
      const projectAccess = memberships?.projects.get(project.id) ?? null;
      let groupAccess: number | null = null;
      if (memberships && namespace.kind === 'group') {
        for (const id of namespace.traversal_ids) {
          const level = memberships.groups.get(id);
          if (level !== undefined && (groupAccess === null || level > groupAccess)) groupAccess = level;
        }
      }
      const level = viewer?.admin ? AccessLevel.ADMIN : Math.max(projectAccess ?? 0, groupAccess ?? 0);
      return {
        project,
        namespace,
        namespaceFullName: fullNames.get(namespace.id) ?? namespace.name,
        owner:
          namespace.kind === 'user' && namespace.owner_id !== null ? (owners.get(namespace.owner_id) ?? null) : null,
        repository: await repositoryInfo(
          deps.storages.repositoryPath(project.repository_storage, project.id),
          project.default_branch,
        ),
        canReadCode: projectAllows('read_code', project, viewer, level),
        canAdminProject: projectAllows('admin_project', project, viewer, level),
        canSeeStorage: viewer?.admin ?? false,
        permissions: { projectAccess, groupAccess },
      };
    }),
  );
  const administered = views.filter((v) => v.canAdminProject).map((v) => v.project.id);
  if (administered.length > 0) {
    const tokens = await registrationTokens(deps, 'project', administered);
    for (const view of views) if (view.canAdminProject) view.runnersToken = tokens.get(view.project.id);
  }
  return views;
}
