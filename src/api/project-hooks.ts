import { z } from 'zod';
import type { Project } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { recordNotFound } from '../http/errors.js';
import { paginateArray, paginateQuery } from '../http/pagination.js';
import { type Params, p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentHookDelivery, presentProjectHook } from '../presenters/project-hook.js';
import {
  countHookDeliveries,
  findHookDelivery,
  HOOK_EVENT_STATUS_CLASSES,
  HOOK_EVENTS_WINDOW_DAYS,
  listHookDeliveries,
  resendDelivery,
  TEST_TRIGGERS,
  testHook,
} from '../services/hook-log.js';
import {
  BRANCH_FILTER_STRATEGIES,
  createHook,
  deleteHook,
  findHook,
  HOOK_EVENT_FLAGS,
  type HookInput,
  listHooks,
  updateHook,
} from '../services/webhooks.js';
import { created, loadProject, noContent } from './helpers.js';

const flagParams = Object.fromEntries(HOOK_EVENT_FLAGS.map((flag) => [flag, p.bool().optional()])) as Record<
  (typeof HOOK_EVENT_FLAGS)[number],
  z.ZodOptional<ReturnType<typeof p.bool>>
>;

const hookProperties = {
  name: p.string().optional(),
  description: p.string().optional(),
  token: p.string().optional(),
  enable_ssl_verification: p.bool().optional(),
  push_events_branch_filter: p.string().optional(),
  branch_filter_strategy: p.enum(BRANCH_FILTER_STRATEGIES).optional(),
  ...flagParams,
};

const hookParams = z.object({ id: p.string(), hook_id: p.id() });

function hookInput(params: Record<string, unknown>): HookInput {
  const events = Object.fromEntries(HOOK_EVENT_FLAGS.map((flag) => [flag, params[flag] as boolean | undefined]));
  return {
    url: params.url as string | undefined,
    name: params.name as string | undefined,
    description: params.description as string | undefined,
    token: params.token as string | undefined,
    enable_ssl_verification: params.enable_ssl_verification as boolean | undefined,
    push_events_branch_filter: params.push_events_branch_filter as string | undefined,
    branch_filter_strategy: params.branch_filter_strategy as HookInput['branch_filter_strategy'],
    events,
  };
}

/** The project each request found, so that the check before the parameters is not made twice. */
const checked = new WeakMap<AppContext, Project>();

/** The project, for maintainers and owners (GitLab's `authorize_admin_project`). */
async function adminProject(ctx: AppContext, id: string): Promise<Project> {
  const found = checked.get(ctx);
  if (found) return found;
  const loaded = await loadProject(ctx, id);
  loaded.policy.authorize('admin_project');
  checked.set(ctx, loaded.project);
  return loaded.project;
}

/**
 * project_hooks.rb's `before { authorize_admin_project }` runs before Grape validates the
 * parameters: whoever may not administer the project gets 403 (404 when they cannot see it),
 * never a 400 about the hook's parameters.
 */
const before = async (ctx: AppContext, raw: Params) => {
  await adminProject(ctx, String(raw.id));
};

async function loadHook(ctx: AppContext, id: string, hookId: number) {
  const project = await adminProject(ctx, id);
  const hook = await findHook(ctx.state.deps, project.id, hookId);
  if (!hook) throw recordNotFound();
  return { project, hook };
}

/** Project webhooks (GitLab's lib/api/project_hooks.rb): maintainers and owners only. */
export function registerProjectHookRoutes(api: ApiRouter): void {
  const tags = ['project_hooks'];

  api.get(
    '/projects/:id/hooks',
    {
      summary: 'List project hooks',
      auth: 'required',
      before,
      params: z.object({ id: p.string(), ...pagination() }),
      tags,
    },
    async (ctx, params) => {
      const project = await adminProject(ctx, params.id);
      const hooks = await listHooks(ctx.state.deps, project.id);
      ctx.body = paginateArray(ctx, ctx.state.deps.config.baseUrl, params, hooks).map(presentProjectHook);
    },
  );

  api.get(
    '/projects/:id/hooks/:hook_id',
    { summary: 'Get a project hook', auth: 'required', before, params: hookParams, tags },
    async (ctx, params) => {
      const { hook } = await loadHook(ctx, params.id, params.hook_id);
      ctx.body = presentProjectHook(hook);
    },
  );

  api.post(
    '/projects/:id/hooks',
    {
      summary: 'Add a project hook',
      auth: 'required',
      before,
      params: z.object({ id: p.string(), url: p.string(), ...hookProperties }),
      tags,
    },
    async (ctx, params) => {
      const project = await adminProject(ctx, params.id);
      const hook = await createHook(ctx.state.deps, project, { ...hookInput(params), url: params.url });
      created(ctx, presentProjectHook(hook));
    },
  );

  api.put(
    '/projects/:id/hooks/:hook_id',
    {
      summary: 'Edit a project hook',
      auth: 'required',
      before,
      params: z.object({ id: p.string(), hook_id: p.id(), url: p.string().optional(), ...hookProperties }),
      tags,
    },
    async (ctx, params) => {
      const { hook } = await loadHook(ctx, params.id, params.hook_id);
      ctx.body = presentProjectHook(await updateHook(ctx.state.deps, hook, hookInput(params)));
    },
  );

  api.delete(
    '/projects/:id/hooks/:hook_id',
    { summary: 'Delete a project hook', auth: 'required', before, params: hookParams, tags },
    async (ctx, params) => {
      const { hook } = await loadHook(ctx, params.id, params.hook_id);
      await deleteHook(ctx.state.deps, hook);
      noContent(ctx);
    },
  );

  api.get(
    '/projects/:id/hooks/:hook_id/events',
    {
      summary: 'List the deliveries of a project hook of the last 7 days, newest first',
      auth: 'required',
      before,
      params: z.object({
        id: p.string(),
        hook_id: p.id(),
        status: p.array(z.union([z.enum(HOOK_EVENT_STATUS_CLASSES), z.string().regex(/^[1-5][0-9][0-9]$/)])).optional(),
        ...pagination(),
      }),
      tags,
    },
    async (ctx, params) => {
      const { hook } = await loadHook(ctx, params.id, params.hook_id);
      const deps = ctx.state.deps;
      const filter = {
        owner: { webHookId: hook.id },
        status: params.status,
        since: new Date(deps.clock.now().getTime() - HOOK_EVENTS_WINDOW_DAYS * 86_400_000),
      };
      const rows = await paginateQuery(
        ctx,
        deps.config.baseUrl,
        params,
        (w) => listHookDeliveries(deps, filter, w),
        (cap) => countHookDeliveries(deps, filter, cap),
      );
      ctx.body = rows.map(presentHookDelivery);
    },
  );

  api.post(
    '/projects/:id/hooks/:hook_id/events/:hook_log_id/resend',
    {
      summary: 'Send a logged delivery of a project hook again',
      auth: 'required',
      before,
      params: z.object({ id: p.string(), hook_id: p.id(), hook_log_id: p.id() }),
      tags,
    },
    async (ctx, params) => {
      const { hook } = await loadHook(ctx, params.id, params.hook_id);
      const deps = ctx.state.deps;
      const delivery = await findHookDelivery(deps, hook.id, params.hook_log_id);
      if (!delivery) throw recordNotFound();
      created(ctx, { response_status: await resendDelivery(deps, hook, delivery) });
    },
  );

  api.post(
    '/projects/:id/hooks/:hook_id/test/:trigger',
    {
      summary: 'Send a test event to a project hook',
      auth: 'required',
      before,
      params: z.object({ id: p.string(), hook_id: p.id(), trigger: p.enum(TEST_TRIGGERS) }),
      tags,
    },
    async (ctx, params) => {
      const { project, hook } = await loadHook(ctx, params.id, params.hook_id);
      const user = ctx.state.actor.user;
      if (!user) throw recordNotFound();
      await testHook(ctx.state.deps, project, user, hook, params.trigger);
      created(ctx, { message: '201 Created' });
    },
  );
}
