import { z } from 'zod';
import { countMemberships, listMemberships } from '../db/queries/memberships.js';
import { findUserNamespace } from '../db/queries/namespaces.js';
import {
  countPersonalAccessTokens,
  findPersonalAccessTokenById,
  listPersonalAccessTokens,
  type TokenFilter,
} from '../db/queries/tokens.js';
import type { PersonalAccessToken, User } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, notFound } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { toDbId } from '../lib/ids.js';
import { presentMembership } from '../presenters/membership.js';
import { presentImpersonationToken, presentImpersonationTokenWithToken } from '../presenters/token.js';
import { today } from '../services/deps.js';
import { createImpersonationToken, revokeToken } from '../services/tokens.js';
import {
  activateUser,
  approveUser,
  banUser,
  blockUser,
  deactivateUser,
  rejectUser,
  scheduleUserDeletion,
  unblockUser,
} from '../services/user-lifecycle.js';
import { requireUser } from '../services/users.js';
import { checkUnmodifiedSince, currentUser, noContent, requireAdmin } from './helpers.js';
import { projectListParams, respondWithProjectList } from './projects.js';
import { userIdFromPath } from './users.js';

const idParams = z.object({ id: p.string() });
const userIdParams = { user_id: p.int() };
const tokenIdParams = z.object({ ...userIdParams, impersonation_token_id: p.int() });

/**
 * What GitLab's state endpoints answer: 201 with the JSON literal their block returned
 * (`true`, `false`, or `null` where the endpoint `break`s because there is nothing to do).
 */
function respondLiteral(ctx: AppContext, value: boolean | null): void {
  ctx.status = 201;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(value);
}

/** `/users/:id` for an administrator: 401/403 first, then 404 `User Not Found`. */
async function adminTarget(ctx: AppContext, id: string | number): Promise<{ admin: User; user: User }> {
  const admin = requireAdmin(ctx);
  const user = await requireUser(ctx.state.deps.db, String(id));
  return { admin, user };
}

/** A state change `POST /users/:id/<action>` (administrators). */
function stateRoute(
  api: ApiRouter,
  action: string,
  summary: string,
  run: (ctx: AppContext, admin: User, user: User) => Promise<boolean | null>,
): void {
  api.post(`/users/:id/${action}`, { summary, auth: 'required', params: idParams }, async (ctx, params) => {
    const { admin, user } = await adminTarget(ctx, userIdFromPath(params.id));
    const result = await run(ctx, admin, user);
    // GitLab's services log each change (Gitlab::AppLogger); no activity event is recorded.
    if (result === true) ctx.state.deps.logger.info({ user: user.username, by: admin.username, action }, 'user state');
    respondLiteral(ctx, result);
  });
}

/** One of `user`'s impersonation tokens, or 404 `Impersonation Token Not Found`. */
async function impersonationToken(ctx: AppContext, user: User, tokenId: number): Promise<PersonalAccessToken> {
  const id = toDbId(tokenId);
  const token = id === null ? undefined : await findPersonalAccessTokenById(ctx.state.deps.db, id);
  if (!token || token.user_id !== user.id || !token.impersonation) throw notFound('Impersonation Token');
  return token;
}

export function registerUserLifecycleRoutes(api: ApiRouter): void {
  api.delete(
    '/users/:id',
    {
      summary: 'Delete a user (administrators); a background job removes their projects and memberships',
      auth: 'required',
      params: z.object({ id: p.string(), hard_delete: p.bool().optional() }),
    },
    async (ctx, params) => {
      const { admin, user } = await adminTarget(ctx, userIdFromPath(params.id));
      checkUnmodifiedSince(ctx, user.updated_at);
      await scheduleUserDeletion(ctx.state.deps, admin, user, { hardDelete: params.hard_delete === true });
      noContent(ctx);
    },
  );

  stateRoute(api, 'block', 'Block a user (administrators)', (ctx, admin, user) =>
    blockUser(ctx.state.deps, admin, user),
  );
  stateRoute(api, 'unblock', 'Unblock a user (administrators)', (ctx, _admin, user) =>
    unblockUser(ctx.state.deps, user),
  );
  stateRoute(api, 'deactivate', 'Deactivate a dormant user (administrators)', (ctx, _admin, user) =>
    deactivateUser(ctx.state.deps, user),
  );
  stateRoute(api, 'activate', 'Activate a deactivated user (administrators)', (ctx, _admin, user) =>
    activateUser(ctx.state.deps, user),
  );
  stateRoute(api, 'ban', 'Ban a user (administrators)', (ctx, _admin, user) => banUser(ctx.state.deps, user, 'ban'));
  stateRoute(api, 'unban', 'Unban a user (administrators)', (ctx, _admin, user) =>
    banUser(ctx.state.deps, user, 'unban'),
  );

  api.post(
    '/users/:id/approve',
    { summary: 'Approve a user pending approval (administrators)', auth: 'required', params: idParams },
    async (ctx, params) => {
      const caller = currentUser(ctx);
      // GitLab looks the user up before asking the service whether the caller may approve.
      const user = await requireUser(ctx.state.deps.db, userIdFromPath(params.id));
      if (!caller.admin) throw new ApiError(403, { message: 'You are not allowed to approve a user' });
      await approveUser(ctx.state.deps, user);
      ctx.status = 201;
      ctx.body = { message: 'Success' };
    },
  );

  api.post(
    '/users/:id/reject',
    { summary: 'Reject (delete) a user pending approval (administrators)', auth: 'required', params: idParams },
    async (ctx, params) => {
      const caller = currentUser(ctx);
      const user = await requireUser(ctx.state.deps.db, userIdFromPath(params.id));
      if (!caller.admin) throw new ApiError(403, { message: 'You are not allowed to reject a user' });
      await rejectUser(ctx.state.deps, caller, user);
      ctx.status = 200;
      ctx.body = { message: 'Success' };
    },
  );

  api.get(
    '/users/:user_id/projects',
    {
      summary: "A user's personal projects the caller may see (GET /projects's filters)",
      params: projectListParams.extend({ user_id: p.string() }),
    },
    async (ctx, params) => {
      const user = await requireUser(ctx.state.deps.db, params.user_id);
      const namespace = await findUserNamespace(ctx.state.deps.db, user.id);
      await respondWithProjectList(ctx, params, { namespaceIds: namespace ? [namespace.id] : [] });
    },
  );

  api.get(
    '/users/:user_id/memberships',
    {
      summary: "A user's project and group memberships (administrators)",
      auth: 'required',
      params: z.object({ ...userIdParams, type: p.enum(['Project', 'Namespace']).optional(), ...pagination() }),
    },
    async (ctx, params) => {
      const { user } = await adminTarget(ctx, params.user_id);
      const deps = ctx.state.deps;
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listMemberships(deps.db, user.id, params.type, w),
        (cap) => countMemberships(deps.db, user.id, params.type, cap),
      );
      ctx.body = rows.map(presentMembership);
    },
  );

  api.get(
    '/users/:user_id/impersonation_tokens',
    {
      summary: "A user's impersonation tokens (administrators)",
      auth: 'required',
      // impersonation_tokens: before { authenticated_as_admin! }, ahead of the parameters.
      admin: true,
      params: z.object({
        ...userIdParams,
        state: p.enum(['all', 'active', 'inactive']).default('all'),
        ...pagination(),
      }),
    },
    async (ctx, params) => {
      const { user } = await adminTarget(ctx, params.user_id);
      const deps = ctx.state.deps;
      const filter: TokenFilter = {
        today: today(deps),
        userId: user.id,
        onlyImpersonation: true,
        state: params.state === 'all' ? undefined : params.state,
      };
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listPersonalAccessTokens(deps.db, filter, w),
        (cap) => countPersonalAccessTokens(deps.db, filter, cap),
      );
      ctx.body = rows.map((t) => presentImpersonationToken(t, filter.today));
    },
  );

  api.post(
    '/users/:user_id/impersonation_tokens',
    {
      summary: 'Create an impersonation token, which acts as the user (administrators)',
      auth: 'required',
      admin: true,
      params: z.object({
        ...userIdParams,
        name: p.string(),
        description: p.string().optional(),
        expires_at: p.date().optional(),
        scopes: p.array(p.string()).optional(),
      }),
    },
    async (ctx, params) => {
      const { user } = await adminTarget(ctx, params.user_id);
      const deps = ctx.state.deps;
      const { token, plaintext } = await createImpersonationToken(deps, user, {
        name: params.name,
        description: params.description,
        expiresAt: params.expires_at,
        scopes: params.scopes,
      });
      ctx.status = 201;
      ctx.body = presentImpersonationTokenWithToken(token, plaintext, today(deps));
    },
  );

  api.get(
    '/users/:user_id/impersonation_tokens/:impersonation_token_id',
    { summary: 'An impersonation token (administrators)', auth: 'required', admin: true, params: tokenIdParams },
    async (ctx, params) => {
      const { user } = await adminTarget(ctx, params.user_id);
      const token = await impersonationToken(ctx, user, params.impersonation_token_id);
      ctx.body = presentImpersonationToken(token, today(ctx.state.deps));
    },
  );

  api.delete(
    '/users/:user_id/impersonation_tokens/:impersonation_token_id',
    {
      summary: 'Revoke an impersonation token (administrators)',
      auth: 'required',
      admin: true,
      params: tokenIdParams,
    },
    async (ctx, params) => {
      const { user } = await adminTarget(ctx, params.user_id);
      const token = await impersonationToken(ctx, user, params.impersonation_token_id);
      checkUnmodifiedSince(ctx, token.updated_at);
      await revokeToken(ctx.state.deps, token);
      noContent(ctx);
    },
  );
}
