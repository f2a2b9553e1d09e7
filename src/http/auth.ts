import { type Actor, type Credentials, resolveActor, type ScopeRule } from '../services/auth.js';
import type { AppContext } from './context.js';
import { unauthorized } from './errors.js';
import type { Params } from './params.js';

/** A parameter's value when it is a non-blank string (Rails' `.presence`); the last one of a list. */
const presentString = (value: unknown): string | undefined => {
  const v = Array.isArray(value) ? value[value.length - 1] : value;
  return typeof v === 'string' && v.trim() !== '' ? v : undefined;
};

/** `Authorization: Bearer <token>` (scheme case-insensitive, as Doorkeeper reads it). */
const BEARER = /^Bearer\s+(.*)$/is;

/**
 * A bearer token where GitLab's Doorkeeper looks for one (its `access_token_methods`): the
 * `access_token` parameter, then `Authorization: Bearer`, then the `bearer_token` parameter.
 */
export function readBearer(ctx: AppContext, params: Params): string | undefined {
  return (
    presentString(params.access_token) ??
    presentString(BEARER.exec(ctx.get('Authorization'))?.[1]?.trim()) ??
    presentString(params.bearer_token)
  );
}

/**
 * Reads the credentials GitLab accepts on /api/v4 (DESIGN.md "Authentication"): personal access
 * tokens from the `private_token` parameter, then the `PRIVATE-TOKEN` header, then a bearer
 * token (readBearer); `sudo` parameter before `Sudo` header.
 */
export function readCredentials(ctx: AppContext, params: Params): Credentials {
  const credentials: Credentials = {};
  const bearer = readBearer(ctx, params);
  if (bearer !== undefined) credentials.bearer = bearer;
  const privateToken = presentString(params.private_token) ?? presentString(ctx.get('PRIVATE-TOKEN').trim());
  if (privateToken !== undefined) credentials.privateToken = privateToken;
  const sudo = presentString(params.sudo) ?? presentString(ctx.get('Sudo').trim());
  if (sudo !== undefined) credentials.sudo = sudo;
  return credentials;
}

/** The authentication step of every API route. */
export async function authenticate(
  ctx: AppContext,
  params: Params,
  rules: readonly ScopeRule[],
  mode: 'optional' | 'required',
): Promise<Actor> {
  const actor = await resolveActor(ctx.state.deps, readCredentials(ctx, params), rules, ctx.method);
  if (mode === 'required' && !actor.user) throw unauthorized();
  return actor;
}
