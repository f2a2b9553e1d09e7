import {
  deactivateDormantUsers as deactivateDormantUserRows,
  reactivateUser,
  touchUserActivity,
} from '../db/queries/users.js';
import type { User } from '../db/schema.js';
import { addDays } from '../lib/clock.js';
import { getApplicationSettings } from './application-settings.js';
import { type Deps, today } from './deps.js';

/** GitLab's DeactivateDormantUsersWorker runs in the small hours (UTC); Depot once a day at 00:21. */
export const DORMANT_USERS_HOUR_UTC = 0;
export const DORMANT_USERS_MINUTE_UTC = 21;
/** GitLab's `User::MINIMUM_DAYS_CREATED`: a user never active is left alone this long after sign-up. */
export const NEVER_ACTIVE_GRACE_DAYS = 7;

/**
 * Marks the user active today (GitLab's Users::ActivityService: an authenticated API or Git
 * request, a sign-in). At most one write a day per user: the cached user carries the day.
 */
export async function recordUserActivity(deps: Deps, user: User): Promise<void> {
  const day = today(deps);
  if (user.last_activity_on === day) return;
  await touchUserActivity(deps.db, user.id, day);
}

/**
 * With `deactivate_dormant_users` on, deactivates every user inactive for
 * `deactivate_dormant_users_period` days (or never active, a week after sign-up). Administrators
 * and bots are never deactivated, so neither is the last administrator. Returns how many were.
 */
export async function deactivateDormantUsers(deps: Deps): Promise<number> {
  const settings = (await getApplicationSettings(deps)).values;
  if (settings.deactivate_dormant_users !== true) return 0;
  const day = today(deps);
  const period = settings.deactivate_dormant_users_period as number;
  const ids = await deactivateDormantUserRows(
    deps.db,
    { lastActiveBy: addDays(day, -period), createdBy: addDays(day, -NEVER_ACTIVE_GRACE_DAYS) },
    deps.clock.now(),
  );
  if (ids.length > 0) deps.logger.info({ users: ids }, 'dormant users deactivated');
  return ids.length;
}

/**
 * A deactivated user who signs in through the web is active again (GitLab's SessionsController:
 * "Welcome back! ..."); any other user is returned as is.
 */
export async function reactivateOnSignIn(deps: Deps, user: User): Promise<User> {
  if (user.state !== 'deactivated') return user;
  const reactivated = await reactivateUser(deps.db, user.id, deps.clock.now());
  if (reactivated) deps.logger.info({ user: user.username }, 'deactivated user reactivated by signing in');
  return reactivated ?? user;
}
