import { z } from 'zod';
import { commitStats } from '../git/diff.js';
import { listCommits } from '../git/log.js';
import { resolveCommit, resolveCommitId } from '../git/refs.js';
import { isValidRepoPath, isValidRevision } from '../git/validate.js';
import { badRequestMessage, notFound } from '../http/errors.js';
import { setPaginationHeaders } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentCommit, presentCommitDetail } from '../presenters/commit.js';
import { loadRepository } from './helpers.js';

const listParams = z.object({
  id: p.string(),
  ref_name: p.string().optional(),
  since: p.datetime().optional(),
  until: p.datetime().optional(),
  path: p.string().optional(),
  author: p.string().optional(),
  all: p.bool().default(false),
  with_stats: p.bool().default(false),
  first_parent: p.bool().default(false),
  order: p.enum(['default', 'topo']).default('default'),
  trailers: p.bool().default(false),
  ...pagination(),
});

/** Routes for reading commits (lib/api/commits.rb); the commit diff lives with compare. */
export function registerCommitRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/repository/commits',
    { summary: 'List commits', params: listParams, tags: ['commits'] },
    async (ctx, params) => {
      const { project, gitDir } = await loadRepository(ctx, params.id);
      const baseUrl = ctx.state.deps.config.baseUrl;
      const path = params.path?.replace(/^\/+/, '');
      if (path !== undefined && path !== '' && !isValidRepoPath(path)) throw badRequestMessage('path is invalid');
      let include: string[] = [];
      if (!params.all) {
        const ref = params.ref_name || project.default_branch || 'main';
        if (!isValidRevision(ref)) throw badRequestMessage('ref_name is invalid');
        const id = await resolveCommitId(gitDir, ref);
        if (!id) {
          // An unknown ref lists nothing, as GitLab does.
          setPaginationHeaders(ctx, baseUrl, params, null, false);
          ctx.body = [];
          return;
        }
        include = [id];
      }
      const commits = await listCommits(gitDir, {
        include,
        all: params.all,
        skip: (params.page - 1) * params.per_page,
        maxCount: params.per_page,
        ...(path ? { paths: [path] } : {}),
        ...(params.since ? { since: params.since } : {}),
        ...(params.until ? { until: params.until } : {}),
        ...(params.author ? { author: params.author } : {}),
        firstParent: params.first_parent,
        order: params.order,
      });
      // No totals: the next page exists when this one is full (GitLab's without_count).
      setPaginationHeaders(ctx, baseUrl, params, null, commits.length === params.per_page);
      const pc = { baseUrl };
      ctx.body = await Promise.all(
        commits.map(async (commit) => {
          const body = presentCommit(commit, project, pc, { trailers: params.trailers });
          return params.with_stats
            ? { ...body, stats: await commitStats(gitDir, commit.id, commit.parentIds[0]) }
            : body;
        }),
      );
    },
  );

  api.get(
    '/projects/:id/repository/commits/:sha',
    {
      summary: 'A commit',
      params: z.object({ id: p.string(), sha: p.string(), stats: p.bool().default(true) }),
      tags: ['commits'],
    },
    async (ctx, params) => {
      const { project, gitDir } = await loadRepository(ctx, params.id);
      const commit = /[:\s]/.test(params.sha) ? null : await resolveCommit(gitDir, params.sha);
      if (!commit) throw notFound('Commit');
      const stats = params.stats ? await commitStats(gitDir, commit.id, commit.parentIds[0]) : undefined;
      ctx.body = presentCommitDetail(commit, project, { baseUrl: ctx.state.deps.config.baseUrl }, stats);
    },
  );
}
