import type { Visibility } from '../db/schema.js';

export const VISIBILITIES = ['private', 'internal', 'public'] as const;

const RANK: Record<Visibility, number> = { private: 0, internal: 10, public: 20 };

/** GitLab's numeric visibility_level (0, 10, 20). */
export const visibilityLevel = (v: Visibility): number => RANK[v];

/** True when `child` is not more visible than `parent`. */
export const fitsWithin = (child: Visibility, parent: Visibility): boolean => RANK[child] <= RANK[parent];

/** The less visible of two levels: an instance default lowered to what a parent group allows. */
export const cappedBy = (wanted: Visibility, parent: Visibility): Visibility =>
  fitsWithin(wanted, parent) ? wanted : parent;

/**
 * GitLab's `Gitlab::VisibilityLevel.allowed_for?`: administrators may use every level, anyone
 * else only the levels the instance's `restricted_visibility_levels` leaves open.
 */
export const visibilityAllowedFor = (
  actor: { admin: boolean },
  visibility: Visibility,
  restricted: readonly string[],
): boolean => actor.admin || !restricted.includes(visibility);

/** GitLab's `deny_visibility_level` text, reported on `visibility_level`. */
export const restrictedVisibilityMessage = (visibility: Visibility): string =>
  `${visibility} has been restricted by your GitLab administrator`;
