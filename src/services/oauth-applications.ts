import { randomBytes } from 'node:crypto';
import type { OauthHttpRedirectUris } from '../config.js';
import { deleteOauthApplication, findOauthApplicationByUid, insertOauthApplication } from '../db/queries/oauth.js';
import type { OauthApplication, User } from '../db/schema.js';
import { digestToken, generateToken, safeEqual } from '../lib/crypto.js';
import type { Deps } from './deps.js';
import { Validation } from './errors.js';

/** Prefix of application secrets, as GitLab's. */
export const APP_SECRET_PREFIX = 'gloas-';

/** Scopes an application may be registered with (and a token may carry). */
export const OAUTH_SCOPES = [
  'api',
  'read_api',
  'read_user',
  'read_repository',
  'write_repository',
  'profile',
  'openid',
  'email',
] as const;

/** What each scope lets an application do, for the consent and registration pages. */
export const SCOPE_DESCRIPTIONS: Record<string, string> = {
  api: 'Full read and write access to the API, including all groups and projects.',
  read_api: 'Read access to the API, including all groups and projects.',
  read_user: 'Read your personal information: username, public email and full name.',
  read_repository: 'Read (pull) the repositories you can access.',
  write_repository: 'Read and write (pull and push) the repositories you can access.',
  profile: 'Read your profile data (OpenID Connect).',
  openid: 'Sign you in with your Depot account (OpenID Connect).',
  email: 'Read your primary email address (OpenID Connect).',
};

/** Schemes refused in redirect URIs whatever their case (GitLab's `forbid_redirect_uri`). */
const FORBIDDEN_SCHEMES = new Set(['javascript:', 'data:', 'vbscript:']);

/** The registered redirect URIs of an application (one per line, as GitLab stores them). */
export const redirectUris = (app: Pick<OauthApplication, 'redirect_uri'>) =>
  app.redirect_uri.split(/\s+/).filter((u) => u !== '');

/** Hosts of plain-http redirect URIs accepted when OAUTH_HTTP_REDIRECT_URIS is `loopback`. */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** Doorkeeper's messages for one redirect URI, or null when it may be registered. */
function redirectUriError(uri: string, httpRedirectUris: OauthHttpRedirectUris): string | null {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(uri)?.[1];
  if (scheme && FORBIDDEN_SCHEMES.has(`${scheme.toLowerCase()}:`)) return 'is forbidden by the server.';
  if (!scheme) return 'must be an absolute URI.';
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'must be a valid URI.';
  }
  // `localhost:3000/cb` parses as scheme `localhost` with an opaque body: not a redirect URI.
  if (uri.charAt(scheme.length + 1) !== '/') return 'must be a valid URI.';
  if (uri.includes('#')) return 'cannot contain a fragment.';
  if ((url.protocol === 'http:' || url.protocol === 'https:') && url.hostname === '') return 'must be a valid URI.';
  // Doorkeeper's `secured_uri` error, for the http callbacks of anything but a native app on
  // this machine (RFC 9700 §2.6).
  if (httpRedirectUris === 'loopback' && url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname)) {
    return 'must be an HTTPS/SSL URI.';
  }
  return null;
}

export interface ApplicationInput {
  name: string;
  /** One or more URIs separated by whitespace or newlines. */
  redirectUri: string;
  scopes: string[];
  confidential: boolean;
}

/**
 * Registers an application; the secret is returned once and only its digest is kept. Model
 * validation failures answer GitLab's 400 `{"message": {"field": [...]}}`.
 */
export async function createOauthApplication(
  deps: Deps,
  owner: User | null,
  input: ApplicationInput,
): Promise<{ application: OauthApplication; secret: string }> {
  const v = new Validation();
  const name = input.name.trim();
  if (name === '') v.add('name', "can't be blank");
  else if (name.length > 255) v.add('name', 'is too long (maximum is 255 characters)');
  const uris = input.redirectUri.split(/\s+/).filter((u) => u !== '');
  if (uris.length === 0) v.add('redirect_uri', "can't be blank");
  for (const uri of uris) {
    const error = redirectUriError(uri, deps.config.oauthHttpRedirectUris);
    if (error) {
      v.add('redirect_uri', error);
      break;
    }
  }
  const scopes = [...new Set(input.scopes)];
  if (scopes.length === 0) v.add('scopes', "can't be blank");
  else if (!scopes.every((s) => (OAUTH_SCOPES as readonly string[]).includes(s))) {
    v.add('scopes', "doesn't match configured on the server.");
  }
  v.throwIfAny();
  const secret = generateToken(APP_SECRET_PREFIX, 32);
  const now = deps.clock.now();
  const application = await insertOauthApplication(deps.db, {
    uid: randomBytes(32).toString('hex'),
    secret_digest: digestToken(secret),
    name,
    redirect_uri: uris.join('\n'),
    scopes: JSON.stringify(scopes),
    confidential: input.confidential,
    owner_id: owner?.id ?? null,
    created_at: now,
    updated_at: now,
  });
  return { application, secret };
}

export async function deleteApplication(deps: Deps, id: number, owner?: User): Promise<boolean> {
  return deleteOauthApplication(deps.db, id, owner?.id);
}

export function findApplicationByClientId(deps: Deps, clientId: string): Promise<OauthApplication | undefined> {
  return findOauthApplicationByUid(deps.db, clientId);
}

/** Compares a presented client secret with the stored digest in constant time. */
export function secretMatches(app: OauthApplication, secret: string): boolean {
  return safeEqual(app.secret_digest, digestToken(secret));
}

const LOOPBACK = /^http:\/\/(127\.0\.0\.1|\[::1\])(?::(\d{1,5}))?([/?].*)?$/;

/**
 * Whether `requested` is one of the application's redirect URIs: exact string equality, except
 * that the port of a loopback IP literal may differ (RFC 8252 §7.3; `localhost` is not loopback).
 */
export function matchesRedirectUri(app: Pick<OauthApplication, 'redirect_uri'>, requested: string): boolean {
  const loop = LOOPBACK.exec(requested);
  return redirectUris(app).some((registered) => {
    if (registered === requested) return true;
    const reg = LOOPBACK.exec(registered);
    return loop !== null && reg !== null && reg[1] === loop[1] && (reg[3] ?? '') === (loop[3] ?? '');
  });
}
