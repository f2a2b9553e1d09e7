import Router from '@koa/router';
import type { Middleware } from 'koa';
import { findOauthApplicationById } from '../db/queries/oauth.js';
import { readBearer } from '../http/auth.js';
import type { AppContext, AppState } from '../http/context.js';
import { checkRateLimit, type RateLimit } from '../http/rate-limit.js';
import { readLimited } from '../lib/streams.js';
import { presentTokenInfo, presentTokenResponse } from '../presenters/oauth-token.js';
import { passwordGrantEnabled } from '../services/application-settings.js';
import type { Deps } from '../services/deps.js';
import {
  authenticateClient,
  type ClientCredentials,
  exchangeCode,
  findActiveAccessToken,
  type IssuedToken,
  introspectToken,
  missingParameter,
  OAUTH_DESCRIPTIONS,
  OAuthError,
  passwordGrant,
  type RequestParams,
  refreshAccessToken,
  repeatedParameter,
  revokeTokenForClient,
  secondsLeft,
} from '../services/oauth.js';
import { OAUTH_SCOPES } from '../services/oauth-applications.js';

/** Largest body the OAuth endpoints read. */
const MAX_BODY_BYTES = 64 * 1024;

/**
 * Brute-force limits on password sign-ins (the password grant and the sign-in page share them):
 * per login name and per client address, GitLab's application-limit answer when exceeded.
 */
export const SIGN_IN_RATE_LIMIT: RateLimit = {
  name: 'user_sign_in',
  threshold: 10,
  periodSeconds: 60,
  message: 'This endpoint has been requested too many times. Try again later.',
};
export const SIGN_IN_IP_RATE_LIMIT: RateLimit = { ...SIGN_IN_RATE_LIMIT, name: 'user_sign_in_ip', threshold: 50 };

/** Counts one password attempt for `login` from this client against both limits (429 when over). */
export async function limitSignIn(ctx: AppContext, login: string): Promise<void> {
  await checkRateLimit(ctx, SIGN_IN_RATE_LIMIT, [login.trim().toLowerCase()]);
  await checkRateLimit(ctx, SIGN_IN_IP_RATE_LIMIT, [ctx.ip]);
}

/** Reads an urlencoded or JSON body into every value of each name. */
async function readBody(ctx: AppContext): Promise<RequestParams> {
  const params: RequestParams = new Map();
  const body = await readLimited(
    ctx.req,
    MAX_BODY_BYTES,
    () => new OAuthError('invalid_request', 'The request body is too large.'),
  );
  const text = body.toString('utf8');
  if (text.trim() === '') return params;
  const add = (name: string, value: string) => params.set(name, [...(params.get(name) ?? []), value]);
  if (ctx.is('json')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new OAuthError('invalid_request', 'The request body could not be parsed.');
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new OAuthError('invalid_request', 'The request body could not be parsed.');
    }
    for (const [name, value] of Object.entries(parsed)) {
      for (const v of Array.isArray(value) ? value : [value]) {
        if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') add(name, String(v));
      }
    }
    return params;
  }
  if (!ctx.is('application/x-www-form-urlencoded')) {
    throw new OAuthError('invalid_request', 'The request body must be application/x-www-form-urlencoded.');
  }
  for (const [name, value] of new URLSearchParams(text)) add(name, value);
  return params;
}

/** The single value of a parameter; repeated parameters are invalid (RFC 6749 §3.2). */
function param(params: RequestParams, name: string): string | undefined {
  const values = params.get(name);
  if (!values || values.length === 0) return undefined;
  if (values.length > 1) throw repeatedParameter(name);
  return values[0] === '' ? undefined : values[0];
}

function required(params: RequestParams, name: string): string {
  const value = param(params, name);
  if (value === undefined) throw missingParameter(name);
  return value;
}

/** `application/x-www-form-urlencoded` decoding of one Basic credential part (RFC 6749 §2.3.1). */
function formDecode(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    throw new OAuthError('invalid_client');
  }
}

interface ClientAuth extends ClientCredentials {
  /** The client used HTTP Basic (its 401 then carries a Basic challenge). */
  basic: boolean;
  /** Any client credentials at all were sent. */
  any: boolean;
}

/**
 * Client credentials from `Authorization: Basic` or the body, never from the URL query and never
 * two methods at once (RFC 6749 §2.3.1).
 */
function readClientAuth(ctx: AppContext, params: RequestParams): ClientAuth {
  const query = new URLSearchParams(ctx.querystring);
  if (query.has('client_secret')) {
    throw new OAuthError('invalid_request', 'Client credentials must not be sent in the URL query.');
  }
  const bodyId = param(params, 'client_id');
  const bodySecret = param(params, 'client_secret');
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(ctx.get('Authorization'));
  if (match) {
    if (bodySecret !== undefined) {
      throw new OAuthError(
        'invalid_request',
        'The request utilizes more than one mechanism for authenticating the client.',
      );
    }
    const decoded = Buffer.from(match[1] as string, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw new OAuthError('invalid_client');
    const clientId = formDecode(decoded.slice(0, colon));
    if (bodyId !== undefined && bodyId !== clientId) throw new OAuthError('invalid_client');
    return { clientId, clientSecret: formDecode(decoded.slice(colon + 1)), basic: true, any: true };
  }
  return { clientId: bodyId, clientSecret: bodySecret, basic: false, any: bodyId !== undefined };
}

/** RFC 6750 §3: only these characters may appear in a challenge's quoted values. */
const challengeText = (text: string) => text.replace(/[^\x20-\x21\x23-\x5B\x5D-\x7E]/g, '_');

function noStore(ctx: AppContext): void {
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Pragma', 'no-cache');
}

/** RFC 6749 §5.2: JSON `error` and `error_description`, never `state`; a challenge with 401. */
function sendError(ctx: AppContext, error: OAuthError, basic = false): void {
  noStore(ctx);
  ctx.status = error.status;
  ctx.body = { error: error.code, error_description: error.description };
  // RFC 6749 §5.2 asks for a challenge with 401 only. Doorkeeper sends one with every error, but
  // standard clients (oauth4webapi) then report a 400 as an authentication challenge, not as its error.
  if (error.status !== 401) return;
  const challenge =
    basic && error.code === 'invalid_client'
      ? 'Basic realm="Depot"'
      : `Bearer realm="Depot", error="${error.code}", error_description="${challengeText(error.description)}"`;
  ctx.set('WWW-Authenticate', challenge);
}

/** Runs an OAuth endpoint: OAuthErrors become RFC 6749 error responses; anything else propagates. */
function endpoint(handler: (ctx: AppContext, state: { basic: boolean }) => Promise<void>): Middleware<AppState> {
  return async (ctx) => {
    const state = { basic: false };
    try {
      await handler(ctx as AppContext, state);
    } catch (error) {
      if (!(error instanceof OAuthError)) {
        // A rate limit's 429 (GitLab's body) is no more cacheable than any other answer here.
        noStore(ctx as AppContext);
        throw error;
      }
      sendError(ctx as AppContext, error, state.basic);
    }
  };
}

async function tokenGrant(ctx: AppContext, state: { basic: boolean }): Promise<IssuedToken> {
  const deps = ctx.state.deps;
  const params = await readBody(ctx);
  for (const [name, values] of params) if (values.length > 1) throw repeatedParameter(name);
  const grantType = required(params, 'grant_type');
  const auth = readClientAuth(ctx, params);
  state.basic = auth.basic;
  switch (grantType) {
    case 'authorization_code': {
      const code = required(params, 'code');
      const redirectUri = required(params, 'redirect_uri');
      const app = await authenticateClient(deps, auth);
      return exchangeCode(deps, app, { code, redirectUri, codeVerifier: param(params, 'code_verifier') });
    }
    case 'refresh_token': {
      const refreshToken = required(params, 'refresh_token');
      const app = await authenticateClient(deps, auth);
      return refreshAccessToken(deps, app, { refreshToken, scope: params.get('scope')?.[0] });
    }
    case 'password': {
      // Turned off, the grant is not offered at all, as Doorkeeper answers a flow it lacks.
      if (!(await passwordGrantEnabled(deps))) throw new OAuthError('unsupported_grant_type');
      const username = required(params, 'username');
      const password = required(params, 'password');
      const app = await authenticateClient(deps, auth);
      await limitSignIn(ctx, username);
      return passwordGrant(deps, app, { username, password, scope: params.get('scope')?.[0] });
    }
    default:
      // The implicit grant, client credentials and device flows are not offered.
      throw new OAuthError('unsupported_grant_type');
  }
}

/** Server metadata (RFC 8414), so clients can discover the endpoints and PKCE support. */
async function metadata(deps: Deps) {
  const base = deps.config.baseUrl;
  return {
    issuer: base,
    authorization_endpoint: `${base}/oauth/authorize`,
    token_endpoint: `${base}/oauth/token`,
    revocation_endpoint: `${base}/oauth/revoke`,
    introspection_endpoint: `${base}/oauth/introspect`,
    scopes_supported: [...OAUTH_SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: [
      'authorization_code',
      'refresh_token',
      ...((await passwordGrantEnabled(deps)) ? ['password'] : []),
    ],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    authorization_response_iss_parameter_supported: true,
  };
}

/** The OAuth 2.0 endpoints outside /api/v4: token, revocation, introspection, token info, metadata. */
export function oauthRoutes(): Middleware<AppState> {
  const router = new Router<AppState>();

  router.post(
    '/oauth/token',
    endpoint(async (ctx, state) => {
      const issued = await tokenGrant(ctx, state);
      noStore(ctx);
      ctx.body = presentTokenResponse(issued);
    }),
  );

  router.post(
    '/oauth/revoke',
    endpoint(async (ctx, state) => {
      const deps = ctx.state.deps;
      const params = await readBody(ctx);
      const auth = readClientAuth(ctx, params);
      state.basic = auth.basic;
      if (!auth.any) throw new OAuthError('unauthorized_client', 'You are not authorized to revoke this token', 403);
      const app = await authenticateClient(deps, auth);
      const token = required(params, 'token');
      await revokeTokenForClient(deps, app, token, param(params, 'token_type_hint'));
      noStore(ctx);
      ctx.body = {};
    }),
  );

  router.post(
    '/oauth/introspect',
    endpoint(async (ctx, state) => {
      const deps = ctx.state.deps;
      const params = await readBody(ctx);
      const auth = readClientAuth(ctx, params);
      state.basic = auth.basic;
      // Only confidential clients, which can prove who they are (RFC 7662 §2.1).
      const app = await authenticateClient(deps, auth, { requireSecret: true });
      const token = required(params, 'token');
      noStore(ctx);
      ctx.body = await introspectToken(deps, app, token, param(params, 'token_type_hint'));
    }),
  );

  router.get(
    '/oauth/token/info',
    endpoint(async (ctx) => {
      const deps = ctx.state.deps;
      const presented = readBearer(ctx, Object.fromEntries(new URLSearchParams(ctx.querystring)));
      const token = presented ? await findActiveAccessToken(deps, presented) : undefined;
      const app = token ? await findOauthApplicationById(deps.db, token.application_id) : undefined;
      if (!token || !app) throw new OAuthError('invalid_token', OAUTH_DESCRIPTIONS.invalid_token);
      noStore(ctx);
      ctx.body = presentTokenInfo(token, app, secondsLeft(token, deps.clock.now()));
    }),
  );

  router.get('/.well-known/oauth-authorization-server', async (ctx) => {
    ctx.body = await metadata(ctx.state.deps);
  });

  return router.routes() as Middleware<AppState>;
}
