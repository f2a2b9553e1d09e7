/** GitLab's access levels (spec part 1, "Access levels"). */
export const AccessLevel = {
  NO_ACCESS: 0,
  MINIMAL_ACCESS: 5,
  GUEST: 10,
  REPORTER: 20,
  DEVELOPER: 30,
  MAINTAINER: 40,
  OWNER: 50,
  /** Administrators act above every role. */
  ADMIN: 60,
} as const;

export type AccessLevelValue = (typeof AccessLevel)[keyof typeof AccessLevel];

/** Levels a membership may hold; owner only on groups. */
export const GROUP_MEMBER_LEVELS = [5, 10, 20, 30, 40, 50] as const;
export const PROJECT_MEMBER_LEVELS = [10, 20, 30, 40] as const;

export const ACCESS_LEVEL_NAMES: Record<number, string> = {
  0: 'No access',
  5: 'Minimal Access',
  10: 'Guest',
  20: 'Reporter',
  30: 'Developer',
  40: 'Maintainer',
  50: 'Owner',
};

/** Who may create projects in a group (`project_creation_level`) → the level it needs. */
export const PROJECT_CREATION_LEVELS: Record<string, number> = {
  noone: Number.POSITIVE_INFINITY,
  owner: AccessLevel.OWNER,
  maintainer: AccessLevel.MAINTAINER,
  developer: AccessLevel.DEVELOPER,
  administrator: AccessLevel.ADMIN,
};

/**
 * GitLab's numeric project creation levels (Gitlab::Access, as the instance's
 * `default_project_creation` stores them) → the names a group's `project_creation_level` uses.
 */
export const PROJECT_CREATION_LEVEL_NAMES: Record<number, string> = {
  0: 'noone',
  1: 'maintainer',
  2: 'developer',
  3: 'administrator',
  4: 'owner',
};

/** Who may create subgroups (`subgroup_creation_level`) → the level it needs. */
export const SUBGROUP_CREATION_LEVELS: Record<string, number> = {
  owner: AccessLevel.OWNER,
  maintainer: AccessLevel.MAINTAINER,
};
