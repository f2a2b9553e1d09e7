import { z } from 'zod';
import { p } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentPlanLimits } from '../presenters/plan-limits.js';
import { getPlanLimits, PLAN_LIMIT_NAMES, PLAN_NAMES, updatePlanLimits } from '../services/plan-limits.js';
import { auditActor, requireAdmin } from './helpers.js';

const limits = Object.fromEntries(PLAN_LIMIT_NAMES.map((name) => [name, p.int().optional()]));

export function registerPlanLimitRoutes(api: ApiRouter): void {
  api.get(
    '/application/plan_limits',
    {
      summary: "A plan's limits",
      auth: 'required',
      admin: true,
      tags: ['settings'],
      params: z.object({ plan_name: p.enum(PLAN_NAMES).default('default') }),
    },
    async (ctx, params) => {
      requireAdmin(ctx);
      ctx.body = presentPlanLimits(await getPlanLimits(ctx.state.deps, params.plan_name));
    },
  );

  api.put(
    '/application/plan_limits',
    {
      summary: "Change a plan's limits",
      auth: 'required',
      admin: true,
      tags: ['settings'],
      params: z.object({ plan_name: p.enum(PLAN_NAMES), ...limits }),
    },
    async (ctx, params) => {
      const admin = requireAdmin(ctx);
      const { plan_name: plan, ...change } = params;
      await updatePlanLimits(ctx.state.deps, auditActor(ctx, admin), plan, change);
      ctx.body = presentPlanLimits(await getPlanLimits(ctx.state.deps, plan));
    },
  );
}
