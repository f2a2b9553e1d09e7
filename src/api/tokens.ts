import { z } from 'zod';
import {
  countPersonalAccessTokens,
  findPersonalAccessTokenById,
  listPersonalAccessTokens,
  TOKEN_SORTS,
  type TokenFilter,
  type TokenSort,
} from '../db/queries/tokens.js';
import { findUserById } from '../db/queries/users.js';
import type { PersonalAccessToken } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { badRequest, notFound, recordNotFound, unauthorized } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { toDbId } from '../lib/ids.js';
import { presentPersonalAccessToken } from '../presenters/token.js';
import type { ScopeRule } from '../services/auth.js';
import { today } from '../services/deps.js';
import { PAT_SCOPES, revokeToken } from '../services/tokens.js';
import { currentUser, noContent } from './helpers.js';

const listParams = z.object({
  user_id: p.int().optional(),
  revoked: p.bool().optional(),
  state: p.enum(['active', 'inactive']).optional(),
  search: p.string().optional(),
  created_after: p.datetime().optional(),
  created_before: p.datetime().optional(),
  last_used_after: p.datetime().optional(),
  last_used_before: p.datetime().optional(),
  expires_after: p.date().optional(),
  expires_before: p.date().optional(),
  sort: p.string().optional(),
  ...pagination(),
});

const idParams = z.object({ id: p.string() });

/** Any token may read or revoke itself, whatever its scopes (GitLab's SelfInformation API). */
const ANY_SCOPE: ScopeRule[] = PAT_SCOPES.map((scope) => ({ scope }));

const isTokenSort = (value: string | undefined): value is TokenSort =>
  value !== undefined && (TOKEN_SORTS as readonly string[]).includes(value);

/** The personal access token that authenticated this request, or GitLab's 400 for other credentials. */
async function requestToken(ctx: AppContext): Promise<PersonalAccessToken> {
  const token = ctx.state.actor.token;
  const row =
    token?.kind === 'personal_access_token'
      ? await findPersonalAccessTokenById(ctx.state.deps.db, token.id)
      : undefined;
  if (!row) throw badRequest('This endpoint requires token type to be a personal access token');
  return row;
}

export function registerTokenRoutes(api: ApiRouter): void {
  api.get(
    '/personal_access_tokens',
    { summary: 'List personal access tokens', auth: 'required', params: listParams },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const deps = ctx.state.deps;
      let userId: number | undefined;
      if (user.admin) {
        if (params.user_id !== undefined) {
          const id = toDbId(params.user_id);
          const owner = id === null ? undefined : await findUserById(deps.db, id);
          if (!owner) throw notFound();
          userId = owner.id;
        }
      } else {
        // Non-administrators may only name themselves (GitLab's restrict_non_admins!).
        if (params.user_id !== undefined && params.user_id !== user.id) throw unauthorized();
        userId = user.id;
      }
      const filter: TokenFilter = {
        today: today(deps),
        userId,
        withoutImpersonation: !user.admin,
        revoked: params.revoked,
        state: params.state,
        search: params.search,
        createdAfter: params.created_after,
        createdBefore: params.created_before,
        lastUsedAfter: params.last_used_after,
        lastUsedBefore: params.last_used_before,
        expiresAfter: params.expires_after,
        expiresBefore: params.expires_before,
        sort: isTokenSort(params.sort) ? params.sort : undefined,
      };
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listPersonalAccessTokens(deps.db, filter, w),
        (cap) => countPersonalAccessTokens(deps.db, filter, cap),
      );
      ctx.body = rows.map((t) => presentPersonalAccessToken(t, filter.today));
    },
  );

  api.get(
    '/personal_access_tokens/self',
    { summary: 'The token used for this request', auth: 'required', scopes: ANY_SCOPE },
    async (ctx) => {
      ctx.body = presentPersonalAccessToken(await requestToken(ctx), today(ctx.state.deps));
    },
  );

  api.delete(
    '/personal_access_tokens/self',
    { summary: 'Revoke the token used for this request', auth: 'required', scopes: ANY_SCOPE },
    async (ctx) => {
      await revokeToken(ctx.state.deps, await requestToken(ctx));
      noContent(ctx);
    },
  );

  api.get(
    '/personal_access_tokens/:id',
    { summary: 'A personal access token', auth: 'required', params: idParams },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const id = toDbId(params.id);
      const row = id === null ? undefined : await findPersonalAccessTokenById(ctx.state.deps.db, id);
      // Only administrators learn whether someone else's token exists (GitLab does the same).
      if (!row || (!user.admin && row.user_id !== user.id)) throw user.admin ? notFound() : unauthorized();
      ctx.body = presentPersonalAccessToken(row, today(ctx.state.deps));
    },
  );

  api.delete(
    '/personal_access_tokens/:id',
    { summary: 'Revoke a personal access token', auth: 'required', params: idParams },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const id = toDbId(params.id);
      const row = id === null ? undefined : await findPersonalAccessTokenById(ctx.state.deps.db, id);
      if (!row) throw recordNotFound();
      if (!user.admin && row.user_id !== user.id) throw badRequest();
      await revokeToken(ctx.state.deps, row);
      noContent(ctx);
    },
  );
}
