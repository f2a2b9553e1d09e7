import fs from 'node:fs/promises';
import { z } from 'zod';
import { blameFile } from '../git/blame.js';
import { readObject } from '../git/catfile.js';
import { parseCommitObject } from '../git/commit.js';
import { refsContaining } from '../git/containing-refs.js';
import { resolveCommit } from '../git/refs.js';
import { readBranchTip } from '../git/repo-info.js';
import { readCommitSignature } from '../git/signature.js';
import { streamSnapshot } from '../git/snapshot.js';
import { isValidRevision } from '../git/validate.js';
import type { AppContext } from '../http/context.js';
import { badRequestMessage, forbidden, notFound } from '../http/errors.js';
import { filePathParam } from '../http/file-path.js';
import { setPaginationHeaders } from '../http/pagination.js';
import { p, pagination } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentBlameRange } from '../presenters/blame.js';
import { presentCommit } from '../presenters/commit.js';
import { presentCommitSignature } from '../presenters/commit-signature.js';
import { fileHeaders } from '../presenters/repository-file.js';
import type { ScopeRule } from '../services/auth.js';
import { applyCommitChange, type ChangeAction } from '../services/commit-changes.js';
import { canPushToBranch } from '../services/protected-branches.js';
import { assertWritable } from '../services/repository-commits.js';
import { describeRepositoryFile, findRepositoryFile } from '../services/repository-files.js';
import { currentUser, loadProject, loadRepository } from './helpers.js';

/** Files API reads also take `read_repository` tokens (lib/api/files.rb). */
const READ_SCOPES: readonly ScopeRule[] = [{ scope: 'read_repository', readOnly: true }];

/** Grape's `allow_blank: false`. */
const notBlank = () => p.string().refine((v) => v.trim() !== '', { message: 'is empty' });
const lineNumber = () => p.int().pipe(z.number().min(1));

const blameParams = z.object({
  id: p.string(),
  file_path: filePathParam(),
  ref: notBlank(),
  range: z.object({ start: lineNumber(), end: lineNumber() }).optional(),
});

const changeParams = z.object({
  id: p.string(),
  sha: p.string(),
  branch: notBlank(),
  dry_run: p.bool().default(false),
});

const refsParams = z.object({
  id: p.string(),
  sha: p.string(),
  type: p.enum(['branch', 'tag', 'all']).default('all'),
  ...pagination(),
});

/** A commit named by a user (sha, branch or tag), or 404 `Commit Not Found`. */
async function findCommit(gitDir: string, sha: string) {
  const commit = isValidRevision(sha) ? await resolveCommit(gitDir, sha) : null;
  if (!commit) throw notFound('Commit');
  return commit;
}

/**
 * POST …/cherry_pick and …/revert (lib/api/commits.rb): push rights on the branch (403), the
 * commit (404), the branch (404), then the change; 201 with the new commit, or for a dry run
 * 200 `{"dry_run":"success"}`.
 */
async function changeCommit(
  ctx: AppContext,
  action: ChangeAction,
  params: z.infer<typeof changeParams> & { message?: string | undefined },
): Promise<void> {
  const deps = ctx.state.deps;
  // GitLab's order: the project (404 when invisible, anonymous callers included), then
  // authenticate! (401) and the push rights on the branch (403).
  const { project, policy, gitDir } = await loadRepository(ctx, params.id);
  const user = currentUser(ctx);
  if (!(await canPushToBranch(ctx.state.deps, project, policy, params.branch)))
    throw forbidden('You are not allowed to push into this branch');
  const commit = await findCommit(gitDir, params.sha);
  const tip = await readBranchTip(gitDir, params.branch);
  if (!tip) throw notFound('Branch');
  assertWritable(project);
  const created = await applyCommitChange(deps, project, user, gitDir, {
    action,
    commit,
    branch: params.branch,
    tip,
    dryRun: params.dry_run,
    message: params.message,
  });
  if (created === null) {
    ctx.status = 200;
    ctx.body = { dry_run: 'success' };
    return;
  }
  const object = await readObject(gitDir, created);
  if (!object) throw notFound('Commit');
  ctx.status = 201;
  ctx.body = presentCommit(parseCommitObject(created, object.data), project, { baseUrl: deps.config.baseUrl });
}

/**
 * Repository operations scripts use next to the files and commits APIs: blame, cherry-pick,
 * revert, the refs holding a commit, its signature, and the admin snapshot of the repository.
 */
export function registerRepositoryOperationRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/repository/files/:file_path/blame',
    {
      summary: 'Blame of a file: consecutive lines grouped by the commit that last changed them (HEAD: headers only)',
      params: blameParams,
      scopes: READ_SCOPES,
      tags: ['repository_files'],
    },
    async (ctx, params) => {
      const { project, gitDir } = await loadRepository(ctx, params.id);
      const file = await findRepositoryFile(gitDir, project, params.ref, params.file_path);
      ctx.set(fileHeaders(await describeRepositoryFile(gitDir, file, false)));
      ctx.type = 'application/json';
      if (ctx.method === 'HEAD') {
        ctx.status = 200;
        return;
      }
      const range = params.range;
      if (range && range.start > range.end) {
        throw badRequestMessage('range[start] must be less than or equal to range[end]');
      }
      const groups = await blameFile(gitDir, file.commitId, file.path, range);
      // A Buffer keeps the byte-spelled X-Gitlab-File-* headers apart from the UTF-8 body.
      ctx.body = Buffer.from(JSON.stringify(groups.map(presentBlameRange)));
    },
  );

  api.post(
    '/projects/:id/repository/commits/:sha/cherry_pick',
    {
      summary: 'Cherry-pick a commit onto a branch',
      params: changeParams.extend({ message: p.string().optional() }),
      tags: ['commits'],
    },
    (ctx, params) => changeCommit(ctx, 'cherry_pick', params),
  );

  api.post(
    '/projects/:id/repository/commits/:sha/revert',
    { summary: 'Revert a commit on a branch', params: changeParams, tags: ['commits'] },
    (ctx, params) => changeCommit(ctx, 'revert', params),
  );

  api.get(
    '/projects/:id/repository/commits/:sha/refs',
    { summary: 'The branches and tags a commit is on', params: refsParams, tags: ['commits'] },
    async (ctx, params) => {
      const { gitDir } = await loadRepository(ctx, params.id);
      const commit = await findCommit(gitDir, params.sha);
      const offset = (params.page - 1) * params.per_page;
      // Enough refs for this page and one more, as GitLab asks Gitaly: no totals.
      const refs = await refsContaining(gitDir, commit.id, params.type, offset + params.per_page + 1);
      setPaginationHeaders(ctx, ctx.state.deps.config.baseUrl, params, null, refs.length > offset + params.per_page);
      ctx.body = refs.slice(offset, offset + params.per_page).map((ref) => ({ type: ref.type, name: ref.name }));
    },
  );

  api.get(
    '/projects/:id/repository/commits/:sha/signature',
    { summary: "A commit's signature", params: z.object({ id: p.string(), sha: p.string() }), tags: ['commits'] },
    async (ctx, params) => {
      const { gitDir } = await loadRepository(ctx, params.id);
      const commit = await findCommit(gitDir, params.sha);
      const object = await readObject(gitDir, commit.id);
      const signature = object ? readCommitSignature(object.data) : null;
      if (!signature) throw notFound('Signature');
      ctx.body = presentCommitSignature(signature);
    },
  );

  api.get(
    '/projects/:id/snapshot',
    {
      summary: 'A tar of the bare repository (administrators)',
      admin: true,
      params: z.object({ id: p.string(), wiki: p.bool().default(false) }),
      tags: ['project_snapshots'],
    },
    async (ctx, params) => {
      const { project } = await loadProject(ctx, params.id);
      const deps = ctx.state.deps;
      const repository = deps.storages.repositoryPath(project.repository_storage, project.id);
      const gitDir = params.wiki ? repository.replace(/\.git$/, '.wiki.git') : repository;
      const stat = await fs.stat(gitDir).catch(() => null);
      if (!stat?.isDirectory()) throw notFound('Repository');
      ctx.set('Content-Disposition', 'attachment; filename="snapshot.tar"');
      ctx.set('Content-Transfer-Encoding', 'binary');
      ctx.set('Cache-Control', 'private');
      if (ctx.method === 'HEAD') {
        ctx.status = 200;
        ctx.type = 'application/x-tar';
        return;
      }
      const tar = streamSnapshot(gitDir);
      tar.on('error', (error) => deps.logger.warn({ err: error, project: project.id }, 'snapshot stream failed'));
      ctx.body = tar;
      ctx.type = 'application/x-tar';
    },
  );
}
