import { z } from 'zod';
import { countAccessRequests, listAccessRequests } from '../db/queries/members.js';
import { findUsersByIds } from '../db/queries/users.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentAccessRequester, presentMember } from '../presenters/member.js';
import {
  approveAccessRequest,
  DEFAULT_REQUEST_LEVEL,
  denyAccessRequest,
  findPendingRequest,
  requestAccess,
} from '../services/access-requests.js';
import { sourceRef } from '../services/members.js';
import { checkUnmodifiedSince, created, currentUser, noContent } from './helpers.js';
import { loadSource, SOURCE_TYPES, type SourceType } from './members.js';

function registerSourceRoutes(api: ApiRouter, type: SourceType): void {
  const base = `/${type}s/:id/access_requests`;
  const label = type === 'group' ? 'group' : 'project';
  const userIdParams = z.object({ id: p.string(), user_id: p.int() });

  api.get(
    base,
    {
      summary: `Access requests of a ${label}`,
      auth: 'required',
      params: z.object({ id: p.string(), ...pagination() }),
      tags: ['access_requests'],
    },
    async (ctx, params) => {
      const { target, policy } = await loadSource(ctx, type, params.id);
      policy.authorize('read_access_requests');
      const deps = ctx.state.deps;
      const source = sourceRef(target);
      const requests = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listAccessRequests(deps.db, source, w),
        async (cap) => Math.min(cap, await countAccessRequests(deps.db, source)),
      );
      const users = new Map(
        (
          await findUsersByIds(
            deps.db,
            requests.map((r) => r.user_id),
          )
        ).map((u) => [u.id, u]),
      );
      const pc = { baseUrl: deps.config.baseUrl };
      ctx.body = requests.flatMap((r) => {
        const user = users.get(r.user_id);
        return user ? [presentAccessRequester(r, user, pc)] : [];
      });
    },
  );

  api.post(
    base,
    {
      summary: `Request access to a ${label}`,
      auth: 'required',
      params: z.object({ id: p.string() }),
      tags: ['access_requests'],
    },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const { target } = await loadSource(ctx, type, params.id);
      const request = await requestAccess(ctx.state.deps, user, target);
      created(ctx, presentAccessRequester(request, user, { baseUrl: ctx.state.deps.config.baseUrl }));
    },
  );

  api.put(
    `${base}/:user_id/approve`,
    {
      summary: `Approve an access request to a ${label}`,
      auth: 'required',
      params: z.object({ id: p.string(), user_id: p.int(), access_level: p.int().default(DEFAULT_REQUEST_LEVEL) }),
      tags: ['access_requests'],
    },
    async (ctx, params) => {
      const actor = currentUser(ctx);
      const deps = ctx.state.deps;
      const { target, policy } = await loadSource(ctx, type, params.id);
      const request = await findPendingRequest(deps, target, params.user_id);
      const member = await approveAccessRequest(deps, actor, policy, target, request, params.access_level);
      const users = new Map((await findUsersByIds(deps.db, [member.user_id, actor.id])).map((u) => [u.id, u]));
      const user = users.get(member.user_id);
      if (!user) return;
      created(
        ctx,
        presentMember(
          {
            member,
            user,
            createdBy: actor,
            showPrivateEmail: actor.admin,
            groupSource: target.type === 'group',
          },
          { baseUrl: deps.config.baseUrl },
        ),
      );
    },
  );

  api.delete(
    `${base}/:user_id`,
    {
      summary: `Deny (or withdraw) an access request to a ${label}`,
      auth: 'required',
      params: userIdParams,
      tags: ['access_requests'],
    },
    async (ctx, params) => {
      const actor = currentUser(ctx);
      const { target, policy } = await loadSource(ctx, type, params.id);
      const request = await findPendingRequest(ctx.state.deps, target, params.user_id);
      checkUnmodifiedSince(ctx, request.updated_at);
      await denyAccessRequest(ctx.state.deps, actor, policy, request);
      noContent(ctx);
    },
  );
}

/** Access requests of groups and projects. */
export function registerAccessRequestRoutes(api: ApiRouter): void {
  for (const type of SOURCE_TYPES) registerSourceRoutes(api, type);
}
