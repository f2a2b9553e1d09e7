import { findPersonalAccessTokenByDigest, revokeTokenFamily, touchPersonalAccessToken } from '../db/queries/tokens.js';
import { findUserById, findUserByIdOrUsername } from '../db/queries/users.js';
import type { User } from '../db/schema.js';
import {
  forbidden,
  insufficientScope,
  invalidToken,
  notFound,
  TOKEN_EXPIRED,
  TOKEN_REVOKED,
  unauthorized,
} from '../http/errors.js';
import { digestToken, safeEqual } from '../lib/crypto.js';
import { getApplicationSettings } from './application-settings.js';
import { cachedLookup, type Deps, today } from './deps.js';
import { findAccessToken, isTokenExpired } from './oauth.js';
import { recordUserActivity } from './user-activity.js';

/** A credential that authenticated the request. */
export interface AuthToken {
  kind: 'personal_access_token' | 'oauth_access_token';
  id: number;
  scopes: string[];
}

/** The caller of a request: a user (possibly through sudo), or nobody. */
export interface Actor {
  user: User | null;
  token: AuthToken | null;
  /** The administrator who used sudo to act as `user`. */
  sudoFrom?: User;
}

export const ANONYMOUS: Actor = { user: null, token: null };

/** A scope that lets a token use an endpoint; `readOnly` scopes only for GET and HEAD. */
export interface ScopeRule {
  scope: string;
  readOnly?: boolean;
}

/** Scopes every API endpoint accepts (GitLab's API::API registration). */
export const API_SCOPES: readonly ScopeRule[] = [{ scope: 'api' }, { scope: 'read_api', readOnly: true }];

/** Credentials found on a request, before any lookup. */
export interface Credentials {
  /** `Authorization: Bearer` or the `access_token` parameter: OAuth first, then PAT. */
  bearer?: string;
  /** `private_token` parameter, then `PRIVATE-TOKEN` header. */
  privateToken?: string;
  /** `Sudo` header or `sudo` parameter. */
  sudo?: string;
}

const LAST_USED_INTERVAL_MS = 10 * 60 * 1000;

/** PAT expiry: the token stops working at 00:00 UTC of its `expires_at` date. */
export function isExpired(expiresAt: string | null, todayDate: string): boolean {
  return expiresAt !== null && expiresAt <= todayDate;
}

/**
 * Resolves the credentials of a request into an actor, in the order of GitLab's API guard
 * (api_guard.rb, auth_finders.rb, helpers.rb `current_user`): unknown token → 401; expired or
 * revoked → 401 invalid_token (a revoked token revokes its family); blocked user → 403; then
 * sudo (admin, `sudo` scope, target found); then the endpoint's scopes → 403
 * insufficient_scope. A request that switched to another user through sudo needs only the
 * `sudo` scope, as in GitLab. `rules` are the scopes the endpoint accepts.
 */
export async function resolveActor(
  deps: Deps,
  credentials: Credentials,
  rules: readonly ScopeRule[],
  method: string,
): Promise<Actor> {
  // OAuth access tokens (Bearer or access_token) are tried first; when the value is not one,
  // it may still be a personal access token sent as Bearer.
  const presented = credentials.privateToken ?? credentials.bearer;
  if (presented === undefined) {
    if (credentials.sudo !== undefined) throw unauthorized();
    return ANONYMOUS;
  }
  if (credentials.privateToken === undefined) {
    const oauth = await resolveOauthToken(deps, presented);
    if (oauth) return finishActor(deps, oauth.user, oauth.token, credentials, rules, method);
  }
  const digest = digestToken(presented);
  const row = await cachedLookup(deps, 'personalAccessToken', digest, () =>
    findPersonalAccessTokenByDigest(deps.db, digest),
  );
  if (!row || !safeEqual(row.token_digest, digest)) throw unauthorized();
  const now = deps.clock.now();
  if (isExpired(row.expires_at, today(deps))) throw invalidToken(TOKEN_EXPIRED);
  if (row.revoked) {
    await revokeTokenFamily(deps.db, row.id, now);
    throw invalidToken(TOKEN_REVOKED);
  }
  if (!row.last_used_at || now.getTime() - row.last_used_at.getTime() > LAST_USED_INTERVAL_MS) {
    await touchPersonalAccessToken(deps.db, row.id, now);
  }
  const user = await findCachedUser(deps, row.user_id);
  if (!user) throw unauthorized();
  const token: AuthToken = { kind: 'personal_access_token', id: row.id, scopes: row.scopes };
  return finishActor(deps, user, token, credentials, rules, method);
}

/**
 * An OAuth access token (src/services/oauth.ts), or undefined when the value is not one (it may
 * still be a personal access token). Expired and revoked tokens answer GitLab's invalid_token.
 */
async function resolveOauthToken(deps: Deps, presented: string): Promise<{ user: User; token: AuthToken } | undefined> {
  const row = await findAccessToken(deps, presented);
  if (!row) return undefined;
  if (isTokenExpired(row, deps.clock.now())) throw invalidToken(TOKEN_EXPIRED);
  if (row.revoked_at !== null) throw invalidToken(TOKEN_REVOKED);
  const user = await findCachedUser(deps, row.user_id);
  if (!user) throw unauthorized();
  return { user, token: { kind: 'oauth_access_token', id: row.id, scopes: row.scopes } };
}

/** A token's user (the lookup every authenticated request makes). */
const findCachedUser = (deps: Deps, id: number) =>
  cachedLookup(deps, 'user', `#${id}`, () => findUserById(deps.db, id));

/** The steps shared by every kind of token: the user may use the API, sudo, then the scopes. */
async function finishActor(
  deps: Deps,
  user: User,
  token: AuthToken,
  credentials: Credentials,
  rules: readonly ScopeRule[],
  method: string,
): Promise<Actor> {
  checkUserMayUseApi(user, deps.config.baseUrl);
  // What keeps an account from counting as dormant (deactivate_dormant_users).
  await recordUserActivity(deps, user);
  const actor: Actor = { user: await withAdminMode(deps, user, token), token };
  if (credentials.sudo !== undefined) {
    const sudoed = await applySudo(deps, actor, credentials.sudo);
    if (sudoed.user?.id !== user.id) return sudoed;
  }
  checkScopes(token, rules, method);
  return actor;
}

/** The scope an administrator's token needs to act as administrator while `admin_mode` is on. */
export const ADMIN_MODE_SCOPE = 'admin_mode';

/**
 * GitLab's admin mode on the API: while the `admin_mode` setting is on, an administrator's token
 * acts with administrator rights only when it has the `admin_mode` scope; without it the
 * administrator is a regular user for the request (policies, `sudo` and admin-only endpoints all
 * read `admin` from the actor). The cached user row is never changed.
 */
export async function withAdminMode(deps: Deps, user: User, token: AuthToken): Promise<User> {
  if (!user.admin || token.scopes.includes(ADMIN_MODE_SCOPE)) return user;
  if ((await getApplicationSettings(deps)).values.admin_mode !== true) return user;
  return { ...user, admin: false };
}

/** Throws insufficient_scope unless one of the token's scopes admits this request. */
export function checkScopes(token: AuthToken, rules: readonly ScopeRule[], method: string): void {
  const readRequest = method === 'GET' || method === 'HEAD';
  const allowed = rules.some((rule) => token.scopes.includes(rule.scope) && (!rule.readOnly || readRequest));
  if (!allowed) throw insufficientScope(rules.map((r) => r.scope));
}

/** GitLab's UserAccessDeniedReason texts for users who may not use the API. */
function checkUserMayUseApi(user: User, baseUrl: string): void {
  if (user.state === 'deactivated') {
    throw forbidden(
      'Your account has been deactivated by your administrator. ' +
        `Please log back in from a web browser to reactivate your account at ${baseUrl}`,
    );
  }
  // Banned is one of GitLab's blocked states, and answers as blocked.
  if (user.state === 'blocked' || user.state === 'banned') throw forbidden('Your account has been blocked.');
  if (user.state === 'blocked_pending_approval') {
    throw forbidden('Your account is pending approval from your administration and hence blocked.');
  }
}

/** GitLab's sudo: an administrator's token with the `sudo` scope acts as another user. */
async function applySudo(deps: Deps, actor: Actor, identifier: string): Promise<Actor> {
  const admin = actor.user as User;
  if (!admin.admin) throw forbidden('Must be admin to use sudo');
  if (!actor.token) throw forbidden('Must be authenticated using an OAuth or personal access token to use sudo');
  if (!actor.token.scopes.includes('sudo')) throw insufficientScope(['sudo']);
  const target = await findUserByIdOrUsername(deps.db, identifier);
  if (!target) throw notFound(`User with ID or username '${identifier}'`);
  return { user: target, token: actor.token, sudoFrom: admin };
}
