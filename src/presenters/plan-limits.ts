import { PLAN_LIMIT_NAMES, type PlanLimits } from '../services/plan-limits.js';

/** GitLab's PlanLimit entity: the eight package file size limits, in bytes. */
export function presentPlanLimits(limits: PlanLimits) {
  return Object.fromEntries(PLAN_LIMIT_NAMES.map((name) => [name, limits[name]]));
}
