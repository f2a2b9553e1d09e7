import { recordFailedPasswordAttempt, resetFailedPasswordAttempts } from '../db/queries/users.js';
import type { User } from '../db/schema.js';
import { verifyPassword } from '../lib/crypto.js';
import type { Deps } from './deps.js';
import { recordUserActivity } from './user-activity.js';

/**
 * Wrong passwords before an account is locked: GitLab's `max_login_attempts` default
 * (config/initializers/8_devise.rb `maximum_attempts`, Devise :lockable).
 */
export const MAX_LOGIN_ATTEMPTS = 10;
/** How long a locked account stays locked: GitLab's `failed_login_attempts_unlock_period_in_minutes` default. */
export const UNLOCK_IN_SECONDS = 10 * 60;
/** GitLab's text for a locked account (AuthenticatesWithTwoFactor#locked_user_redirect_alert, devise.failure.locked). */
export const ACCOUNT_LOCKED_MESSAGE = 'Your account is locked.';

/** The outcome of checking a user's password. */
export type PasswordCheck =
  | { ok: true; user: User }
  /** `locked`: the account is locked, whatever the password; `invalid`: unknown user, inactive or wrong password. */
  | { ok: false; reason: 'invalid' | 'locked' };

const lockedSince = (now: Date) => new Date(now.getTime() - UNLOCK_IN_SECONDS * 1000);

/** Devise's `access_locked?`: locked, and the unlock period has not run out. */
export function isAccessLocked(user: Pick<User, 'locked_at'>, now: Date): boolean {
  return user.locked_at !== null && user.locked_at.getTime() > lockedSince(now).getTime();
}

/**
 * The one place a user's own password is checked (web sign-in, the OAuth password grant, Git
 * over HTTP). While the account is locked the password is not even compared, so a locked
 * account gives a guesser no answer. A wrong password counts towards the lock when `count` is
 * set (GitLab's `increment_failed_attempts: true`); a correct one clears the count. Inactive
 * users are refused without counting, as GitLab's find_with_user_password does.
 */
export async function checkUserPassword(
  deps: Deps,
  user: User | undefined,
  password: string,
  options: { count: boolean; allowDeactivated?: boolean } = { count: true },
): Promise<PasswordCheck> {
  // Web sign-in lets a deactivated user in (and reactivates them, as GitLab's sessions do).
  const usable = user?.state === 'active' || (options.allowDeactivated === true && user?.state === 'deactivated');
  if (!user || !usable) {
    // Compare anyway, so an unknown login takes as long as a known one.
    await verifyPassword(password, user?.password_digest ?? null);
    return { ok: false, reason: 'invalid' };
  }
  const now = deps.clock.now();
  if (isAccessLocked(user, now)) return { ok: false, reason: 'locked' };
  if (!(await verifyPassword(password, user.password_digest))) {
    if (options.count) {
      const counted = await recordFailedPasswordAttempt(deps.db, user.id, now, {
        maxAttempts: MAX_LOGIN_ATTEMPTS,
        lockedSince: lockedSince(now),
      });
      if (counted?.locked_at?.getTime() === now.getTime()) {
        deps.logger.info({ user: user.username }, 'account locked after too many failed password attempts');
      }
    }
    return { ok: false, reason: 'invalid' };
  }
  if (user.failed_attempts > 0 || user.locked_at !== null) {
    if (!(await resetFailedPasswordAttempts(deps.db, user.id, lockedSince(now))))
      return { ok: false, reason: 'locked' };
  }
  await recordUserActivity(deps, user);
  return { ok: true, user };
}
