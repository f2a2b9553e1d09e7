import type { Environment } from '../db/schema.js';
import type { ProjectPolicy } from './abilities.js';
import { AccessLevel } from './access-levels.js';

/**
 * Environment and deployment abilities (GitLab's ProjectPolicy and EnvironmentPolicy). Reading
 * needs Reporter, or any signed-in user of a public project (an internal one for users who are
 * not external) when the environments feature is open to everyone; the environments, builds and
 * repository features must be on. Creating, updating, deploying, stopping one environment and
 * deleting a stopped one need Developer on a project that is not archived; stopping stale
 * environments in bulk and deleting a deployment need Maintainer.
 */
export type EnvironmentAbility =
  | 'read_environment'
  | 'read_deployment'
  | 'create_environment'
  | 'update_environment'
  | 'stop_environment'
  | 'stop_stale_environments'
  | 'destroy_environment'
  | 'create_deployment'
  | 'update_deployment'
  | 'destroy_deployment';

export function environmentAllows(ability: EnvironmentAbility, policy: ProjectPolicy, environment?: Environment) {
  const { project, user } = policy;
  const feature = project.features.environments;
  if (!policy.can('read_project') || feature === 'disabled') return false;
  if (project.features.builds === 'disabled' || project.features.repository === 'disabled') return false;
  const publicUser =
    user !== null && (project.visibility === 'public' || (project.visibility === 'internal' && !user.external));
  switch (ability) {
    case 'read_environment':
    case 'read_deployment':
      return policy.level >= AccessLevel.REPORTER || (publicUser && feature !== 'private');
    case 'destroy_environment':
      if (environment && environment.state !== 'stopped') return false;
      return policy.level >= AccessLevel.DEVELOPER && !project.archived;
    case 'stop_stale_environments':
    case 'destroy_deployment':
      return policy.level >= AccessLevel.MAINTAINER && !project.archived;
    default:
      return policy.level >= AccessLevel.DEVELOPER && !project.archived;
  }
}
