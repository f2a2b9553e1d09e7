import { sql } from 'kysely';
import { z } from 'zod';
import { countUsers, findUsersByIds, listUsers, type UserFilter } from '../db/queries/users.js';
import type { User } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { forbidden } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { atLeastOneOf, p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentPersonalAccessTokenWithToken } from '../presenters/token.js';
import {
  type PresentContext,
  presentUser,
  presentUserBasic,
  presentUserDetailsWithAdmin,
  presentUserPublic,
  presentUserWithAdmin,
} from '../presenters/user.js';
import type { ScopeRule } from '../services/auth.js';
import { type Deps, today } from '../services/deps.js';
import { createPersonalAccessToken, PAT_SCOPES } from '../services/tokens.js';
import { createUser, requireUser, updateUserProfile } from '../services/users.js';
import { created, currentUser, requireAdmin } from './helpers.js';

const READ_USER: ScopeRule[] = [{ scope: 'read_user', readOnly: true }];

const profileParams = {
  skype: p.string().optional(),
  linkedin: p.string().optional(),
  twitter: p.string().optional(),
  discord: p.string().optional(),
  website_url: p.string().optional(),
  organization: p.string().optional(),
  projects_limit: p.int().pipe(z.number().min(0)).optional(),
  bio: p.string().optional(),
  location: p.string().optional(),
  pronouns: p.string().optional(),
  public_email: p.string().optional(),
  job_title: p.string().optional(),
  admin: p.bool().optional(),
  can_create_group: p.bool().optional(),
  external: p.bool().optional(),
  theme_id: p.int().optional(),
  color_scheme_id: p.int().optional(),
  private_profile: p.bool().optional(),
  note: p.string().optional(),
};

const listParams = z.object({
  username: p.string().optional(),
  search: p.string().optional(),
  active: p.bool().default(false),
  blocked: p.bool().default(false),
  external: p.bool().default(false),
  admins: p.bool().default(false),
  without_project_bots: p.bool().default(false),
  created_after: p.datetime().optional(),
  created_before: p.datetime().optional(),
  order_by: p.enum(['id', 'name', 'username', 'created_at', 'updated_at']).optional(),
  sort: p.enum(['asc', 'desc']).optional(),
  ...pagination(),
});

const createParams = z
  .object({
    email: p.string(),
    name: p.string(),
    username: p.string(),
    password: p.string().optional(),
    reset_password: p.bool().optional(),
    force_random_password: p.bool().optional(),
    skip_confirmation: p.bool().optional(),
    ...profileParams,
  })
  .superRefine((v, ctx) => atLeastOneOf(v, ['password', 'reset_password', 'force_random_password'], ctx));

const updateParams = z.object({
  id: p.string(),
  email: p.string().optional(),
  password: p.string().optional(),
  name: p.string().optional(),
  username: p.string().optional(),
  skip_reconfirmation: p.bool().optional(),
  ...profileParams,
});

const tokenParams = z.object({
  user_id: p.string(),
  name: p.string(),
  scopes: p.array(p.enum(PAT_SCOPES)).refine((s) => s.length > 0),
  expires_at: p.date().optional(),
  description: p.string().optional(),
});

const pc = (ctx: AppContext): PresentContext => ({ baseUrl: ctx.state.deps.config.baseUrl });

/** Namespace ids and creators for the admin entities, loaded in one go. */
async function adminExtras(deps: Deps, users: User[]) {
  const { rows } = await sql<{ id: number; owner_id: number }>`
    SELECT id, owner_id FROM namespaces WHERE kind = 'user' AND owner_id = ANY(${sql.val(users.map((u) => u.id))}::int[])`.execute(
    deps.db,
  );
  const namespaceOf = new Map(rows.map((r) => [r.owner_id, r.id]));
  const creatorIds = users.map((u) => u.created_by_id).filter((id): id is number => id !== null);
  const creators = new Map((await findUsersByIds(deps.db, creatorIds)).map((u) => [u.id, u]));
  return (user: User) => ({
    namespaceId: namespaceOf.get(user.id) ?? null,
    createdBy: user.created_by_id === null ? null : (creators.get(user.created_by_id) ?? null),
  });
}

async function highestRole(deps: Deps, userId: number): Promise<number> {
  const { rows } = await sql<{ level: number | null }>`SELECT max(access_level) AS level FROM members
    WHERE user_id = ${userId} AND requested_at IS NULL
      AND (expires_at IS NULL OR expires_at > ${today(deps)}::date)`.execute(deps.db);
  return rows[0]?.level ?? 0;
}

export function registerUserRoutes(api: ApiRouter): void {
  api.get('/user', { summary: 'The signed-in user', auth: 'required', scopes: READ_USER }, async (ctx) => {
    const user = currentUser(ctx);
    const deps = ctx.state.deps;
    ctx.body = user.admin
      ? presentUserWithAdmin(user, pc(ctx), (await adminExtras(deps, [user]))(user))
      : presentUserPublic(user, pc(ctx));
  });

  api.get('/users', { summary: 'List users', scopes: READ_USER, params: listParams }, async (ctx, params) => {
    const deps = ctx.state.deps;
    const viewer = ctx.state.actor.user;
    const admin = viewer?.admin ?? false;
    if (!viewer && params.username === undefined) throw forbidden('Not authorized to access /api/v4/users');
    const filter: UserFilter = {
      username: params.username,
      search: params.search,
      active: params.active,
      blocked: params.blocked,
      external: params.external,
      admins: admin && params.admins,
      withoutProjectBots: params.without_project_bots,
      createdAfter: admin ? params.created_after : undefined,
      createdBefore: admin ? params.created_before : undefined,
      searchEmails: admin,
      // GitLab maps created_at ordering to id, and defaults to id DESC.
      orderBy: !admin || !params.order_by || params.order_by === 'created_at' ? 'id' : params.order_by,
      sort: admin ? (params.sort ?? 'desc') : 'desc',
    };
    const users = await paginateQuery(
      ctx,
      deps.config.baseUrl,
      params,
      (w) => listUsers(deps.db, filter, w),
      (cap) => countUsers(deps.db, filter, cap),
    );
    if (admin) {
      const extras = await adminExtras(deps, users);
      ctx.body = users.map((u) => presentUserWithAdmin(u, pc(ctx), extras(u)));
    } else {
      ctx.body = users.map((u) => presentUserBasic(u, pc(ctx)));
    }
  });

  api.get(
    '/users/:id',
    { summary: 'A user', scopes: READ_USER, params: z.object({ id: p.string() }) },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const viewer = ctx.state.actor.user;
      if (!viewer) throw forbidden('Not authorized!');
      const user = await requireUser(deps.db, params.id);
      if (viewer.admin) {
        const extras = (await adminExtras(deps, [user]))(user);
        ctx.body = presentUserDetailsWithAdmin(user, pc(ctx), {
          ...extras,
          highestRole: await highestRole(deps, user.id),
        });
        return;
      }
      ctx.body = presentUser(user, pc(ctx), !user.private_profile || viewer.id === user.id);
    },
  );

  api.post(
    '/users',
    { summary: 'Create a user (administrators)', auth: 'required', params: createParams },
    async (ctx, params) => {
      const admin = requireAdmin(ctx);
      const deps = ctx.state.deps;
      const { password, reset_password, force_random_password, skip_confirmation, ...rest } = params;
      const user = await createUser(
        deps,
        {
          ...rest,
          password,
          randomPassword: password === undefined && (force_random_password || reset_password) === true,
          skipConfirmation: skip_confirmation,
        },
        admin,
      );
      created(ctx, presentUserWithAdmin(user, pc(ctx), (await adminExtras(deps, [user]))(user)));
    },
  );

  api.put(
    '/users/:id',
    { summary: 'Update a user (administrators)', auth: 'required', params: updateParams },
    async (ctx, params) => {
      requireAdmin(ctx);
      const deps = ctx.state.deps;
      const { id, skip_reconfirmation: _skip, ...changes } = params;
      const user = await requireUser(deps.db, id);
      const updated = await updateUserProfile(deps, user, changes);
      ctx.body = presentUserWithAdmin(updated, pc(ctx), (await adminExtras(deps, [updated]))(updated));
    },
  );

  api.post(
    '/users/:user_id/personal_access_tokens',
    { summary: 'Create a personal access token for a user (administrators)', auth: 'required', params: tokenParams },
    async (ctx, params) => {
      requireAdmin(ctx);
      const deps = ctx.state.deps;
      const user = await requireUser(deps.db, params.user_id);
      const { token, plaintext } = await createPersonalAccessToken(deps, user, {
        name: params.name,
        scopes: params.scopes,
        expiresAt: params.expires_at,
        description: params.description,
      });
      created(ctx, presentPersonalAccessTokenWithToken(token, plaintext, today(deps)));
    },
  );
}
