import { sql } from 'kysely';
import { z } from 'zod';
import { countUsers, findUsersByIds, listUsers, type UserFilter } from '../db/queries/users.js';
import type { User } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, forbidden } from '../http/errors.js';
import { paginateQuery } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
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
  humans: p.bool().default(false),
  external: p.bool().default(false),
  blocked: p.bool().default(false),
  created_after: p.datetime().optional(),
  created_before: p.datetime().optional(),
  without_project_bots: p.bool().default(false),
  admins: p.bool().default(false),
  two_factor: p.string().optional(),
  exclude_active: p.bool().default(false),
  exclude_external: p.bool().default(false),
  exclude_humans: p.bool().default(false),
  exclude_internal: p.bool().default(false),
  order_by: p.enum(['id', 'name', 'username', 'created_at', 'updated_at']).optional(),
  sort: p.enum(['asc', 'desc']).optional(),
  ...pagination(),
});

const PASSWORD_CHOICES = ['password', 'reset_password', 'force_random_password'];
/** Parameters GitLab declares before its `at_least_one_of` password rule. */
const DECLARED_BEFORE_PASSWORD_CHOICE = new Set(['email', 'password', 'reset_password', 'skip_confirmation']);

/**
 * Grape's `at_least_one_of :password, :reset_password, :force_random_password`. Grape runs every
 * validator and reports in declaration order, and GitLab declares this rule between `email` and
 * `name`; so it runs even when other parameters failed, and its message takes that place.
 */
function requirePasswordChoice(value: Record<string, unknown>, ctx: z.RefinementCtx): void {
  if (PASSWORD_CHOICES.some((name) => value[name] !== undefined)) return;
  const issue = {
    code: 'custom' as const,
    message: `${PASSWORD_CHOICES.join(', ')} are missing, at least one parameter must be provided`,
    path: [],
    input: value,
  };
  const issues = (ctx as unknown as { issues?: { path: PropertyKey[] }[] }).issues;
  const at = issues?.findIndex((i) => !DECLARED_BEFORE_PASSWORD_CHOICE.has(String(i.path[0]))) ?? -1;
  if (issues && at >= 0) issues.splice(at, 0, issue);
  else ctx.addIssue(issue);
}

const createParams = z
  .object({
    email: p.string(),
    password: p.string().optional(),
    reset_password: p.bool().optional(),
    skip_confirmation: p.bool().optional(),
    name: p.string(),
    username: p.string(),
    force_random_password: p.bool().optional(),
    ...profileParams,
  })
  .superRefine(requirePasswordChoice, { when: () => true });

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
  user_id: p.int(),
  name: p.string(),
  // Grape names the list, not the element, when a value is not allowed.
  scopes: p
    .array(p.string())
    .refine((scopes) => scopes.every((s) => (PAT_SCOPES as readonly string[]).includes(s)), {
      message: 'does not have a valid value',
    })
    .meta({ items: { type: 'string', enum: [...PAT_SCOPES] } }),
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

/**
 * GitLab declares `/users/:id` with a digits-only requirement on `:id`: anything else does not
 * match the route and falls through to the API's catch-all 404.
 */
export function userIdFromPath(id: string): string {
  if (!/^\d+$/.test(id)) throw new ApiError(404, { error: '404 Not Found' });
  return id;
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
    // Anonymous callers must name one user: no listing of the whole instance.
    if (!viewer && !params.username?.trim()) throw forbidden('Not authorized to access /api/v4/users');
    const customOrder = admin && (params.order_by !== undefined || params.sort !== undefined);
    const search = params.search?.replace(/^@/, '');
    const filter: UserFilter = {
      username: params.username,
      search,
      active: params.active,
      humans: params.humans,
      external: params.external,
      blocked: params.blocked,
      // UsersFinder honours `admins` only for administrators.
      admins: admin && params.admins,
      withoutProjectBots: params.without_project_bots,
      createdAfter: admin ? params.created_after : undefined,
      createdBefore: admin ? params.created_before : undefined,
      twoFactor:
        admin && (params.two_factor === 'enabled' || params.two_factor === 'disabled') ? params.two_factor : undefined,
      excludeActive: params.exclude_active,
      excludeExternal: params.exclude_external,
      excludeHumans: params.exclude_humans,
      searchEmails: admin,
      withoutForbiddenStates: !admin,
      // A search without an explicit order ranks exact matches first; otherwise GitLab orders by
      // id DESC, maps created_at to id, and only administrators may choose.
      orderBy:
        search !== undefined && search !== '' && !customOrder
          ? 'search_rank'
          : !admin || !params.order_by || params.order_by === 'created_at'
            ? 'id'
            : params.order_by,
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
      const id = userIdFromPath(params.id);
      const viewer = ctx.state.actor.user;
      if (!viewer) throw forbidden('Not authorized!');
      const user = await requireUser(deps.db, id);
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
    { summary: 'Create a user (administrators)', auth: 'required', scopes: READ_USER, params: createParams },
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
    { summary: 'Update a user (administrators)', auth: 'required', scopes: READ_USER, params: updateParams },
    async (ctx, params) => {
      const { id, skip_reconfirmation: _skip, ...changes } = params;
      userIdFromPath(id);
      requireAdmin(ctx);
      const deps = ctx.state.deps;
      const user = await requireUser(deps.db, id);
      const updated = await updateUserProfile(deps, user, changes);
      ctx.body = presentUserWithAdmin(updated, pc(ctx), (await adminExtras(deps, [updated]))(updated));
    },
  );

  api.post(
    '/users/:user_id/personal_access_tokens',
    {
      summary: 'Create a personal access token for a user (administrators)',
      auth: 'required',
      // users.rb personal_access_tokens: before { authenticated_as_admin! }, ahead of the parameters.
      admin: true,
      scopes: READ_USER,
      params: tokenParams,
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      const deps = ctx.state.deps;
      const user = await requireUser(deps.db, String(params.user_id));
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
