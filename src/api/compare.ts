import { z } from 'zod';
import { type Contributor, contributors } from '../git/contributors.js';
import { type DiffLimits, diffCommits, diffLimitsFor, EMPTY_TREE_ID, patchSafeLimitBytes } from '../git/diff.js';
import { listCommits } from '../git/log.js';
import { mergeBase } from '../git/merge-base.js';
import { resolveCommit, resolveCommitId } from '../git/refs.js';
import { isValidRevision } from '../git/validate.js';
import { ApiError, badRequestMessage, notFound } from '../http/errors.js';
import { paginateArray } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentCommit } from '../presenters/commit.js';
import { presentDiff } from '../presenters/diff.js';
import { getApplicationSettings } from '../services/application-settings.js';
import type { Deps } from '../services/deps.js';
import { loadRepository } from './helpers.js';

/** GitLab's Commit.find: refs with `:`, whitespace or a leading `-` are not looked up. */
async function findRef(gitDir: string, ref: string): Promise<string | null> {
  const trimmed = ref.trim();
  if (trimmed === '' || /[:\s]/.test(trimmed) || !isValidRevision(trimmed)) return null;
  return resolveCommitId(gitDir, trimmed);
}

const compareParams = z.object({
  id: p.string(),
  from: p.string(),
  to: p.string(),
  from_project_id: p.id().optional(),
  straight: p.bool().default(false),
  unidiff: p.bool().default(false),
});

const contributorParams = z.object({
  id: p.string(),
  ref: p.string().optional(),
  order_by: p.enum(['email', 'name', 'commits']).default('commits'),
  sort: p.enum(['asc', 'desc']).default('asc'),
  ...pagination(),
});

/** Ruby's casecmp: ASCII letters compare without case, everything else by code unit. */
function casecmp(a: string, b: string): number {
  const fold = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase());
  const x = fold(a);
  const y = fold(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function sortContributors(list: Contributor[], orderBy: string, sort: string): Contributor[] {
  const compare = (a: Contributor, b: Contributor) =>
    orderBy === 'commits'
      ? a.commits - b.commits
      : casecmp(a[orderBy as 'email' | 'name'], b[orderBy as 'email' | 'name']);
  return [...list].sort((a, b) => (sort === 'desc' ? compare(b, a) : compare(a, b)));
}

/** The diff limits of the instance's settings now (`diff_max_files|lines|patch_bytes`). */
async function instanceDiffLimits(deps: Deps): Promise<DiffLimits> {
  const { values } = await getApplicationSettings(deps);
  return diffLimitsFor({
    maxFiles: values.diff_max_files as number,
    maxLines: values.diff_max_lines as number,
    maxPatchBytes: values.diff_max_patch_bytes as number,
  });
}

/** Routes for compare, commit diffs, contributors and merge base (lib/api/repositories.rb, commits.rb). */
export function registerCompareRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/repository/compare',
    { summary: 'Compare two refs', params: compareParams, tags: ['repositories'] },
    async (ctx, params) => {
      const { project, gitDir } = await loadRepository(ctx, params.id);
      if (params.from_project_id !== undefined && params.from_project_id !== project.id) {
        throw badRequestMessage(
          `Target project id:${params.from_project_id} is not a fork of project id:${project.id}`,
        );
      }
      const [base, head] = await Promise.all([findRef(gitDir, params.from), findRef(gitDir, params.to)]);
      if (!base || !head) throw notFound('Ref');
      const pc = { baseUrl: ctx.state.deps.config.baseUrl };
      const webUrlFrom = (left: string) => `${pc.baseUrl}/${project.full_path}/-/compare/${left}...${head}`;
      if (base === head) {
        ctx.body = {
          commit: null,
          commits: [],
          diffs: [],
          compare_timeout: false,
          compare_same_ref: true,
          web_url: webUrlFrom(base),
        };
        return;
      }
      // The merge base and the commit list are independent walks of the history: run both at once.
      const [left, commits] = await Promise.all([
        params.straight ? base : mergeBase(gitDir, [head, base]).then((found) => found ?? base),
        listCommits(gitDir, { include: [head], exclude: [base], reverse: true }),
      ]);
      const webUrl = webUrlFrom(left);
      const limits = await instanceDiffLimits(ctx.state.deps);
      const diff = await diffCommits(gitDir, left, head, limits);
      const presented = commits.map((c) => presentCommit(c, project, pc));
      const collapseBytes = diff.files.length > 1 ? patchSafeLimitBytes(limits) : undefined;
      ctx.body = {
        commit: presented[presented.length - 1] ?? null,
        commits: presented,
        diffs: diff.files.map((f) => presentDiff(f, { unidiff: params.unidiff, collapseBytes })),
        compare_timeout: diff.overflow,
        compare_same_ref: false,
        web_url: webUrl,
      };
    },
  );

  api.get(
    '/projects/:id/repository/commits/:sha/diff',
    {
      summary: 'The diff of a commit',
      params: z.object({ id: p.string(), sha: p.string(), unidiff: p.bool().default(false), ...pagination() }),
      tags: ['commits'],
    },
    async (ctx, params) => {
      const { gitDir } = await loadRepository(ctx, params.id);
      const commit = isValidRevision(params.sha) ? await resolveCommit(gitDir, params.sha) : null;
      if (!commit) throw notFound('Commit');
      // Expanded: limits stop the list, but nothing is collapsed.
      const diff = await diffCommits(gitDir, commit.parentIds[0] ?? EMPTY_TREE_ID, commit.id, {
        ...(await instanceDiffLimits(ctx.state.deps)),
        collapse: false,
      });
      const files = diff.files.map((f) => presentDiff(f, { unidiff: params.unidiff }));
      ctx.body = paginateArray(ctx, ctx.state.deps.config.baseUrl, params, files);
    },
  );

  api.get(
    '/projects/:id/repository/contributors',
    { summary: 'Contributors of the repository', params: contributorParams, tags: ['repositories'] },
    async (ctx, params) => {
      const { project, gitDir } = await loadRepository(ctx, params.id);
      const ref = params.ref || project.default_branch || 'main';
      // Gitaly refuses such a revision and GitLab turns any failure here into a bare 404; a
      // well-formed ref that names nothing lists no one.
      if (!isValidRevision(ref)) throw notFound();
      const commitId = await resolveCommitId(gitDir, ref);
      let list: Contributor[] = [];
      try {
        list = commitId ? await contributors(gitDir, commitId) : [];
      } catch {
        throw notFound();
      }
      // GitLab's Link URLs carry the defaulted order_by and sort.
      const query = new URLSearchParams(ctx.querystring);
      query.set('order_by', params.order_by);
      query.set('sort', params.sort);
      ctx.querystring = query.toString();
      const page = paginateArray(
        ctx,
        ctx.state.deps.config.baseUrl,
        params,
        sortContributors(list, params.order_by, params.sort),
      );
      ctx.body = page.map((c) => ({ name: c.name, email: c.email, commits: c.commits, additions: 0, deletions: 0 }));
    },
  );

  api.get(
    '/projects/:id/repository/merge_base',
    {
      summary: 'The common ancestor of refs',
      params: z.object({ id: p.string(), refs: p.array(p.string()) }),
      tags: ['repositories'],
    },
    async (ctx, params) => {
      const { project, gitDir } = await loadRepository(ctx, params.id);
      if (params.refs.length < 2) throw badRequestMessage('Provide at least 2 refs');
      const found: string[] = [];
      for (const ref of params.refs) {
        const id = isValidRevision(ref) ? await resolveCommitId(gitDir, ref) : null;
        if (id) found.push(id);
      }
      // GitLab zips the refs with the commits it found, so a skipped ref shifts the names.
      const unknown = params.refs.filter((_, i) => found[i] === undefined);
      if (unknown.length > 0) {
        throw badRequestMessage(`Could not find ${unknown.length === 1 ? 'ref' : 'refs'}: ${unknown.join(', ')}`);
      }
      const baseId = await mergeBase(gitDir, found).catch(() => null);
      const commit = baseId ? await resolveCommit(gitDir, baseId) : null;
      if (!commit) throw new ApiError(404, { message: '404 Merge Base Not Found' });
      ctx.body = presentCommit(commit, project, { baseUrl: ctx.state.deps.config.baseUrl });
    },
  );
}
