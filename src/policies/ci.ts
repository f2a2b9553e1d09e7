import type { ProjectPolicy } from './abilities.js';
import { AccessLevel } from './access-levels.js';

/**
 * CI abilities on a project (GitLab's ProjectPolicy rules for builds and pipelines): reading
 * pipelines and jobs needs the project and its CI feature, and Reporter unless the project's jobs
 * are public (`public_jobs`, on by default); running, cancelling and retrying need Developer.
 */
export type CiAbility = 'read_pipeline' | 'read_build' | 'create_pipeline' | 'update_pipeline' | 'update_build';

export function ciAllows(ability: CiAbility, policy: ProjectPolicy): boolean {
  const feature = policy.project.features.builds;
  if (!policy.can('read_project') || feature === 'disabled') return false;
  if (feature === 'private' && policy.level < AccessLevel.GUEST) return false;
  switch (ability) {
    case 'read_pipeline':
    case 'read_build':
      return policy.level >= AccessLevel.REPORTER || policy.project.settings.public_jobs !== false;
    case 'create_pipeline':
    case 'update_pipeline':
    case 'update_build':
      return policy.level >= AccessLevel.DEVELOPER && !policy.project.archived;
  }
}
