import type { Visibility } from '../db/schema.js';

export const VISIBILITIES = ['private', 'internal', 'public'] as const;

const RANK: Record<Visibility, number> = { private: 0, internal: 10, public: 20 };

/** GitLab's numeric visibility_level (0, 10, 20). */
export const visibilityLevel = (v: Visibility): number => RANK[v];

/** True when `child` is not more visible than `parent`. */
export const fitsWithin = (child: Visibility, parent: Visibility): boolean => RANK[child] <= RANK[parent];
