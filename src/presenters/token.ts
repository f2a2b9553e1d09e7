import type { PersonalAccessToken } from '../db/schema.js';
import { isTokenActive } from '../services/tokens.js';

/** GitLab's PersonalAccessToken entity. */
export function presentPersonalAccessToken(token: PersonalAccessToken, today: string) {
  return {
    id: token.id,
    name: token.name,
    revoked: token.revoked,
    created_at: token.created_at.toISOString(),
    description: token.description,
    scopes: token.scopes,
    user_id: token.user_id,
    last_used_at: token.last_used_at ? token.last_used_at.toISOString() : null,
    active: isTokenActive(token, today),
    expires_at: token.expires_at,
  };
}

/** PersonalAccessTokenWithToken: the entity plus the plaintext, shown only at creation. */
export function presentPersonalAccessTokenWithToken(token: PersonalAccessToken, plaintext: string, today: string) {
  return { ...presentPersonalAccessToken(token, today), token: plaintext };
}

/** GitLab's ImpersonationToken entity: the personal access token entity and `impersonation`. */
export function presentImpersonationToken(token: PersonalAccessToken, today: string) {
  return { ...presentPersonalAccessToken(token, today), impersonation: token.impersonation };
}

/** ImpersonationTokenWithToken: with the plaintext, shown only at creation. */
export function presentImpersonationTokenWithToken(token: PersonalAccessToken, plaintext: string, today: string) {
  return { ...presentImpersonationToken(token, today), token: plaintext };
}
