import { z } from 'zod';
import { readObject } from '../git/catfile.js';
import { parseCommitObject } from '../git/commit.js';
import { commitStats } from '../git/diff.js';
import type { FileAction } from '../git/write.js';
import { forbidden, notFound } from '../http/errors.js';
import { filePathParam } from '../http/file-path.js';
import { p } from '../http/params.js';
import type { ApiRouter } from '../http/route.js';
import { presentCommitDetail } from '../presenters/commit.js';
import { canPushToBranch } from '../services/protected-branches.js';
import { createCommit } from '../services/repository-commits.js';
import { created, currentUser, loadProject, noContent } from './helpers.js';

const action = z.object({
  action: p.enum(['create', 'update', 'move', 'delete', 'chmod']),
  file_path: p.string(),
  previous_path: p.string().optional(),
  content: p.string().optional(),
  encoding: p.enum(['text', 'base64']).default('text'),
  last_commit_id: p.string().optional(),
  execute_filemode: p.bool().optional(),
});

const commitParams = z
  .object({
    id: p.string(),
    branch: p.string().refine((v) => v.trim() !== '', { message: 'is empty' }),
    commit_message: p.string(),
    actions: z.array(action).min(1),
    start_branch: p.string().optional(),
    start_sha: p.string().optional(),
    start_project: p.string().optional(),
    author_email: p.string().optional(),
    author_name: p.string().optional(),
    stats: p.bool().default(true),
    force: p.bool().default(false),
  })
  .refine((v) => !(v.start_branch !== undefined && v.start_sha !== undefined), {
    message: 'start_branch, start_sha are mutually exclusive',
  })
  .superRefine((v, ctx) => {
    v.actions.forEach((a, i) => {
      const need = (field: string, when: boolean) => {
        if (when) ctx.addIssue({ code: 'custom', path: ['actions', i, field], message: 'is missing' });
      };
      need('previous_path', a.action === 'move' && a.previous_path === undefined);
      need('content', (a.action === 'create' || a.action === 'update') && a.content === undefined);
      need('execute_filemode', a.action === 'chmod' && a.execute_filemode === undefined);
    });
  });

/** GitLab strips one leading slash from action paths. */
const stripSlash = (path: string) => (path.startsWith('/') ? path.slice(1) : path);

function toAction(a: z.infer<typeof action>): FileAction & { lastCommitId?: string | undefined } {
  const decode = (content: string | undefined) =>
    content === undefined ? null : Buffer.from(content, a.encoding === 'base64' ? 'base64' : 'utf8');
  const path = stripSlash(a.file_path);
  const lastCommitId = a.last_commit_id;
  switch (a.action) {
    case 'create':
    case 'update':
      return {
        action: a.action,
        path,
        content: decode(a.content) ?? Buffer.alloc(0),
        ...(a.execute_filemode !== undefined ? { executable: a.execute_filemode } : {}),
        lastCommitId,
      };
    case 'delete':
      return { action: 'delete', path, lastCommitId };
    case 'chmod':
      return { action: 'chmod', path, executable: a.execute_filemode ?? false, lastCommitId };
    case 'move':
      return {
        action: 'move',
        path,
        previousPath: stripSlash(a.previous_path ?? ''),
        content: decode(a.content),
        lastCommitId,
      };
  }
}

const fileWriteParams = z.object({
  id: p.string(),
  file_path: filePathParam(),
  branch: p.string().refine((v) => v.trim() !== '', { message: 'is empty' }),
  start_branch: p.string().optional(),
  encoding: p.enum(['text', 'base64']).default('text'),
  author_email: p.string().optional(),
  author_name: p.string().optional(),
  content: p.string(),
  commit_message: p.string(),
  last_commit_id: p.string().optional(),
  execute_filemode: p.bool().optional(),
});

const fileDeleteParams = fileWriteParams.omit({ content: true, encoding: true, execute_filemode: true });

/** Write endpoints of the repository that release automation uses (lib/api/commits.rb, files.rb). */
export function registerRepositoryWriteRoutes(api: ApiRouter): void {
  const fileCommit = async (
    ctx: Parameters<Parameters<ApiRouter['post']>[2]>[0],
    params: z.infer<typeof fileDeleteParams>,
    fileAction: FileAction,
    changedMessage?: (path: string) => string,
  ) => {
    const user = currentUser(ctx);
    const deps = ctx.state.deps;
    const { project, policy } = await loadProject(ctx, params.id);
    if (!(await canPushToBranch(deps, project, policy, params.branch)))
      throw forbidden('You are not allowed to push into this branch');
    const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
    await createCommit(deps, project, user, gitDir, {
      branch: params.branch,
      message: params.commit_message,
      actions: [{ ...fileAction, lastCommitId: params.last_commit_id }],
      startBranch: params.start_branch,
      authorName: params.author_name,
      authorEmail: params.author_email,
      force: false,
      ...(changedMessage ? { changedMessage } : {}),
    });
  };
  const content = (params: z.infer<typeof fileWriteParams>) =>
    Buffer.from(params.content, params.encoding === 'base64' ? 'base64' : 'utf8');
  const mode = (params: z.infer<typeof fileWriteParams>) =>
    params.execute_filemode !== undefined ? { executable: params.execute_filemode } : {};

  api.post(
    '/projects/:id/repository/files/:file_path',
    { summary: 'Create a file', auth: 'required', params: fileWriteParams },
    async (ctx, params) => {
      await fileCommit(ctx, params, {
        action: 'create',
        path: params.file_path,
        content: content(params),
        ...mode(params),
      });
      created(ctx, { file_path: params.file_path, branch: params.branch });
    },
  );
  api.put(
    '/projects/:id/repository/files/:file_path',
    { summary: 'Update a file', auth: 'required', params: fileWriteParams },
    async (ctx, params) => {
      await fileCommit(
        ctx,
        params,
        { action: 'update', path: params.file_path, content: content(params), ...mode(params) },
        () => 'You are attempting to update a file that has changed since you started editing it.',
      );
      ctx.body = { file_path: params.file_path, branch: params.branch };
    },
  );
  api.delete(
    '/projects/:id/repository/files/:file_path',
    { summary: 'Delete a file', auth: 'required', params: fileDeleteParams },
    async (ctx, params) => {
      await fileCommit(ctx, params, { action: 'delete', path: params.file_path });
      noContent(ctx);
    },
  );

  api.post(
    '/projects/:id/repository/commits',
    { summary: 'Commit several file changes at once', auth: 'required', params: commitParams },
    async (ctx, params) => {
      const user = currentUser(ctx);
      const deps = ctx.state.deps;
      const { project, policy } = await loadProject(ctx, params.id);
      if (params.start_project !== undefined && params.start_project !== String(project.id)) {
        throw forbidden(`Project is not included in the fork network for ${params.start_project}`);
      }
      if (!(await canPushToBranch(deps, project, policy, params.branch)))
        throw forbidden('You are not allowed to push into this branch');
      const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
      const commitId = await createCommit(deps, project, user, gitDir, {
        branch: params.branch,
        message: params.commit_message,
        actions: params.actions.map(toAction),
        startBranch: params.start_branch,
        startSha: params.start_sha,
        authorName: params.author_name,
        authorEmail: params.author_email,
        force: params.force,
      });
      const object = await readObject(gitDir, commitId);
      if (!object) throw notFound('Commit');
      const commit = parseCommitObject(commitId, object.data);
      const pc = { baseUrl: deps.config.baseUrl };
      const stats = params.stats ? await commitStats(gitDir, commitId, commit.parentIds[0]) : undefined;
      created(ctx, presentCommitDetail(commit, project, pc, stats));
    },
  );
}
