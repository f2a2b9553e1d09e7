import { randomBytes } from 'node:crypto';
import {
  deleteExpiredWebSessions,
  deleteWebSession,
  findWebSessionByDigest,
  insertWebSession,
  setWebSessionReturnTo,
} from '../db/queries/oauth.js';
import { findUserById } from '../db/queries/users.js';
import type { User, WebSession } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { digestToken, safeEqual } from '../lib/crypto.js';
import { getApplicationSettings } from '../services/application-settings.js';
import type { Deps } from '../services/deps.js';

/** An anonymous session (sign-in form, CSRF) lasts an hour. */
export const ANONYMOUS_SESSION_TTL_SECONDS = 60 * 60;
/**
 * How long a signed-in session lasts when `session_expire_delay` is 0: GitLab then keeps the
 * cookie for the browser session only; Depot's cookie has no Max-Age and the server forgets the
 * session after a day.
 */
export const BROWSER_SESSION_TTL_SECONDS = 24 * 60 * 60;

/**
 * A signed-in session's lifetime in seconds from `session_expire_delay` (minutes, GitLab's
 * default a week), read now: a shorter delay also ends sessions signed in before the change.
 */
async function signedInTtlSeconds(deps: Deps): Promise<{ seconds: number; browserOnly: boolean }> {
  const minutes = Number((await getApplicationSettings(deps)).values.session_expire_delay ?? 0);
  if (!Number.isFinite(minutes) || minutes <= 0) return { seconds: BROWSER_SESSION_TTL_SECONDS, browserOnly: true };
  return { seconds: minutes * 60, browserOnly: false };
}

/** The session cookie: `__Host-` prefixed and Secure when Depot is served over https. */
function cookieName(ctx: AppContext): string {
  return isHttps(ctx) ? '__Host-depot_session' : 'depot_session';
}

const isHttps = (ctx: AppContext) => ctx.state.deps.config.baseUrl.startsWith('https:');

function readCookie(ctx: AppContext, name: string): string | undefined {
  for (const part of ctx.get('Cookie').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Sets the session cookie; `maxAgeSeconds` null makes it last as long as the browser session. */
function setCookie(ctx: AppContext, value: string, maxAgeSeconds: number | null): void {
  const attributes = [`${cookieName(ctx)}=${value}`, 'Path=/'];
  if (maxAgeSeconds !== null) attributes.push(`Max-Age=${maxAgeSeconds}`);
  attributes.push('HttpOnly', 'SameSite=Lax');
  if (isHttps(ctx)) attributes.push('Secure');
  ctx.append('Set-Cookie', attributes.join('; '));
}

export interface BrowserSession {
  session: WebSession;
  user: User | null;
}

const cache = new WeakMap<AppContext, BrowserSession | null>();

/** The browser's current session, if its cookie names a live one (and its user is still active). */
export async function currentSession(ctx: AppContext): Promise<BrowserSession | null> {
  if (cache.has(ctx)) return cache.get(ctx) ?? null;
  const deps = ctx.state.deps;
  const value = readCookie(ctx, cookieName(ctx));
  let found: BrowserSession | null = null;
  if (value && /^[A-Za-z0-9_-]{43}$/.test(value)) {
    const digest = digestToken(value);
    const session = await findWebSessionByDigest(deps.db, digest, deps.clock.now());
    if (session && safeEqual(session.session_digest, digest) && (await withinExpireDelay(deps, session))) {
      const user = session.user_id === null ? null : ((await findUserById(deps.db, session.user_id)) ?? null);
      found = { session, user: user && user.state === 'active' ? user : null };
    }
  }
  cache.set(ctx, found);
  return found;
}

/** A signed-in session is still within the current `session_expire_delay` of its sign-in. */
async function withinExpireDelay(deps: Deps, session: WebSession): Promise<boolean> {
  if (session.user_id === null) return true;
  const { seconds } = await signedInTtlSeconds(deps);
  return session.created_at.getTime() + seconds * 1000 > deps.clock.now().getTime();
}

async function createSession(ctx: AppContext, user: User | null, returnTo: string | null): Promise<BrowserSession> {
  const deps = ctx.state.deps;
  const now = deps.clock.now();
  const signedIn = user ? await signedInTtlSeconds(deps) : null;
  const ttl = signedIn ? signedIn.seconds : ANONYMOUS_SESSION_TTL_SECONDS;
  await deleteExpiredWebSessions(deps.db, now);
  const value = randomBytes(32).toString('base64url');
  const session = await insertWebSession(deps.db, {
    session_digest: digestToken(value),
    user_id: user?.id ?? null,
    csrf_token: randomBytes(32).toString('base64url'),
    return_to: returnTo,
    expires_at: new Date(now.getTime() + ttl * 1000),
    created_at: now,
  });
  setCookie(ctx, value, signedIn?.browserOnly ? null : ttl);
  const browser = { session, user };
  cache.set(ctx, browser);
  return browser;
}

/** The current session, or a new anonymous one (every form needs a CSRF token bound to a session). */
export async function ensureSession(ctx: AppContext): Promise<BrowserSession> {
  return (await currentSession(ctx)) ?? createSession(ctx, null, null);
}

/** Signs `user` in with a fresh session id (no session fixation), dropping the old session. */
export async function signIn(ctx: AppContext, user: User): Promise<BrowserSession> {
  const old = await currentSession(ctx);
  if (old) await deleteWebSession(ctx.state.deps.db, old.session.id);
  return createSession(ctx, user, null);
}

export async function signOut(ctx: AppContext): Promise<void> {
  const old = await currentSession(ctx);
  if (old) await deleteWebSession(ctx.state.deps.db, old.session.id);
  setCookie(ctx, '', 0);
  cache.set(ctx, null);
}

/** Remembers where to go after signing in. */
export async function rememberReturnTo(ctx: AppContext, path: string): Promise<void> {
  const browser = await ensureSession(ctx);
  await setWebSessionReturnTo(ctx.state.deps.db, browser.session.id, path);
}

/** A local path to return to: `/…` but never `//host` or `/\host`, which browsers treat as another site. */
export function safeReturnPath(value: string | null | undefined): string | null {
  if (!value?.startsWith('/') || value.startsWith('//') || value.startsWith('/\\')) return null;
  for (let i = 0; i < value.length; i++) if (value.charCodeAt(i) < 0x20 || value.charCodeAt(i) === 0x7f) return null;
  return value;
}

/** True when the form's `authenticity_token` is the session's CSRF token (constant-time). */
export function validCsrf(browser: BrowserSession | null, token: unknown): boolean {
  return browser !== null && typeof token === 'string' && safeEqual(browser.session.csrf_token, token);
}
