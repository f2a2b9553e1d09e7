import { z } from 'zod';
import { readObject } from '../git/catfile.js';
import { gitText } from '../git/command.js';
import { type Commit, parseCommitObject } from '../git/commit.js';
import { listMergedBranches } from '../git/refs.js';
import { isValidBranchName } from '../git/validate.js';
import type { AppContext } from '../http/context.js';
import { badRequestMessage, notFound } from '../http/errors.js';
import { paginateArray } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { protectionView } from '../policies/branch-protection.js';
import { presentBranch } from '../presenters/branch.js';
import { canPushToBranch, loadProtectedBranches } from '../services/protected-branches.js';
import { filterByRegex, searchRefs } from '../services/ref-search.js';
import { type LoadedRepository, loadRepository } from './helpers.js';

interface BranchRef {
  name: string;
  target: string;
  updated: number;
}

async function branchRefs(gitDir: string): Promise<BranchRef[]> {
  const out = await gitText({
    gitDir,
    subcommand: 'for-each-ref',
    flags: ['--format=%(refname:lstrip=2)%00%(objectname)%00%(committerdate:unix)', '--sort=refname'],
    args: ['refs/heads/'],
  });
  return out
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [name, target, updated] = line.split('\0') as [string, string, string];
      return { name, target, updated: Number(updated) };
    });
}

async function commitOf(gitDir: string, id: string): Promise<Commit> {
  const object = await readObject(gitDir, id);
  if (!object) throw notFound('Branch');
  return parseCommitObject(id, object.data);
}

async function present(ctx: AppContext, repo: LoadedRepository, refs: BranchRef[], all: BranchRef[]) {
  const { project, policy, gitDir } = repo;
  const defaultTip = all.find((b) => b.name === project.default_branch)?.target;
  // Asked only for the branches answered, and not at all for those at the default branch's tip
  // (never merged): showing the default branch costs no history walk.
  const candidates = refs.filter((b) => b.target !== defaultTip).map((b) => b.name);
  const merged = new Set(
    defaultTip ? (await listMergedBranches(gitDir, defaultTip, candidates)).map((b) => b.name) : [],
  );
  const deps = ctx.state.deps;
  const pc = { baseUrl: deps.config.baseUrl };
  const rules = await loadProtectedBranches(deps, project.id);
  return Promise.all(
    refs.map(async (b) =>
      presentBranch(
        {
          name: b.name,
          commit: await commitOf(gitDir, b.target),
          merged: merged.has(b.name),
          isDefault: b.name === project.default_branch,
          canPush: ctx.state.actor.user !== null && (await canPushToBranch(deps, project, policy, b.name)),
          protection: protectionView(rules, b.name),
        },
        project,
        pc,
      ),
    ),
  );
}

/** Routes for reading branches (lib/api/branches.rb). */
export function registerBranchRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/repository/branches',
    {
      summary: 'List branches',
      params: z.object({
        id: p.string(),
        search: p.string().optional(),
        regex: p.string().optional(),
        sort: p.enum(['name_asc', 'updated_asc', 'updated_desc']).default('name_asc'),
        ...pagination(),
      }),
      tags: ['branches'],
    },
    async (ctx, params) => {
      const repo = await loadRepository(ctx, params.id);
      const all = await branchRefs(repo.gitDir);
      let list = all;
      if (params.sort !== 'name_asc') {
        const sign = params.sort === 'updated_asc' ? 1 : -1;
        // Ties keep git's refname order (byte order, not locale order), as for-each-ref sorts them.
        list = [...list].sort(
          (a, b) => sign * (a.updated - b.updated) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
        );
      }
      if (params.search) list = searchRefs(list, params.search);
      if (params.regex) list = filterByRegex(list, params.regex);
      const page = paginateArray(ctx, ctx.state.deps.config.baseUrl, params, list);
      ctx.body = await present(ctx, repo, page, all);
    },
  );

  const findBranch = async (ctx: AppContext, id: string, name: string) => {
    const repo = await loadRepository(ctx, id);
    if (!isValidBranchName(name)) throw badRequestMessage('The branch refname is invalid');
    const all = await branchRefs(repo.gitDir);
    const branch = all.find((b) => b.name === name);
    return { repo, all, branch };
  };

  api.get(
    '/projects/:id/repository/branches/:branch',
    { summary: 'A branch', params: z.object({ id: p.string(), branch: p.string() }), tags: ['branches'] },
    async (ctx, params) => {
      if (ctx.method === 'HEAD') {
        // GitLab's HEAD only asks branch_exists?: no name check, 204 or 404.
        const repo = await loadRepository(ctx, params.id);
        if (!(await branchRefs(repo.gitDir)).some((b) => b.name === params.branch)) throw notFound();
        ctx.status = 204;
        return;
      }
      const { repo, all, branch } = await findBranch(ctx, params.id, params.branch);
      if (!branch) throw notFound('Branch');
      ctx.body = (await present(ctx, repo, [branch], all))[0];
    },
  );
}
