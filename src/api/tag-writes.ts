import { z } from 'zod';
import { readObject } from '../git/catfile.js';
import { type Commit, parseCommitObject } from '../git/commit.js';
import { listTags, type Tag } from '../git/refs.js';
import { notFound } from '../http/errors.js';
import { p } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentTag } from '../presenters/tag.js';
import { createTag, deleteTag } from '../services/ref-writes.js';
import { checkUnmodifiedSince, created, currentUser, loadRepository, noContent } from './helpers.js';

async function findTag(gitDir: string, name: string): Promise<Tag | undefined> {
  return (await listTags(gitDir)).find((t) => t.name === name);
}

async function commitOf(gitDir: string, tag: Tag): Promise<Commit | null> {
  if (!tag.commitId) return null;
  const object = await readObject(gitDir, tag.commitId);
  return object ? parseCommitObject(tag.commitId, object.data) : null;
}

/** Routes that create and delete tags (lib/api/tags.rb). */
export function registerTagWriteRoutes(api: ApiRouter): void {
  api.post(
    '/projects/:id/repository/tags',
    {
      summary: 'Create a tag',
      params: z.object({
        id: p.string(),
        tag_name: p.string(),
        ref: p.string(),
        message: p.string().optional(),
      }),
      tags: ['tags'],
    },
    async (ctx, params) => {
      const { project, policy, gitDir } = await loadRepository(ctx, params.id);
      // GitLab's admin_tag: whoever may push code (there are no protected tags here).
      policy.authorize('push_code');
      const user = currentUser(ctx);
      const deps = ctx.state.deps;
      await createTag(deps, project, user, gitDir, { name: params.tag_name, ref: params.ref, message: params.message });
      const tag = await findTag(gitDir, params.tag_name);
      if (!tag) throw notFound('Tag');
      created(ctx, presentTag(tag, await commitOf(gitDir, tag), project, { baseUrl: deps.config.baseUrl }));
    },
  );

  api.delete(
    '/projects/:id/repository/tags/:tag_name',
    { summary: 'Delete a tag', params: z.object({ id: p.string(), tag_name: p.string() }), tags: ['tags'] },
    async (ctx, params) => {
      const { project, policy, gitDir } = await loadRepository(ctx, params.id);
      const tag = await findTag(gitDir, params.tag_name);
      if (!tag) throw notFound('Tag');
      // GitLab's delete_tag: admin_tag, and maintainers only for protected tags (none here).
      policy.authorize('push_code');
      const user = currentUser(ctx);
      const commit = await commitOf(gitDir, tag);
      if (commit) checkUnmodifiedSince(ctx, new Date(commit.author.time * 1000));
      await deleteTag(ctx.state.deps, project, user, gitDir, tag.name, tag.target);
      noContent(ctx);
    },
  );
}
