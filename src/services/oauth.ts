import { randomBytes, randomUUID } from 'node:crypto';
import type { Db } from '../db/database.js';
import {
  findOauthTokenByDigest,
  findOauthTokenById,
  findOauthTokenByRefreshDigest,
  insertOauthGrant,
  insertOauthToken,
  lockOauthGrantByDigest,
  lockOauthTokenByRefreshDigest,
  markOauthGrantUsed,
  revokeOauthToken,
  revokeOauthTokenFamily,
} from '../db/queries/oauth.js';
import { findUserByEmail, findUserById, findUserByIdOrUsername } from '../db/queries/users.js';
import type { OauthAccessToken, OauthApplication, User } from '../db/schema.js';
import { digestToken, safeEqual } from '../lib/crypto.js';
import { isValidCodeVerifier, isValidS256Challenge, s256CodeChallenge } from '../lib/pkce.js';
import { cachedLookup, type Deps } from './deps.js';
import { findApplicationByClientId, matchesRedirectUri, OAUTH_SCOPES, secretMatches } from './oauth-applications.js';
import { checkUserPassword } from './password-auth.js';

/** Authorization codes live 10 minutes (Doorkeeper's default, RFC 6749 §4.1.2). */
export const CODE_TTL_SECONDS = 600;
/** Access tokens live 2 hours (GitLab's `access_token_expires_in`). */
export const ACCESS_TOKEN_TTL_SECONDS = 7200;
/** Scopes a request without `scope` asks for (GitLab's DEFAULT_SCOPES). */
export const DEFAULT_SCOPES = ['api'];
/** 256 bits per code and token. */
const SECRET_BYTES = 32;

export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'access_denied'
  | 'invalid_redirect_uri'
  | 'invalid_token';

/** Doorkeeper's English descriptions, which clients show to people. */
export const OAUTH_DESCRIPTIONS: Record<OAuthErrorCode, string> = {
  invalid_request:
    'The request is missing a required parameter, includes an unsupported parameter value, or is otherwise malformed.',
  invalid_client:
    'Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method.',
  invalid_grant:
    'The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.',
  unauthorized_client: 'The client is not authorized to perform this request using this method.',
  unsupported_grant_type: 'The authorization grant type is not supported by the authorization server.',
  unsupported_response_type: 'The authorization server does not support this response type.',
  invalid_scope: 'The requested scope is invalid, unknown, or malformed.',
  access_denied: 'The resource owner or authorization server denied the request.',
  invalid_redirect_uri: "The requested redirect URI is malformed or doesn't match the client redirect URI.",
  invalid_token: 'The access token is invalid',
};

/** An RFC 6749 error: the code, its description, and the HTTP status of the token endpoint. */
export class OAuthError extends Error {
  readonly status: number;
  constructor(
    readonly code: OAuthErrorCode,
    readonly description: string = OAUTH_DESCRIPTIONS[code],
    status?: number,
  ) {
    super(`${code}: ${description}`);
    this.status =
      status ?? (code === 'invalid_client' || code === 'unauthorized_client' || code === 'invalid_token' ? 401 : 400);
  }
}

export const missingParameter = (name: string) =>
  new OAuthError('invalid_request', `Missing required parameter: ${name}.`);
export const repeatedParameter = (name: string) =>
  new OAuthError('invalid_request', `The parameter ${name} must not be repeated.`);

// ── Tokens ──────────────────────────────────────────────────────────────────────────────────

export interface IssuedToken {
  token: OauthAccessToken;
  accessToken: string;
  refreshToken: string;
}

const newSecret = () => randomBytes(SECRET_BYTES).toString('base64url');

async function mintToken(
  db: Db,
  now: Date,
  values: { applicationId: number; userId: number; scopes: string[]; family?: string; previousId?: number },
): Promise<IssuedToken> {
  const accessToken = newSecret();
  const refreshToken = newSecret();
  const token = await insertOauthToken(db, {
    application_id: values.applicationId,
    user_id: values.userId,
    token_digest: digestToken(accessToken),
    refresh_token_digest: digestToken(refreshToken),
    scopes: JSON.stringify(values.scopes),
    expires_in: ACCESS_TOKEN_TTL_SECONDS,
    family: values.family ?? randomUUID(),
    previous_token_id: values.previousId ?? null,
    created_at: now,
  });
  return { token, accessToken, refreshToken };
}

/** Seconds until an access token expires (never negative). */
export function secondsLeft(token: OauthAccessToken, now: Date): number {
  const ends = token.created_at.getTime() + token.expires_in * 1000;
  return Math.max(0, Math.floor((ends - now.getTime()) / 1000));
}

export const isTokenExpired = (token: OauthAccessToken, now: Date) =>
  token.created_at.getTime() + token.expires_in * 1000 <= now.getTime();

/** The access token row for a presented access token (not a refresh token), by digest. */
export async function findAccessToken(deps: Deps, presented: string): Promise<OauthAccessToken | undefined> {
  const digest = digestToken(presented);
  const row = await cachedLookup(deps, 'oauthAccessToken', digest, () => findOauthTokenByDigest(deps.db, digest));
  return row && safeEqual(row.token_digest, digest) ? row : undefined;
}

/** An access token that is neither revoked nor expired. */
export async function findActiveAccessToken(deps: Deps, presented: string): Promise<OauthAccessToken | undefined> {
  const row = await findAccessToken(deps, presented);
  return row && row.revoked_at === null && !isTokenExpired(row, deps.clock.now()) ? row : undefined;
}

/**
 * The scopes a request may have: the `scope` parameter (space-separated), or the default; each
 * must be a scope Depot knows and one the application was registered with.
 */
export function resolveScopes(app: OauthApplication, requested: string | undefined, within?: string[]): string[] {
  const scopes =
    requested === undefined || requested.trim() === ''
      ? (within ?? DEFAULT_SCOPES)
      : [...new Set(requested.split(' ').filter((s) => s !== ''))];
  const allowed = within ?? app.scopes;
  const known = OAUTH_SCOPES as readonly string[];
  if (requested !== undefined && /[^\x21\x23-\x5B\x5D-\x7E ]/.test(requested)) throw new OAuthError('invalid_scope');
  if (scopes.length === 0 || !scopes.every((s) => known.includes(s) && allowed.includes(s))) {
    throw new OAuthError('invalid_scope');
  }
  return scopes;
}

// ── Client authentication ───────────────────────────────────────────────────────────────────

export interface ClientCredentials {
  clientId?: string;
  clientSecret?: string;
}

/**
 * The application making a token, revocation or introspection request. Confidential
 * applications (and any client that sends a secret) must prove the secret; public ones are
 * identified by client_id. `requireSecret` demands a secret whatever the application's type.
 */
export async function authenticateClient(
  deps: Deps,
  credentials: ClientCredentials,
  options: { requireSecret?: boolean } = {},
): Promise<OauthApplication> {
  if (!credentials.clientId) throw new OAuthError('invalid_client');
  const app = await findApplicationByClientId(deps, credentials.clientId);
  if (!app) throw new OAuthError('invalid_client');
  if (credentials.clientSecret !== undefined) {
    if (!secretMatches(app, credentials.clientSecret)) throw new OAuthError('invalid_client');
    return app;
  }
  if (app.confidential || options.requireSecret) throw new OAuthError('invalid_client');
  return app;
}

// ── Authorization endpoint ──────────────────────────────────────────────────────────────────

export interface AuthorizationRequest {
  application: OauthApplication;
  redirectUri: string;
  scopes: string[];
  state?: string;
  codeChallenge?: string;
}

/** The outcome of checking an authorization request (Doorkeeper's pre-authorization). */
export type PreAuthorization =
  | { kind: 'valid'; request: AuthorizationRequest }
  /** client_id or redirect_uri is bad: tell the person, never redirect (RFC 6749 §4.1.2.1). */
  | { kind: 'fatal'; error: OAuthError }
  /** Any other error goes back to the client's registered redirect URI with the state. */
  | { kind: 'redirect'; redirectUri: string; state?: string; error: OAuthError };

/** Parameters of the request, every value of each name (to refuse repeated ones). */
export type RequestParams = Map<string, string[]>;

const single = (params: RequestParams, name: string): { value?: string; repeated: boolean } => {
  const values = params.get(name) ?? [];
  return { value: values[0], repeated: values.length > 1 };
};

const present = (value: string | undefined) => (value === undefined || value === '' ? undefined : value);

/** Checks an authorization request in Doorkeeper's order, with RFC 6749/7636 errors. */
export async function preAuthorize(deps: Deps, params: RequestParams): Promise<PreAuthorization> {
  const clientId = single(params, 'client_id');
  if (clientId.repeated) return { kind: 'fatal', error: repeatedParameter('client_id') };
  if (!present(clientId.value)) return { kind: 'fatal', error: missingParameter('client_id') };
  const application = await findApplicationByClientId(deps, clientId.value as string);
  if (!application) return { kind: 'fatal', error: new OAuthError('invalid_client') };
  const redirect = single(params, 'redirect_uri');
  if (redirect.repeated || !present(redirect.value) || !matchesRedirectUri(application, redirect.value as string)) {
    return { kind: 'fatal', error: new OAuthError('invalid_redirect_uri') };
  }
  const redirectUri = redirect.value as string;
  const stateParam = single(params, 'state');
  const state = stateParam.repeated ? undefined : present(stateParam.value);
  const fail = (error: OAuthError): PreAuthorization => ({ kind: 'redirect', redirectUri, state, error });
  for (const name of ['state', 'response_type', 'scope', 'code_challenge', 'code_challenge_method']) {
    if (single(params, name).repeated) return fail(repeatedParameter(name));
  }
  const responseType = present(single(params, 'response_type').value);
  if (responseType === undefined) return fail(missingParameter('response_type'));
  // Only the code flow: the implicit grant (`token`) is not offered (RFC 9700 §2.1.2).
  if (responseType !== 'code') return fail(new OAuthError('unsupported_response_type'));
  let scopes: string[];
  try {
    scopes = resolveScopes(application, single(params, 'scope').value);
  } catch (error) {
    return fail(error as OAuthError);
  }
  const challenge = present(single(params, 'code_challenge').value);
  const method = present(single(params, 'code_challenge_method').value);
  if (challenge === undefined) {
    if (method !== undefined) return fail(missingParameter('code_challenge'));
    if (!application.confidential) {
      return fail(
        new OAuthError('invalid_request', 'PKCE (code_challenge with method S256) is required for public clients.'),
      );
    }
  } else {
    // RFC 7636 §4.3: an absent method means `plain`, which Depot refuses (RFC 9700 §2.1.1).
    if (method !== 'S256') return fail(new OAuthError('invalid_request', 'The code_challenge_method must be S256.'));
    if (!isValidS256Challenge(challenge))
      return fail(new OAuthError('invalid_request', 'The code_challenge is malformed.'));
  }
  return { kind: 'valid', request: { application, redirectUri, scopes, state, codeChallenge: challenge } };
}

/** `uri` with extra query parameters, keeping the registered URI's own text and query as they are. */
export function redirectWith(uri: string, values: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value !== undefined) query.append(key, value);
  const hash = uri.indexOf('#');
  const base = hash >= 0 ? uri.slice(0, hash) : uri;
  return `${base}${base.includes('?') ? '&' : '?'}${query.toString()}`;
}

/** The redirect that carries an authorization error back to the client (RFC 6749 §4.1.2.1). */
export function errorRedirect(deps: Deps, redirectUri: string, error: OAuthError, state?: string): string {
  return redirectWith(redirectUri, {
    error: error.code,
    error_description: error.description,
    state,
    iss: deps.config.baseUrl,
  });
}

/** The user approved: a single-use code, valid 10 minutes, bound to client, redirect URI and PKCE challenge. */
export async function approveAuthorization(deps: Deps, request: AuthorizationRequest, user: User): Promise<string> {
  const code = newSecret();
  const now = deps.clock.now();
  await insertOauthGrant(deps.db, {
    application_id: request.application.id,
    user_id: user.id,
    code_digest: digestToken(code),
    redirect_uri: request.redirectUri,
    scopes: JSON.stringify(request.scopes),
    code_challenge: request.codeChallenge ?? null,
    code_challenge_method: request.codeChallenge ? 'S256' : null,
    expires_at: new Date(now.getTime() + CODE_TTL_SECONDS * 1000),
    created_at: now,
  });
  return redirectWith(request.redirectUri, { code, state: request.state, iss: deps.config.baseUrl });
}

// ── Token endpoint grants ───────────────────────────────────────────────────────────────────

const activeUser = async (db: Db, id: number) => {
  const user = await findUserById(db, id);
  return user && user.state === 'active' ? user : undefined;
};

/**
 * Exchanges an authorization code. The grant row is locked, so of any number of concurrent
 * exchanges one wins; a code presented again is refused and the token issued from it is revoked
 * with its refresh chain (RFC 6749 §4.1.2, Doorkeeper 6). Checks run in Doorkeeper 6's order: the
 * "already used" check comes last, so only a caller who proves redirect URI and PKCE revokes.
 */
export async function exchangeCode(
  deps: Deps,
  app: OauthApplication,
  input: { code: string; redirectUri: string; codeVerifier?: string },
): Promise<IssuedToken> {
  const digest = digestToken(input.code);
  const now = deps.clock.now();
  const outcome = await deps.db.transaction().execute(async (tx) => {
    const grant = await lockOauthGrantByDigest(tx, digest);
    if (!grant || !safeEqual(grant.code_digest, digest) || grant.application_id !== app.id) {
      throw new OAuthError('invalid_grant');
    }
    if (grant.expires_at.getTime() <= now.getTime()) throw new OAuthError('invalid_grant');
    if (grant.redirect_uri !== input.redirectUri) throw new OAuthError('invalid_grant');
    if (grant.code_challenge !== null) {
      if (input.codeVerifier === undefined) throw missingParameter('code_verifier');
      const ok =
        isValidCodeVerifier(input.codeVerifier) &&
        safeEqual(s256CodeChallenge(input.codeVerifier), grant.code_challenge);
      if (!ok) throw new OAuthError('invalid_grant');
    } else if (input.codeVerifier !== undefined) {
      // A verifier for a code issued without a challenge: the PKCE downgrade (RFC 9700 §4.8).
      throw new OAuthError('invalid_grant');
    }
    if (grant.revoked_at !== null) {
      if (grant.access_token_id !== null) {
        const issued = await findOauthTokenById(tx, grant.access_token_id);
        if (issued) await revokeOauthTokenFamily(tx, issued.family, now);
      }
      return 'replayed' as const;
    }
    const user = await activeUser(tx, grant.user_id);
    if (!user) throw new OAuthError('invalid_grant');
    const issued = await mintToken(tx, now, { applicationId: app.id, userId: user.id, scopes: grant.scopes });
    await markOauthGrantUsed(tx, grant.id, now, issued.token.id);
    return issued;
  });
  // The revocation above is committed before the refusal is sent.
  if (outcome === 'replayed') throw new OAuthError('invalid_grant');
  return outcome;
}

/**
 * Rotates a refresh token: the old access and refresh tokens stop working and a new pair is
 * issued in the same family. A refresh token presented after it was rotated or revoked revokes
 * the whole family (RFC 9700 §4.14.2). Scope may only narrow (RFC 6749 §6).
 */
export async function refreshAccessToken(
  deps: Deps,
  app: OauthApplication,
  input: { refreshToken: string; scope?: string },
): Promise<IssuedToken> {
  const digest = digestToken(input.refreshToken);
  const now = deps.clock.now();
  const outcome = await deps.db.transaction().execute(async (tx) => {
    const old = await lockOauthTokenByRefreshDigest(tx, digest);
    if (!old || !safeEqual(old.refresh_token_digest ?? '', digest) || old.application_id !== app.id) {
      throw new OAuthError('invalid_grant');
    }
    if (old.revoked_at !== null) {
      await revokeOauthTokenFamily(tx, old.family, now);
      return 'replayed' as const;
    }
    const scopes = resolveScopes(app, input.scope, old.scopes);
    const user = await activeUser(tx, old.user_id);
    if (!user) throw new OAuthError('invalid_grant');
    await revokeOauthToken(tx, old.id, now);
    return mintToken(tx, now, {
      applicationId: app.id,
      userId: user.id,
      scopes,
      family: old.family,
      previousId: old.id,
    });
  });
  if (outcome === 'replayed') throw new OAuthError('invalid_grant');
  return outcome;
}

/**
 * The resource owner password credentials grant, for any application that authenticated (GitLab
 * since 15.0: no per-application opt-in; the instance may turn the grant off, which the token
 * endpoint checks first). Unknown users, wrong passwords, users with two-factor authentication,
 * blocked and locked users all get `invalid_grant`.
 */
export async function passwordGrant(
  deps: Deps,
  app: OauthApplication,
  input: { username: string; password: string; scope?: string },
): Promise<IssuedToken> {
  const scopes = resolveScopes(app, input.scope);
  const user = input.username.includes('@')
    ? await findUserByEmail(deps.db, input.username)
    : await findUserByIdOrUsername(deps.db, input.username);
  // GitLab's resource_owner_from_credentials: users with two-factor authentication are refused
  // before the password is looked at; wrong passwords count towards the lockout, and a locked
  // account is refused whatever the password (find_with_user_password, increment_failed_attempts: true).
  if (user?.two_factor_enabled) throw new OAuthError('invalid_grant');
  const checked = await checkUserPassword(deps, user, input.password);
  if (!checked.ok) throw new OAuthError('invalid_grant');
  return mintToken(deps.db, deps.clock.now(), { applicationId: app.id, userId: checked.user.id, scopes });
}

/** Looks a token up as an access token, then as a refresh token (or the other way round). */
async function findAnyToken(deps: Deps, presented: string, hint?: string) {
  const digest = digestToken(presented);
  const byAccess = async () => {
    const row = await findOauthTokenByDigest(deps.db, digest);
    return row && safeEqual(row.token_digest, digest) ? { row, kind: 'access' as const } : undefined;
  };
  const byRefresh = async () => {
    const row = await findOauthTokenByRefreshDigest(deps.db, digest);
    return row && safeEqual(row.refresh_token_digest ?? '', digest) ? { row, kind: 'refresh' as const } : undefined;
  };
  return hint === 'refresh_token' ? ((await byRefresh()) ?? byAccess()) : ((await byAccess()) ?? byRefresh());
}

/**
 * RFC 7009 revocation: revoking either token of a pair revokes the pair. Unknown tokens are
 * not an error; another application's token is refused.
 */
export async function revokeTokenForClient(
  deps: Deps,
  app: OauthApplication,
  presented: string,
  hint?: string,
): Promise<void> {
  const found = await findAnyToken(deps, presented, hint);
  if (!found) return;
  if (found.row.application_id !== app.id) {
    throw new OAuthError('unauthorized_client', 'You are not authorized to revoke this token', 403);
  }
  await revokeOauthToken(deps.db, found.row.id, deps.clock.now());
}

/** RFC 7662 introspection: active tokens of the calling application only. */
export async function introspectToken(
  deps: Deps,
  app: OauthApplication,
  presented: string,
  hint?: string,
): Promise<Record<string, unknown>> {
  const found = await findAnyToken(deps, presented, hint);
  const now = deps.clock.now();
  if (!found || found.row.application_id !== app.id || found.row.revoked_at !== null) return { active: false };
  if (found.kind === 'access' && isTokenExpired(found.row, now)) return { active: false };
  const user = await activeUser(deps.db, found.row.user_id);
  if (!user) return { active: false };
  const iat = Math.floor(found.row.created_at.getTime() / 1000);
  return {
    active: true,
    scope: found.row.scopes.join(' '),
    client_id: app.uid,
    username: user.username,
    sub: String(user.id),
    token_type: found.kind === 'access' ? 'Bearer' : 'refresh_token',
    iat,
    ...(found.kind === 'access' ? { exp: iat + found.row.expires_in } : {}),
  };
}
