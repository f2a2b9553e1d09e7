import { z } from 'zod';
import { findUserByIdOrUsername, findUsersByIds } from '../db/queries/users.js';
import type { Event, User } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { notFound } from '../http/errors.js';
import { MAX_COUNT, pageWindow, setPaginationHeaders } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import type { ProjectPolicy } from '../policies/abilities.js';
import { presentEvent } from '../presenters/event.js';
import type { ScopeRule } from '../services/auth.js';
import {
  canReadProfile,
  EVENT_ACTIONS,
  EVENT_TARGET_TYPES,
  type EventQuery,
  type EventTargetKey,
  eventPage,
  visibleEvents,
} from '../services/events.js';
import { viewerOf } from './groups.js';
import { currentUser, loadProject } from './helpers.js';

/** Part 2, Authentication rule 4: the user feeds also take a `read_user` token (reads only). */
const READ_USER: ScopeRule[] = [{ scope: 'read_user', readOnly: true }];

const TARGET_KEYS = Object.keys(EVENT_TARGET_TYPES) as [EventTargetKey, ...EventTargetKey[]];

/** GitLab's `event_filter_params` and `sort_params`, with pagination. */
const filterParams = {
  action: p.enum(EVENT_ACTIONS).optional(),
  target_type: p.enum(TARGET_KEYS).optional(),
  before: p.date().optional(),
  after: p.date().optional(),
  sort: p.enum(['asc', 'desc']).default('desc'),
  ...pagination(),
};

type FilterParams = z.output<z.ZodObject<typeof filterParams>>;

function queryOf(ctx: AppContext, params: FilterParams, source: EventQuery['source']): EventQuery {
  return {
    source,
    viewer: viewerOf(ctx),
    user: ctx.state.actor.user ?? null,
    action: params.action,
    targetType: params.target_type,
    before: params.before,
    after: params.after,
    sort: params.sort,
  };
}

/** Pages the feed, drops what the caller may not see, and presents the rest with their authors. */
async function answerFeed(
  ctx: AppContext,
  params: FilterParams,
  query: EventQuery,
  options: { projectList?: boolean; known?: ProjectPolicy[] } = {},
): Promise<void> {
  const deps = ctx.state.deps;
  const page = eventPage(deps, query);
  // GitLab's EventsFinder counts up to 10,001 rows and answers that count as the total (X-Total
  // 10001 on a busier feed), where other lists leave the totals out.
  const [rows, total] = await Promise.all([page.rows(pageWindow(params)), page.count(MAX_COUNT + 1)]);
  setPaginationHeaders(ctx, deps.config.baseUrl, params, total);
  const events = await visibleEvents(deps, query.user, rows, options.known);
  ctx.body = await present(ctx, events, options.projectList ?? false);
}

async function present(ctx: AppContext, events: Event[], projectList: boolean) {
  const deps = ctx.state.deps;
  const authors = new Map(
    (await findUsersByIds(deps.db, [...new Set(events.map((e) => e.author_id))])).map((u) => [u.id, u] as const),
  );
  const options = { baseUrl: deps.config.baseUrl, projectList };
  return events.map((event) => presentEvent(event, authors.get(event.author_id), options));
}

/** An empty feed with its headers (a private profile's activity). */
function emptyFeed(ctx: AppContext, params: FilterParams): void {
  setPaginationHeaders(ctx, ctx.state.deps.config.baseUrl, params, 0);
  ctx.body = [];
}

export function registerEventRoutes(api: ApiRouter): void {
  api.get(
    '/events',
    {
      summary: "The signed-in user's events (scope=all: every event of the user's projects)",
      auth: 'required',
      scopes: READ_USER,
      params: z.object({ scope: p.string().optional(), ...filterParams }),
      tags: ['events'],
    },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const source: EventQuery['source'] =
        params.scope === 'all' ? { kind: 'member', userId: user.id } : { kind: 'author', authorId: user.id };
      await answerFeed(ctx, params, queryOf(ctx, params, source));
    },
  );

  api.get(
    '/users/:id/events',
    {
      summary: "A user's contribution events (id or username)",
      scopes: READ_USER,
      params: z.object({ id: p.string(), ...filterParams }),
      tags: ['events'],
    },
    async (ctx, params) => {
      const deps = ctx.state.deps;
      const user: User | undefined = await findUserByIdOrUsername(deps.db, params.id);
      if (!user) throw notFound('User');
      if (!canReadProfile(ctx.state.actor.user ?? null, user)) {
        emptyFeed(ctx, params);
        return;
      }
      await answerFeed(ctx, params, queryOf(ctx, params, { kind: 'author', authorId: user.id }));
    },
  );

  api.get(
    '/projects/:id/events',
    {
      summary: "A project's events",
      params: z.object({ id: p.string(), ...filterParams }),
      tags: ['events'],
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      await answerFeed(ctx, params, queryOf(ctx, params, { kind: 'project', projectId: project.id }), {
        projectList: true,
        known: [policy],
      });
    },
  );
}
