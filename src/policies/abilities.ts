import { groupAccessLevel, hasDescendantMembership, projectAccessLevel } from '../db/queries/access.js';
import type { Namespace, Project, User } from '../db/schema.js';
import { forbidden } from '../http/errors.js';
import { cachedLookup, type Deps, today } from '../services/deps.js';
import { AccessLevel, PROJECT_CREATION_LEVELS, SUBGROUP_CREATION_LEVELS } from './access-levels.js';

export type ProjectAbility =
  | 'read_project'
  | 'read_code'
  | 'push_code'
  | 'admin_project'
  | 'change_visibility_level'
  | 'remove_project'
  | 'read_member'
  | 'admin_member'
  | 'read_pages'
  | 'update_pages'
  | 'admin_operations'
  | 'read_error_tracking'
  | 'read_security_resource';

export type GroupAbility =
  | 'read_group'
  | 'admin_group'
  | 'remove_group'
  | 'create_subgroup'
  | 'create_projects'
  | 'read_member'
  | 'admin_member'
  | 'read_group_runners';

/**
 * The pure rule table for projects: what a user with `level` on `project` may do.
 * `level` is AccessLevel.ADMIN for administrators.
 */
export function projectAllows(ability: ProjectAbility, project: Project, user: User | null, level: number): boolean {
  const readable =
    level >= AccessLevel.GUEST ||
    project.visibility === 'public' ||
    (project.visibility === 'internal' && user !== null && !user.external);
  switch (ability) {
    case 'read_project':
    case 'read_member':
      return readable;
    case 'read_code': {
      // The repository feature: `disabled` stops everyone (GitLab's `prevent`, admins too);
      // `private` admits members only.
      const feature = project.features.repository;
      if (feature === 'disabled' || (feature === 'private' && level < AccessLevel.GUEST)) return false;
      return readable && (project.visibility !== 'private' || level >= AccessLevel.REPORTER);
    }
    case 'push_code':
      return level >= AccessLevel.DEVELOPER && !project.archived;
    case 'admin_project':
    case 'admin_member':
    case 'read_pages':
    case 'update_pages':
    case 'admin_operations':
      return level >= AccessLevel.MAINTAINER;
    case 'read_error_tracking':
      return level >= AccessLevel.REPORTER;
    case 'read_security_resource':
      return level >= AccessLevel.DEVELOPER;
    case 'change_visibility_level':
    case 'remove_project':
      return level >= AccessLevel.OWNER;
  }
}

/** The pure rule table for groups. `visibleThroughDescendant` covers members of subgroups/projects. */
export function groupAllows(
  ability: GroupAbility,
  group: Namespace,
  user: User | null,
  level: number,
  visibleThroughDescendant: boolean,
): boolean {
  switch (ability) {
    case 'read_group':
    case 'read_member':
      return (
        level >= AccessLevel.MINIMAL_ACCESS ||
        visibleThroughDescendant ||
        group.visibility === 'public' ||
        (group.visibility === 'internal' && user !== null && !user.external)
      );
    case 'admin_group':
    case 'remove_group':
    case 'admin_member':
      return level >= AccessLevel.OWNER;
    // GroupPolicy enables read_group_runners for Maintainers (runners.rb's group list).
    case 'read_group_runners':
      return level >= AccessLevel.MAINTAINER;
    case 'create_subgroup':
      return level >= (SUBGROUP_CREATION_LEVELS[group.subgroup_creation_level] ?? AccessLevel.OWNER);
    case 'create_projects':
      return level >= (PROJECT_CREATION_LEVELS[group.project_creation_level] ?? AccessLevel.MAINTAINER);
  }
}

/** A user's abilities on one project, with the level loaded once. */
export class ProjectPolicy {
  constructor(
    readonly user: User | null,
    readonly project: Project,
    readonly namespace: Namespace,
    readonly level: number,
  ) {}

  can(ability: ProjectAbility): boolean {
    return projectAllows(ability, this.project, this.user, this.level);
  }

  /** Throws 403 unless allowed (use only after the project was found visible). */
  authorize(ability: ProjectAbility): void {
    if (!this.can(ability)) throw forbidden();
  }
}

export class GroupPolicy {
  constructor(
    readonly user: User | null,
    readonly group: Namespace,
    readonly level: number,
    private readonly visibleThroughDescendant: boolean,
  ) {}

  can(ability: GroupAbility): boolean {
    return groupAllows(ability, this.group, this.user, this.level, this.visibleThroughDescendant);
  }

  authorize(ability: GroupAbility): void {
    if (!this.can(ability)) throw forbidden();
  }
}

/** Effective level of a user on a project: highest membership, or ADMIN for administrators. */
export async function loadProjectPolicy(
  deps: Deps,
  user: User | null,
  project: Project,
  namespace: Namespace,
): Promise<ProjectPolicy> {
  let level = 0;
  if (user?.admin) level = AccessLevel.ADMIN;
  else if (user) {
    const date = today(deps);
    const key = `${user.id}:${project.id}:${namespace.traversal_ids.join('/')}:${date}`;
    level = (await cachedLookup(deps, 'projectLevel', key, () =>
      projectAccessLevel(deps.db, user.id, project.id, namespace.traversal_ids, date),
    )) as number;
  }
  return new ProjectPolicy(user, project, namespace, level);
}

export async function loadGroupPolicy(deps: Deps, user: User | null, group: Namespace): Promise<GroupPolicy> {
  if (!user) return new GroupPolicy(user, group, 0, false);
  if (user.admin) return new GroupPolicy(user, group, AccessLevel.ADMIN, true);
  const date = today(deps);
  const key = `${user.id}:${group.traversal_ids.join('/')}:${date}`;
  const level = (await cachedLookup(deps, 'groupLevel', key, () =>
    groupAccessLevel(deps.db, user.id, group.traversal_ids, date),
  )) as number;
  const viaDescendant =
    level === 0 && (group.visibility === 'private' || (group.visibility === 'internal' && user.external))
      ? ((await cachedLookup(deps, 'groupLevel', `${key}:below`, () =>
          hasDescendantMembership(deps.db, user.id, group.id, date),
        )) as boolean)
      : false;
  return new GroupPolicy(user, group, level, viaDescendant);
}

/** May the user create projects in this namespace (their own, or a group by its rules)? */
export async function canCreateProjectIn(deps: Deps, user: User, namespace: Namespace): Promise<boolean> {
  if (namespace.kind === 'user') return user.admin || namespace.owner_id === user.id;
  // Administrators act at ADMIN level in groups; `noone` still stops them, as in GitLab.
  const policy = await loadGroupPolicy(deps, user, namespace);
  return policy.can('create_projects');
}
