import type { User } from '../db/schema.js';
import { getApplicationSettings } from './application-settings.js';
import type { Deps } from './deps.js';
import { Validation } from './errors.js';
import { createUser } from './users.js';

/** GitLab's messages on `email` for a domain the sign-up restrictions refuse (RestrictedSignup). */
export const SIGN_UP_DOMAIN_MESSAGES = {
  notAuthorized: 'domain is not authorized for sign-up.',
  denied: 'is not from an allowed domain.',
} as const;

/** What the sign-up form sends (GitLab's `new_user[...]` fields). */
export interface SignUpInput {
  firstName: string;
  lastName: string;
  username: string;
  email: string;
  password: string;
}

/** Raised when the instance does not take sign-ups (GitLab's `allow_signup?` is false). */
export class SignUpDisabledError extends Error {
  constructor() {
    super('sign-up is disabled');
  }
}

/** GitLab's `allow_signup?`: sign-up on, and password authentication for the web on. */
export async function signUpAllowed(deps: Deps): Promise<boolean> {
  const { values } = await getApplicationSettings(deps);
  return values.signup_enabled !== false && values.password_authentication_enabled_for_web !== false;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Whether the e-mail's domain (after its last `@`) matches one of `domains`, as GitLab matches
 * them: the whole domain, case-insensitively, each `*` standing for any run of characters.
 */
export function emailDomainMatches(domains: readonly string[], email: string): boolean {
  const at = email.lastIndexOf('@');
  if (at < 0) return false;
  const domain = email.slice(at + 1);
  return domains.some((pattern) => new RegExp(`^${escapeRegExp(pattern).replaceAll('\\*', '.*?')}$`, 'i').test(domain));
}

const stringList = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string' && v !== '') : [];

/**
 * The restriction a self sign-up's e-mail breaks, or undefined (GitLab's order: a domain on the
 * allowlist passes; with an allowlist any other is refused; without one, the denylist refuses).
 */
export function signUpDomainError(settings: Readonly<Record<string, unknown>>, email: string): string | undefined {
  const allowlist = stringList(settings.domain_allowlist);
  if (allowlist.length > 0) {
    return emailDomainMatches(allowlist, email) ? undefined : SIGN_UP_DOMAIN_MESSAGES.notAuthorized;
  }
  const denylist = stringList(settings.domain_denylist);
  if (settings.domain_denylist_enabled === true && emailDomainMatches(denylist, email)) {
    return SIGN_UP_DOMAIN_MESSAGES.denied;
  }
  return undefined;
}

/**
 * Creates an account from the sign-up form: refused when sign-up is off, the domain checked
 * against the settings' allowlist and denylist, and the new user waiting for an administrator
 * (`blocked_pending_approval`) when `require_admin_approval_after_user_signup` is on.
 */
export async function signUp(deps: Deps, input: SignUpInput): Promise<User> {
  if (!(await signUpAllowed(deps))) throw new SignUpDisabledError();
  const { values } = await getApplicationSettings(deps);
  const v = new Validation();
  if (input.firstName.trim() === '') v.add('first_name', "can't be blank");
  if (input.lastName.trim() === '') v.add('last_name', "can't be blank");
  const domainError = signUpDomainError(values, input.email);
  if (domainError) v.add('email', domainError);
  v.throwIfAny();
  return createUser(
    deps,
    {
      username: input.username,
      email: input.email,
      name: `${input.firstName.trim()} ${input.lastName.trim()}`,
      password: input.password,
      state: values.require_admin_approval_after_user_signup === true ? 'blocked_pending_approval' : 'active',
    },
    null,
  );
}
