import { type Actor, type Credentials, resolveActor, type ScopeRule } from '../services/auth.js';
import type { AppContext } from './context.js';
import { unauthorized } from './errors.js';
import type { Params } from './params.js';

const firstString = (value: unknown): string | undefined => {
  const v = Array.isArray(value) ? value[value.length - 1] : value;
  return typeof v === 'string' && v !== '' ? v : undefined;
};

/** Reads the credentials GitLab accepts on /api/v4 (DESIGN.md "Authentication"). */
export function readCredentials(ctx: AppContext, params: Params): Credentials {
  const credentials: Credentials = {};
  const authorization = ctx.get('Authorization');
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] ?? firstString(params.access_token);
  if (bearer !== undefined) credentials.bearer = bearer;
  const privateToken = firstString(params.private_token) ?? (ctx.get('PRIVATE-TOKEN').trim() || undefined);
  if (privateToken !== undefined) credentials.privateToken = privateToken;
  const sudo = ctx.get('Sudo').trim() || firstString(params.sudo);
  if (sudo) credentials.sudo = sudo;
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
