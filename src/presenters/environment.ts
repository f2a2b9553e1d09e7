import type { Deployment, Environment, User } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';
import { type PresentContext, presentUserBasic } from './user.js';

/** GitLab's Entities::EnvironmentBasic. */
export function presentEnvironmentBasic(environment: Environment) {
  return {
    id: environment.id,
    name: environment.name,
    slug: environment.slug,
    external_url: environment.external_url,
    created_at: isoTime(environment.created_at),
    updated_at: isoTime(environment.updated_at),
  };
}

/**
 * GitLab's Entities::Environment: `project` (BasicProjectDetails) everywhere but the
 * single-environment get, which has `last_deployment` instead.
 */
export function presentEnvironment(
  environment: Environment,
  extra: { project?: unknown; lastDeployment?: Record<string, unknown> | null } = {},
) {
  const lastDeployment = extra.lastDeployment;
  return {
    ...presentEnvironmentBasic(environment),
    description: environment.description,
    tier: environment.tier,
    ...(extra.project !== undefined ? { project: extra.project } : {}),
    state: environment.state,
    auto_stop_at: isoTime(environment.auto_stop_at),
    auto_stop_setting: 'always',
    ...(lastDeployment !== undefined ? { last_deployment: lastDeployment } : {}),
  };
}

/** GitLab's Entities::Deployment; `environment` is left out inside an environment's last_deployment. */
export function presentDeployment(
  deployment: Deployment,
  extra: { user: User | null; deployable: unknown; environment?: Environment },
  pc: PresentContext,
) {
  return {
    id: deployment.id,
    iid: deployment.iid,
    ref: deployment.ref,
    sha: deployment.sha,
    created_at: isoTime(deployment.created_at),
    updated_at: isoTime(deployment.updated_at),
    user: extra.user ? presentUserBasic(extra.user, pc) : null,
    ...(extra.environment ? { environment: presentEnvironmentBasic(extra.environment) } : {}),
    deployable: extra.deployable ?? null,
    status: deployment.status,
  };
}
