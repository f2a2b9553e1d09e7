import { z } from 'zod';
import { readObject } from '../git/catfile.js';
import { type Commit, parseCommitObject } from '../git/commit.js';
import { listTags, type Tag } from '../git/refs.js';
import { versionCompare } from '../git/version-sort.js';
import type { AppContext } from '../http/context.js';
import { notFound } from '../http/errors.js';
import { paginateArray } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentTag } from '../presenters/tag.js';
import { searchRefs } from '../services/ref-search.js';
import { type LoadedRepository, loadRepository } from './helpers.js';

/** Version order as git's `version:refname` sorts (Gitaly's VERSION_REFNAME). */
export function compareVersions(a: string, b: string): number {
  return versionCompare(a, b);
}

async function commitOf(gitDir: string, id: string | null): Promise<Commit | null> {
  if (!id) return null;
  const object = await readObject(gitDir, id);
  return object ? parseCommitObject(id, object.data) : null;
}

async function present(ctx: AppContext, repo: LoadedRepository, tags: Tag[]) {
  const pc = { baseUrl: ctx.state.deps.config.baseUrl };
  return Promise.all(tags.map(async (t) => presentTag(t, await commitOf(repo.gitDir, t.commitId), repo.project, pc)));
}

/** The date GitLab orders tags by (`updated`): the tagger date, else the commit's. */
async function updatedAt(gitDir: string, tag: Tag): Promise<number> {
  if (tag.tagger) return tag.tagger.time;
  return (await commitOf(gitDir, tag.commitId))?.committer.time ?? 0;
}

/** Routes for reading tags (lib/api/tags.rb). */
export function registerTagRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/repository/tags',
    {
      summary: 'List tags',
      params: z.object({
        id: p.string(),
        order_by: p.enum(['name', 'updated', 'version']).default('updated'),
        sort: p.enum(['asc', 'desc']).default('desc'),
        search: p.string().optional(),
        ...pagination(),
      }),
      tags: ['tags'],
    },
    async (ctx, params) => {
      const repo = await loadRepository(ctx, params.id);
      let tags = await listTags(repo.gitDir);
      // As git for-each-ref --sort=[-]<key>: the direction applies to the key only; ties keep
      // refname order (bytes, ascending) either way.
      const byName = (a: Tag, b: Tag): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
      let byKey = byName;
      if (params.order_by === 'version') byKey = (a, b) => compareVersions(a.name, b.name);
      if (params.order_by === 'updated') {
        const dates = new Map(
          await Promise.all(tags.map(async (t) => [t.name, await updatedAt(repo.gitDir, t)] as const)),
        );
        byKey = (a, b) => (dates.get(a.name) ?? 0) - (dates.get(b.name) ?? 0);
      }
      const sign = params.sort === 'desc' ? -1 : 1;
      tags.sort((a, b) => sign * byKey(a, b) || byName(a, b));
      if (params.search) tags = searchRefs(tags, params.search);
      const page = paginateArray(ctx, ctx.state.deps.config.baseUrl, params, tags);
      ctx.body = await present(ctx, repo, page);
    },
  );

  api.get(
    '/projects/:id/repository/tags/:tag_name',
    { summary: 'A tag', params: z.object({ id: p.string(), tag_name: p.string() }), tags: ['tags'] },
    async (ctx, params) => {
      const repo = await loadRepository(ctx, params.id);
      const tag = (await listTags(repo.gitDir)).find((t) => t.name === params.tag_name);
      if (!tag) throw notFound('Tag');
      ctx.body = (await present(ctx, repo, [tag]))[0];
    },
  );
}
