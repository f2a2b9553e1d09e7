import { z } from 'zod';
import {
  countPersonalAccessTokens,
  findPersonalAccessTokenById,
  listPersonalAccessTokens,
  type TokenFilter,
} from '../db/queries/tokens.js';
import { badRequest, notFound, recordNotFound, unauthorized } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { toDbId } from '../lib/ids.js';
import { presentPersonalAccessToken } from '../presenters/token.js';
import { today } from '../services/deps.js';
import { revokeToken } from '../services/tokens.js';
import { currentUser, noContent } from './helpers.js';

const listParams = z.object({
  user_id: p.id().optional(),
  revoked: p.bool().optional(),
  state: p.enum(['active', 'inactive']).optional(),
  search: p.string().optional(),
  created_after: p.datetime().optional(),
  created_before: p.datetime().optional(),
  last_used_after: p.datetime().optional(),
  last_used_before: p.datetime().optional(),
  ...pagination(),
});

const idParams = z.object({ id: p.string() });

export function registerTokenRoutes(api: ApiRouter): void {
  api.get(
    '/personal_access_tokens',
    { summary: 'List personal access tokens', auth: 'required', params: listParams },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const deps = ctx.state.deps;
      const filter: TokenFilter = {
        today: today(deps),
        userId: user.admin ? params.user_id : user.id,
        revoked: params.revoked,
        state: params.state,
        search: params.search,
        createdAfter: params.created_after,
        createdBefore: params.created_before,
        lastUsedAfter: params.last_used_after,
        lastUsedBefore: params.last_used_before,
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
    { summary: 'The token used for this request', auth: 'required' },
    async (ctx) => {
      const token = ctx.state.actor.token;
      const row =
        token?.kind === 'personal_access_token'
          ? await findPersonalAccessTokenById(ctx.state.deps.db, token.id)
          : undefined;
      if (!row) throw notFound();
      ctx.body = presentPersonalAccessToken(row, today(ctx.state.deps));
    },
  );

  api.delete(
    '/personal_access_tokens/self',
    { summary: 'Revoke the token used for this request', auth: 'required' },
    async (ctx) => {
      const token = ctx.state.actor.token;
      const row =
        token?.kind === 'personal_access_token'
          ? await findPersonalAccessTokenById(ctx.state.deps.db, token.id)
          : undefined;
      if (!row) throw badRequest();
      await revokeToken(ctx.state.deps, row);
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
