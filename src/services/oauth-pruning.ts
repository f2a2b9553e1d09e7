import { deleteDeadOauthTokens, deleteExpiredOauthGrants } from '../db/queries/oauth.js';
import type { Deps } from './deps.js';

/** The daily pruning runs at 03:20 UTC, away from the other daily jobs (00:10, 12:00). */
export const OAUTH_PRUNE_HOUR_UTC = 3;
export const OAUTH_PRUNE_MINUTE_UTC = 20;
/**
 * How long a token of a dead family (no token in it left unrevoked) is kept after its revocation.
 * Replay detection does not need it (nothing live is left to protect), but for this long a client
 * still presenting it is told "Token was revoked" instead of a bare 401, and an incident can be
 * traced to the family and the time it was revoked.
 */
export const REVOKED_TOKEN_RETENTION_DAYS = 30;
const BATCH_ROWS = 1000;

/**
 * Deletes what can no longer authenticate anybody nor detect a replay:
 * - authorization codes past their expiry (a replayed code is refused for its age before the
 *   replay check runs, so an expired code detects nothing);
 * - revoked tokens, once `REVOKED_TOKEN_RETENTION_DAYS` have passed, of families with no
 *   unrevoked token. Rotated tokens of a live family stay: a replayed old refresh token must still
 *   be recognised to revoke the family (RFC 9700 §4.14.2). Tokens that are only expired are never
 *   deleted: their refresh token still works (Doorkeeper's refresh tokens do not expire).
 * Deletes in batches so no statement holds many row locks. Returns the counts.
 */
export async function pruneOauthRecords(deps: Deps, signal?: AbortSignal): Promise<{ grants: number; tokens: number }> {
  const now = deps.clock.now();
  const revokedBefore = new Date(now.getTime() - REVOKED_TOKEN_RETENTION_DAYS * 24 * 60 * 60 * 1000);
  let grants = 0;
  let tokens = 0;
  for (;;) {
    if (signal?.aborted) break;
    const deleted = await deleteExpiredOauthGrants(deps.db, now, BATCH_ROWS);
    grants += deleted;
    if (deleted < BATCH_ROWS) break;
  }
  for (;;) {
    if (signal?.aborted) break;
    const deleted = await deleteDeadOauthTokens(deps.db, revokedBefore, BATCH_ROWS);
    tokens += deleted;
    if (deleted < BATCH_ROWS) break;
  }
  return { grants, tokens };
}
