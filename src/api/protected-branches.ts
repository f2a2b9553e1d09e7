import { z } from 'zod';
import type { AppContext } from '../http/context.js';
import { paginateArray } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { PUSH_MERGE_ACCESS_LEVELS, UNPROTECT_ACCESS_LEVELS } from '../policies/branch-protection.js';
import { presentProtectedBranch } from '../presenters/protected-branch.js';
import {
  authorizeUnprotect,
  findProtectedBranch,
  granteeNamesFor,
  loadProtectedBranches,
  type ProtectedBranchRow,
  protectBranch,
  unprotectBranch,
  updateProtectedBranch,
} from '../services/protected-branches.js';
import { checkUnmodifiedSince, created, currentUser, loadProject, loadRepository, noContent } from './helpers.js';

/** An integer among GitLab's allowed values (Grape's `values:`: "does not have a valid value"). */
const level = (allowed: readonly number[]) =>
  p.int().refine((v) => allowed.includes(v), { message: 'does not have a valid value' });

/** One entry of allowed_to_push / allowed_to_merge / allowed_to_unprotect (EE's nested attributes). */
const grant = (allowed: readonly number[]) =>
  z.object({
    id: p.id().optional(),
    access_level: level(allowed).optional(),
    user_id: p.id().optional(),
    group_id: p.id().optional(),
    deploy_key_id: p.id().optional(),
    _destroy: p.bool().optional(),
  });

const grants = (allowed: readonly number[]) => z.array(grant(allowed)).optional();

/** Grape's Boolean with `allow_blank: false`: an empty value is "is empty". */
const nonBlankBool = () =>
  z.custom((v) => !(typeof v === 'string' && v.trim() === ''), { message: 'is empty' }).pipe(p.bool());

const changeParams = {
  allow_force_push: nonBlankBool().optional(),
  code_owner_approval_required: p.bool().optional(),
  allowed_to_push: grants(PUSH_MERGE_ACCESS_LEVELS),
  allowed_to_merge: grants(PUSH_MERGE_ACCESS_LEVELS),
  allowed_to_unprotect: grants(UNPROTECT_ACCESS_LEVELS),
};

async function present(ctx: AppContext, rules: readonly ProtectedBranchRow[]) {
  const names = await granteeNamesFor(ctx.state.deps, rules);
  return rules.map((rule) => presentProtectedBranch(rule, names));
}

/** Routes for protected branches (lib/api/protected_branches.rb, with EE's parameters). */
export function registerProtectedBranchRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/protected_branches',
    {
      summary: "List a project's protected branches",
      params: z.object({ id: p.string(), search: p.string().optional(), ...pagination() }),
      tags: ['protected_branches'],
    },
    async (ctx, params) => {
      const { project } = await loadRepository(ctx, params.id);
      let rules = await loadProtectedBranches(ctx.state.deps, project.id);
      if (params.search) {
        const needle = params.search.toLowerCase();
        rules = rules.filter((rule) => rule.name.toLowerCase().includes(needle));
      }
      const page = paginateArray(ctx, ctx.state.deps.config.baseUrl, params, rules);
      ctx.body = await present(ctx, page);
    },
  );

  api.get(
    '/projects/:id/protected_branches/:name',
    {
      summary: 'Get a protected branch or wildcard',
      params: z.object({ id: p.string(), name: p.string() }),
      tags: ['protected_branches'],
    },
    async (ctx, params) => {
      const { project } = await loadRepository(ctx, params.id);
      const rule = await findProtectedBranch(ctx.state.deps, project.id, params.name);
      ctx.body = (await present(ctx, [rule]))[0];
    },
  );

  api.post(
    '/projects/:id/protected_branches',
    {
      summary: 'Protect a branch or wildcard',
      params: z.object({
        id: p.string(),
        name: p.string(),
        push_access_level: level(PUSH_MERGE_ACCESS_LEVELS).optional(),
        merge_access_level: level(PUSH_MERGE_ACCESS_LEVELS).optional(),
        unprotect_access_level: level(UNPROTECT_ACCESS_LEVELS).optional(),
        ...changeParams,
      }),
      tags: ['protected_branches'],
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      currentUser(ctx);
      policy.authorize('admin_project');
      const rule = await protectBranch(ctx.state.deps, project, params);
      created(ctx, (await present(ctx, [rule]))[0]);
    },
  );

  api.patch(
    '/projects/:id/protected_branches/:name',
    {
      summary: 'Update a protected branch or wildcard',
      params: z.object({ id: p.string(), name: p.string(), ...changeParams }),
      tags: ['protected_branches'],
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      currentUser(ctx);
      policy.authorize('admin_project');
      const deps = ctx.state.deps;
      const rule = await findProtectedBranch(deps, project.id, params.name);
      await authorizeUnprotect(deps, policy, rule);
      const updated = await updateProtectedBranch(deps, project, rule, params);
      ctx.body = (await present(ctx, [updated]))[0];
    },
  );

  api.delete(
    '/projects/:id/protected_branches/:name',
    {
      summary: 'Unprotect a branch or wildcard',
      params: z.object({ id: p.string(), name: p.string() }),
      tags: ['protected_branches'],
    },
    async (ctx, params) => {
      const { project, policy } = await loadProject(ctx, params.id);
      currentUser(ctx);
      policy.authorize('admin_project');
      const deps = ctx.state.deps;
      const rule = await findProtectedBranch(deps, project.id, params.name);
      await authorizeUnprotect(deps, policy, rule);
      checkUnmodifiedSince(ctx, rule.updated_at);
      await unprotectBranch(deps, rule);
      noContent(ctx);
    },
  );
}
