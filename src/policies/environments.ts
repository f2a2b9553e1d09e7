import type { Environment } from '../db/schema.js';
import type { ProjectPolicy } from './abilities.js';
import { AccessLevel } from './access-levels.js';

/**
 * Environment and deployment abilities (GitLab's ProjectPolicy and EnvironmentPolicy): reading
 * needs Reporter and the project's environments feature; creating, updating, stopping, deploying
 * and deleting need Developer on a project that is not archived; an environment that is not
 * stopped cannot be deleted by anyone; deleting a deployment needs Maintainer.
 */
export type EnvironmentAbility =
  | 'read_environment'
  | 'read_deployment'
  | 'create_environment'
  | 'update_environment'
  | 'stop_environment'
  | 'destroy_environment'
  | 'create_deployment'
  | 'update_deployment'
  | 'destroy_deployment';

export function environmentAllows(ability: EnvironmentAbility, policy: ProjectPolicy, environment?: Environment) {
  const feature = policy.project.features.environments;
  if (!policy.can('read_project') || feature === 'disabled') return false;
  if (policy.level < AccessLevel.REPORTER) return false;
  switch (ability) {
    case 'read_environment':
    case 'read_deployment':
      return true;
    case 'destroy_environment':
      if (environment && environment.state !== 'stopped') return false;
      return policy.level >= AccessLevel.DEVELOPER && !policy.project.archived;
    case 'destroy_deployment':
      return policy.level >= AccessLevel.MAINTAINER && !policy.project.archived;
    default:
      return policy.level >= AccessLevel.DEVELOPER && !policy.project.archived;
  }
}
