import type { Namespace, Project, User } from '../db/schema.js';
import type { AppContext } from '../http/context.js';
import { ApiError, forbidden, MovedPermanently, notFound, preconditionFailed, unauthorized } from '../http/errors.js';
import { type GroupPolicy, loadGroupPolicy, loadProjectPolicy, type ProjectPolicy } from '../policies/abilities.js';
import type { AuditActor } from '../services/audit-events.js';
import { findGroup } from '../services/groups.js';
import { findProjectAndNamespace } from '../services/projects.js';

/** The signed-in user, or 401 (for routes whose `auth` is optional but this branch needs one). */
export function currentUser(ctx: AppContext): User {
  const user = ctx.state.actor.user;
  if (!user) throw unauthorized();
  return user;
}

/** Requires an administrator: 401 for anonymous callers, 403 for other users. */
export function requireAdmin(ctx: AppContext): User {
  const user = currentUser(ctx);
  if (!user.admin) throw forbidden();
  return user;
}

export interface LoadedProject {
  project: Project;
  namespace: Namespace;
  policy: ProjectPolicy;
}

/** Loads `:id` as a project the caller may read, or 404 `Project Not Found`. */
export async function loadProject(ctx: AppContext, id: string): Promise<LoadedProject> {
  const deps = ctx.state.deps;
  const found = await findProjectAndNamespace(deps, id);
  if (!found) throw notFound('Project');
  const { project, namespace } = found;
  const policy = await loadProjectPolicy(deps, ctx.state.actor.user, project, namespace);
  if (!policy.can('read_project')) throw notFound('Project');
  if (id === ctx.params.id) refuseMovedPath(ctx, id, project);
  return { project, namespace, policy };
}

/**
 * A project named in the URL by a path it had before a rename or transfer (its redirect route):
 * GET is sent on with 301 to the same URL naming the project by id, any other method is refused
 * with 405, as GitLab's find_project! does. A path that differs only in case is no move.
 */
export function refuseMovedPath(ctx: AppContext, id: string, project: Project): void {
  if (!id.includes('/') || id.toLowerCase() === project.full_path.toLowerCase()) return;
  if (ctx.method !== 'GET') throw new ApiError(405, { message: 'Non GET methods are not allowed for moved projects' });
  // The segment the route names `:id`, in the URL as the client wrote it.
  const route = ctx._matchedRoute;
  const index = typeof route === 'string' ? route.split('/').indexOf(':id') : -1;
  const segments = ctx.path.split('/');
  if (index < 0 || index >= segments.length) return;
  segments[index] = String(project.id);
  throw new MovedPermanently(`${ctx.state.deps.config.baseUrl}${segments.join('/')}${ctx.search}`);
}

export interface LoadedRepository extends LoadedProject {
  /** Absolute path of the project's bare repository. */
  gitDir: string;
}

/**
 * Loads `:id` for a repository endpoint (GitLab's `authorize_read_code!`): 404 `Project Not Found`
 * when the caller cannot see the project, 403 when they see it but may not read its code.
 */
export async function loadRepository(ctx: AppContext, id: string): Promise<LoadedRepository> {
  const loaded = await loadProject(ctx, id);
  loaded.policy.authorize('read_code');
  const gitDir = ctx.state.deps.storages.repositoryPath(loaded.project.repository_storage, loaded.project.id);
  return { ...loaded, gitDir };
}

export interface LoadedGroup {
  group: Namespace;
  policy: GroupPolicy;
}

/** Loads `:id` as a group the caller may read, or 404 `Group Not Found`. */
export async function loadGroup(ctx: AppContext, id: string): Promise<LoadedGroup> {
  const deps = ctx.state.deps;
  const group = await findGroup(deps, id);
  if (!group) throw notFound('Group');
  const policy = await loadGroupPolicy(deps, ctx.state.actor.user, group);
  if (!policy.can('read_group')) throw notFound('Group');
  return { group, policy };
}

/** 201 with a body. */
export function created(ctx: AppContext, body: unknown): void {
  ctx.status = 201;
  ctx.body = body;
}

/** 202 `{"message":"202 Accepted"}`, GitLab's `accepted!`. */
export function accepted(ctx: AppContext): void {
  ctx.status = 202;
  ctx.body = { message: '202 Accepted' };
}

/** 204 with an empty body. */
export function noContent(ctx: AppContext): void {
  ctx.status = 204;
  ctx.body = null;
}

/**
 * GitLab's `check_unmodified_since!` (used by `destroy_conditionally!`): 412 when the resource
 * changed after the time in `If-Unmodified-Since`.
 */
export function checkUnmodifiedSince(ctx: AppContext, updatedAt: Date): void {
  const header = ctx.get('If-Unmodified-Since');
  const since = header ? Date.parse(header) : Number.NaN;
  if (!Number.isNaN(since) && updatedAt.getTime() > since) throw preconditionFailed();
}

/** The caller as the audit trail records them. */
export function auditActor(ctx: AppContext, user: User): AuditActor {
  return { id: user.id, name: user.name, ipAddress: ctx.ip };
}
