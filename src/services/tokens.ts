import { insertPersonalAccessToken, revokePersonalAccessToken } from '../db/queries/tokens.js';
import type { PersonalAccessToken, User } from '../db/schema.js';
import { unprocessable } from '../http/errors.js';
import { addDays } from '../lib/clock.js';
import { digestToken, generateToken } from '../lib/crypto.js';
import { getApplicationSettings } from './application-settings.js';
import { type Deps, today } from './deps.js';
import { Validation } from './errors.js';

/** The prefix of new personal access tokens unless the instance's `personal_access_token_prefix` sets one. */
export const PAT_PREFIX = 'glpat-';
/**
 * Longest lifetime of a personal access token, and the default when none is given; the
 * instance's `max_personal_access_token_lifetime` (1–365 days) shortens both.
 */
export const PAT_MAX_LIFETIME_DAYS = 365;

/** Scopes a personal access token may carry (GitLab's lib/gitlab/auth.rb, those Depot serves). */
export const PAT_SCOPES = [
  'api',
  'read_api',
  'read_user',
  'read_repository',
  'write_repository',
  'sudo',
  'admin_mode',
  'create_runner',
  'manage_runner',
] as const;

export interface CreateTokenInput {
  name: string;
  scopes: string[];
  expiresAt?: string | null;
  description?: string | null;
  /** For tokens given at bootstrap (ADMIN_TOKEN): the plaintext is chosen by the operator. */
  plaintext?: string;
  /** Bootstrap tokens may live without an expiry date. */
  allowNoExpiry?: boolean;
}

/** Rails' `Array#to_sentence`: "a", "a and b", "a, b, and c". */
function toSentence(items: string[]): string {
  if (items.length <= 2) return items.join(' and ');
  return `${items.slice(0, -1).join(', ')}, and ${items[items.length - 1]}`;
}

/**
 * Creates a token; the plaintext is returned once and only its digest is stored. A date in the
 * past answers 400 (Depot refuses tokens that could never work); the model's own rules answer
 * GitLab's 422 with the full messages as one sentence (PersonalAccessTokens::CreateService).
 */
export async function createPersonalAccessToken(
  deps: Deps,
  user: User,
  input: CreateTokenInput,
): Promise<{ token: PersonalAccessToken; plaintext: string }> {
  const now = today(deps);
  const settings = (await getApplicationSettings(deps)).values;
  const lifetimeDays = (settings.max_personal_access_token_lifetime as number | null) ?? PAT_MAX_LIFETIME_DAYS;
  const maxExpiry = addDays(now, Math.min(lifetimeDays, PAT_MAX_LIFETIME_DAYS));
  let expiresAt = input.expiresAt ?? null;
  if (expiresAt === null && !input.allowNoExpiry) expiresAt = maxExpiry;
  if (expiresAt !== null && expiresAt <= now) new Validation().add('expires_at', 'must be in the future').throwIfAny();
  const errors: string[] = [];
  if (input.name.trim() === '') errors.push("Name can't be blank");
  else if (input.name.length > 255) errors.push('Name is too long (maximum is 255 characters)');
  if (input.scopes.length === 0) errors.push("Scopes can't be blank");
  if (expiresAt !== null && expiresAt > maxExpiry && !input.allowNoExpiry) {
    errors.push(`Expiration date must be before ${maxExpiry}`);
  }
  if (errors.length > 0) throw unprocessable(toSentence(errors));
  // Only new tokens carry the prefix: tokens are found by digest, so older ones keep working.
  const prefix = (settings.personal_access_token_prefix as string | null) || PAT_PREFIX;
  const plaintext = input.plaintext ?? generateToken(prefix);
  const at = deps.clock.now();
  const token = await insertPersonalAccessToken(deps.db, {
    user_id: user.id,
    name: input.name,
    description: input.description ?? null,
    token_digest: digestToken(plaintext),
    scopes: JSON.stringify(input.scopes),
    expires_at: expiresAt,
    created_at: at,
    updated_at: at,
  });
  return { token, plaintext };
}

export async function revokeToken(deps: Deps, token: PersonalAccessToken): Promise<void> {
  await revokePersonalAccessToken(deps.db, token.id, deps.clock.now());
}

/** A token is active when neither revoked nor expired. */
export function isTokenActive(token: PersonalAccessToken, todayDate: string): boolean {
  return !token.revoked && (token.expires_at === null || token.expires_at > todayDate);
}

export interface ImpersonationTokenInput {
  name: string;
  scopes?: string[];
  expiresAt?: string | null;
  description?: string | null;
}

/**
 * An impersonation token for `user` (POST /users/:user_id/impersonation_tokens): a personal
 * access token marked `impersonation`, which acts as the user. GitLab saves the model directly,
 * so its validations answer 400 with per-field messages (render_validation_error!). Expiry as
 * for personal access tokens: the instance's maximum lifetime bounds it and is the default.
 */
export async function createImpersonationToken(
  deps: Deps,
  user: User,
  input: ImpersonationTokenInput,
): Promise<{ token: PersonalAccessToken; plaintext: string }> {
  const now = today(deps);
  const settings = (await getApplicationSettings(deps)).values;
  const lifetimeDays = (settings.max_personal_access_token_lifetime as number | null) ?? PAT_MAX_LIFETIME_DAYS;
  const maxExpiry = addDays(now, Math.min(lifetimeDays, PAT_MAX_LIFETIME_DAYS));
  const expiresAt = input.expiresAt ?? maxExpiry;
  const scopes = input.scopes ?? [];
  const v = new Validation();
  if (input.name.trim() === '') v.add('name', "can't be blank");
  else if (input.name.length > 255) v.add('name', 'is too long (maximum is 255 characters)');
  if (scopes.length === 0) v.add('scopes', "can't be blank");
  else if (!scopes.every((s) => (PAT_SCOPES as readonly string[]).includes(s))) {
    v.add('scopes', 'can only contain available scopes');
  }
  if (expiresAt <= now) v.add('expires_at', 'must be in the future');
  else if (expiresAt > maxExpiry) v.add('expires_at', `must be before ${maxExpiry}`);
  v.throwIfAny();
  const prefix = (settings.personal_access_token_prefix as string | null) || PAT_PREFIX;
  const plaintext = generateToken(prefix);
  const at = deps.clock.now();
  const token = await insertPersonalAccessToken(deps.db, {
    user_id: user.id,
    name: input.name,
    description: input.description ?? null,
    token_digest: digestToken(plaintext),
    scopes: JSON.stringify(scopes),
    expires_at: expiresAt,
    impersonation: true,
    created_at: at,
    updated_at: at,
  });
  return { token, plaintext };
}
