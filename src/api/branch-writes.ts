import { z } from 'zod';
import { readObject } from '../git/catfile.js';
import { parseCommitObject } from '../git/commit.js';
import { listMergedBranches } from '../git/refs.js';
import { readBranchTip } from '../git/repo-info.js';
import { isValidBranchName } from '../git/validate.js';
import { badRequestMessage, notFound } from '../http/errors.js';
import { p } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { protectionView } from '../policies/branch-protection.js';
import { presentBranch } from '../presenters/branch.js';
import { canPushToBranch, loadProtectedBranches } from '../services/protected-branches.js';
import { createBranch, deleteBranch, deleteMergedBranches } from '../services/ref-writes.js';
import { accepted, checkUnmodifiedSince, created, currentUser, loadRepository, noContent } from './helpers.js';

/** Grape's `allow_blank: false`. */
const present = () => p.string().refine((v) => v.trim() !== '', { message: 'is empty' });

/** Routes that create and delete branches (lib/api/branches.rb). */
export function registerBranchWriteRoutes(api: ApiRouter): void {
  api.post(
    '/projects/:id/repository/branches',
    {
      summary: 'Create a branch',
      params: z.object({ id: p.string(), branch: present(), ref: present() }),
      tags: ['branches'],
    },
    async (ctx, params) => {
      const { project, policy, gitDir } = await loadRepository(ctx, params.id);
      policy.authorize('push_code');
      currentUser(ctx);
      const deps = ctx.state.deps;
      const commitId = await createBranch(deps, project, policy, gitDir, params.branch, params.ref);
      const object = await readObject(gitDir, commitId);
      if (!object) throw notFound('Branch');
      const defaultTip = project.default_branch ? await readBranchTip(gitDir, project.default_branch) : null;
      const merged = defaultTip ? await listMergedBranches(gitDir, defaultTip) : [];
      created(
        ctx,
        presentBranch(
          {
            name: params.branch,
            commit: parseCommitObject(commitId, object.data),
            merged: merged.some((b) => b.name === params.branch),
            isDefault: params.branch === project.default_branch,
            canPush: await canPushToBranch(deps, project, policy, params.branch),
            protection: protectionView(await loadProtectedBranches(deps, project.id), params.branch),
          },
          project,
          { baseUrl: deps.config.baseUrl },
        ),
      );
    },
  );

  api.delete(
    '/projects/:id/repository/branches/:branch',
    { summary: 'Delete a branch', params: z.object({ id: p.string(), branch: present() }), tags: ['branches'] },
    async (ctx, params) => {
      const { project, policy, gitDir } = await loadRepository(ctx, params.id);
      policy.authorize('push_code');
      currentUser(ctx);
      if (!isValidBranchName(params.branch)) throw badRequestMessage('The branch refname is invalid');
      const tip = await readBranchTip(gitDir, params.branch);
      if (!tip) throw notFound('Branch');
      const object = await readObject(gitDir, tip);
      if (object?.type === 'commit') {
        checkUnmodifiedSince(ctx, new Date(parseCommitObject(tip, object.data).author.time * 1000));
      }
      await deleteBranch(ctx.state.deps, project, policy, gitDir, params.branch, tip);
      noContent(ctx);
    },
  );

  api.delete(
    '/projects/:id/repository/merged_branches',
    {
      summary: 'Delete branches merged into the default branch',
      params: z.object({ id: p.string() }),
      tags: ['branches'],
    },
    async (ctx, params) => {
      const { project, policy, gitDir } = await loadRepository(ctx, params.id);
      await deleteMergedBranches(ctx.state.deps, project, policy, gitDir);
      accepted(ctx);
    },
  );
}
