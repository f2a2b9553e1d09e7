import { insertPersonalAccessToken, revokePersonalAccessToken } from '../db/queries/tokens.js';
import type { PersonalAccessToken, User } from '../db/schema.js';
import { addDays } from '../lib/clock.js';
import { digestToken, generateToken } from '../lib/crypto.js';
import { type Deps, today } from './deps.js';
import { Validation } from './errors.js';

export const PAT_PREFIX = 'glpat-';
/** Longest lifetime of a personal access token, and the default when none is given. */
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

/** Creates a token; the plaintext is returned once and only its digest is stored. */
export async function createPersonalAccessToken(
  deps: Deps,
  user: User,
  input: CreateTokenInput,
): Promise<{ token: PersonalAccessToken; plaintext: string }> {
  const v = new Validation();
  const now = today(deps);
  if (input.name.trim() === '') v.add('name', "can't be blank");
  if (input.name.length > 255) v.add('name', 'is too long (maximum is 255 characters)');
  if (input.scopes.length === 0) v.add('scopes', "can't be blank");
  let expiresAt = input.expiresAt ?? null;
  if (expiresAt === null && !input.allowNoExpiry) expiresAt = addDays(now, PAT_MAX_LIFETIME_DAYS);
  if (expiresAt !== null) {
    if (expiresAt <= now) v.add('expires_at', 'must be in the future');
    else if (expiresAt > addDays(now, PAT_MAX_LIFETIME_DAYS) && !input.allowNoExpiry) {
      v.add('expires_at', `must expire in ${PAT_MAX_LIFETIME_DAYS} days`);
    }
  }
  v.throwIfAny();
  const plaintext = input.plaintext ?? generateToken(PAT_PREFIX);
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
