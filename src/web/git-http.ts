import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { Middleware } from 'koa';
import { findUserByIdOrUsername } from '../db/queries/users.js';
import type { Namespace, Project, User } from '../db/schema.js';
import { probeStorageWrites } from '../git/errors.js';
import { readBranchTip, setHeadBranch } from '../git/repo-info.js';
import {
  advertiseRefs,
  type GitService,
  gitProtocol,
  parsePushLog,
  receiveHooksDir,
  runService,
  serviceHeader,
} from '../git/smart-http.js';
import type { AppContext, AppState } from '../http/context.js';
import { ApiError, storageUnavailable } from '../http/errors.js';
import { loadProjectPolicy, type ProjectPolicy } from '../policies/abilities.js';
import { AccessLevel } from '../policies/access-levels.js';
import { canDeleteProtectedBranch } from '../policies/branch-protection.js';
import { resolveActor, type ScopeRule } from '../services/auth.js';
import { findRunningBuildByToken } from '../services/ci/builds.js';
import type { Deps } from '../services/deps.js';
import {
  gitOverHttpAllowed,
  gitProtocolRefusal,
  instanceWritable,
  MAINTENANCE_PUSH_MESSAGE,
  maintenanceModeMessage,
} from '../services/instance-access.js';
import { checkUserPassword, isAccessLocked } from '../services/password-auth.js';
import { findProjectAndNamespace } from '../services/projects.js';
import { protectDefaultBranch, pushRulesForHook, renameProtectedBranch } from '../services/protected-branches.js';
import { recordRefChanges } from '../services/push-events.js';
import { acquireWriteLease } from '../services/write-leases.js';

/** `/<full path>[.git]/info/refs`, `/git-upload-pack`, `/git-receive-pack`. */
const ROUTE = /^\/(.+?)(?:\.git)?\/(info\/refs|git-upload-pack|git-receive-pack)$/;

const READ_SCOPES: ScopeRule[] = [{ scope: 'api' }, { scope: 'read_repository' }, { scope: 'write_repository' }];
const WRITE_SCOPES: ScopeRule[] = [{ scope: 'api' }, { scope: 'write_repository' }];

const MESSAGES = {
  denied:
    'HTTP Basic: Access denied. If a password was provided for Git authentication, the password was incorrect ' +
    "or you're required to use a token instead of a password. If a token was provided, it was either incorrect, " +
    'expired, or improperly scoped.',
  notFound: "The project you were looking for could not be found or you don't have permission to view it.",
  download: 'You are not allowed to download code from this project.',
  push: 'You are not allowed to push code to this project.',
  archived: 'You are not allowed to push code to an archived project.',
  readOnly: 'The repository is temporarily read-only. Please try again later.',
  dumb: 'Only the smart HTTP protocol is supported.',
} as const;

export class GitHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly challenge = false,
  ) {
    super(message);
  }
}

const deny = () => new GitHttpError(401, MESSAGES.denied, true);

interface Credentials {
  login: string;
  password: string;
}

function basicCredentials(ctx: AppContext): Credentials | null {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(ctx.get('Authorization'));
  if (!match) return null;
  const decoded = Buffer.from(match[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { login: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/**
 * The user behind Basic credentials, as GitLab's find_for_git_client: the password may be an
 * OAuth access token (login `oauth2`) or a personal access token (any login) with a scope that
 * allows this operation, else the user's own password. Anything else is 401 with a Basic challenge.
 */
async function gitUser(deps: Deps, credentials: Credentials | null, push: boolean): Promise<User | null> {
  if (!credentials) return null;
  // A value recognised as a token (expired, revoked, under-scoped) falls through to the password
  // check, as in GitLab, but is not counted as a wrong password: that would lock out a user whose
  // Git client still sends an old token (GitLab's caution in find_with_user_password).
  let recognisedToken = false;
  try {
    // GitLab's login `oauth2` takes an OAuth access token as the password (then a PAT, as Bearer does).
    const actor = await resolveActor(
      deps,
      credentials.login === 'oauth2' ? { bearer: credentials.password } : { privateToken: credentials.password },
      push ? WRITE_SCOPES : READ_SCOPES,
      'POST',
    );
    if (actor.user) {
      // GitLab's token checks for Git need a user who may log in: a locked account is refused.
      if (isAccessLocked(actor.user, deps.clock.now())) throw deny();
      return actor.user;
    }
  } catch (error) {
    if (error instanceof GitHttpError) throw error;
    // A blocked or deactivated user is told so, as GitLab does.
    if (error instanceof ApiError && error.status === 403 && !('error' in error.body)) {
      throw new GitHttpError(403, String(error.body.message).replace(/^403 Forbidden - /, ''));
    }
    recognisedToken = error instanceof ApiError && 'error' in error.body;
  }
  const user = credentials.login ? await findUserByIdOrUsername(deps.db, credentials.login) : undefined;
  const checked = await checkUserPassword(deps, user, credentials.password, { count: !recognisedToken });
  // GitLab's user_with_password_for_git: a password alone is not enough with two-factor
  // authentication on; such users must use a token.
  if (checked.ok && !checked.user.two_factor_enabled) return checked.user;
  throw deny();
}

export interface GitAccess {
  project: Project;
  namespace: Namespace;
  policy: ProjectPolicy;
  user: User | null;
  gitDir: string;
}

/** Who may do what on the repository at `fullPath`, as GitLab's git access checks decide. */
export async function authorizeGit(ctx: AppContext, fullPath: string, service: GitService): Promise<GitAccess> {
  const deps = ctx.state.deps;
  const push = service === 'git-receive-pack';
  const credentials = basicCredentials(ctx);
  if (credentials?.login === JOB_TOKEN_LOGIN) return authorizeJobToken(deps, credentials.password, fullPath, push);
  const user = await gitUser(deps, credentials, push);
  const found = fullPath.includes('/') ? await findProjectAndNamespace(deps, fullPath) : undefined;
  // Anonymous callers are asked for credentials before anything is revealed.
  if (!user && (push || !found)) throw deny();
  if (!(await gitOverHttpAllowed(deps))) throw new GitHttpError(403, gitProtocolRefusal('http'));
  if (!found) throw new GitHttpError(404, MESSAGES.notFound);
  const { project, namespace } = found;
  const policy = await loadProjectPolicy(deps, user, project, namespace);
  if (!policy.can('read_project')) {
    if (!user) throw deny();
    throw new GitHttpError(404, MESSAGES.notFound);
  }
  if (!policy.can('read_code')) {
    if (!user) throw deny();
    throw new GitHttpError(403, MESSAGES.download);
  }
  if (push) {
    if (!(await instanceWritable(deps, user))) {
      const banner = await maintenanceModeMessage(deps);
      throw new GitHttpError(403, banner ? `${MAINTENANCE_PUSH_MESSAGE}\n${banner}` : MAINTENANCE_PUSH_MESSAGE);
    }
    if (project.archived && policy.level >= AccessLevel.DEVELOPER) throw new GitHttpError(403, MESSAGES.archived);
    if (!policy.can('push_code')) throw new GitHttpError(403, MESSAGES.push);
    if (project.repository_read_only) throw new GitHttpError(403, MESSAGES.readOnly);
  }
  const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
  if (push) {
    // A storage mounted read-only or full: said plainly before git starts, as the API says it.
    const fault = await probeStorageWrites(gitDir);
    if (fault) throw new GitHttpError(503, storageUnavailable(fault).message);
  }
  return { project, namespace, policy, user, gitDir };
}

/** The login with which a CI job clones its project using its job token (CI_JOB_TOKEN). */
const JOB_TOKEN_LOGIN = 'gitlab-ci-token';

/**
 * A running job's token reads its own project's repository, as the job's user may, and nothing
 * else: other projects are not found, pushes are refused, and the token stops when the job ends.
 */
async function authorizeJobToken(deps: Deps, token: string, fullPath: string, push: boolean): Promise<GitAccess> {
  const build = await findRunningBuildByToken(deps, token);
  if (!build) throw deny();
  const found = fullPath.includes('/') ? await findProjectAndNamespace(deps, fullPath) : undefined;
  if (!found || found.project.id !== build.project_id) throw new GitHttpError(404, MESSAGES.notFound);
  if (push) throw new GitHttpError(403, MESSAGES.push);
  if (!(await gitOverHttpAllowed(deps))) throw new GitHttpError(403, gitProtocolRefusal('http'));
  const { project, namespace } = found;
  const user = build.user_id ? ((await findUserByIdOrUsername(deps.db, String(build.user_id))) ?? null) : null;
  const policy = await loadProjectPolicy(deps, user, project, namespace);
  if (!policy.can('read_code')) throw new GitHttpError(403, MESSAGES.download);
  const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
  return { project, namespace, policy, user, gitDir };
}

function requestBody(ctx: AppContext): Readable {
  const encoding = ctx.get('Content-Encoding').toLowerCase();
  if (encoding === 'gzip' || encoding === 'x-gzip') {
    const gunzip = createGunzip();
    ctx.req.pipe(gunzip);
    return gunzip;
  }
  return ctx.req;
}

function noCache(ctx: AppContext): void {
  ctx.set('Cache-Control', 'no-cache, max-age=0, must-revalidate');
  ctx.set('Expires', 'Fri, 01 Jan 1980 00:00:00 GMT');
  ctx.set('Pragma', 'no-cache');
}

async function advertise(ctx: AppContext, access: GitAccess, service: GitService): Promise<void> {
  const protocol = gitProtocol(ctx.get('Git-Protocol'));
  const git = advertiseRefs(access.gitDir, service, { protocol });
  const out = new PassThrough();
  // Protocol v2 starts with the capability advertisement itself, as git http-backend does.
  if (!(service === 'git-upload-pack' && protocol?.includes('version=2'))) out.write(serviceHeader(service));
  git.stdout.pipe(out);
  git.done.catch((error: Error) => out.destroy(error));
  ctx.status = 200;
  ctx.type = `application/x-${service}-advertisement`;
  noCache(ctx);
  ctx.body = out;
}

async function serve(ctx: AppContext, access: GitAccess, service: GitService): Promise<void> {
  const deps = ctx.state.deps;
  if (ctx.get('Content-Type') !== `application/x-${service}-request`) {
    throw new GitHttpError(415, `Content-Type must be application/x-${service}-request`);
  }
  const protocol = gitProtocol(ctx.get('Git-Protocol'));
  ctx.status = 200;
  ctx.type = `application/x-${service}-result`;
  noCache(ctx);
  if (service === 'git-upload-pack') {
    const git = runService(access.gitDir, service, requestBody(ctx), { protocol });
    git.done.catch((error: Error) => git.stdout.destroy(error));
    ctx.res.on('close', () => git.kill());
    ctx.body = git.stdout;
    return;
  }
  // Receive: a write lease (taken with the read-only check, before git reads a byte) lets a
  // storage move wait for this push; it ends with git, however the push ends.
  const lease = await acquireWriteLease(deps, access.project, 'push');
  if (!lease) throw new GitHttpError(403, MESSAGES.readOnly);
  let git: ReturnType<typeof runService>;
  let logDir: string;
  try {
    // Our hooks enforce protection (the caller's verdict per protected branch, in a file: a
    // project may have more rules than an environment variable holds); post-receive tells us
    // what changed.
    const { project } = access;
    const rules = await pushRulesForHook(deps, project, access.policy);
    logDir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-push-'));
    await fs.writeFile(path.join(logDir, 'protected'), `${rules}\n`);
    git = runService(access.gitDir, service, requestBody(ctx), {
      protocol,
      config: { 'core.hooksPath': receiveHooksDir() },
      env: {
        DEPOT_DEFAULT_BRANCH: project.default_branch ?? '',
        DEPOT_PROTECTED_FILE: path.join(logDir, 'protected'),
        DEPOT_CAN_DELETE_PROTECTED: canDeleteProtectedBranch(access.policy) ? '1' : '0',
        DEPOT_PUSH_LOG: path.join(logDir, 'refs'),
      },
    });
  } catch (error) {
    await lease.release();
    throw error;
  }
  const out = new PassThrough();
  git.stdout.pipe(out, { end: false });
  git.done
    .then(() => afterPush(deps, access, path.join(logDir, 'refs')))
    .catch((error: unknown) => deps.logger.warn({ err: error, project: access.project.id }, 'push failed'))
    .finally(() => {
      void lease.release().finally(() => out.end());
      void fs.rm(logDir, { recursive: true, force: true });
    });
  ctx.body = out;
}

/** Records push events and, for a first push, points the default branch at what was pushed. */
async function afterPush(deps: Deps, access: GitAccess, pushLog: string): Promise<void> {
  const text = await fs.readFile(pushLog, 'utf8').catch(() => '');
  const updates = parsePushLog(text);
  if (updates.length === 0 || !access.user) return;
  const { project, gitDir } = access;
  const current = project.default_branch ? await readBranchTip(gitDir, project.default_branch) : null;
  if (!current) {
    const created = updates.find((u) => u.ref.startsWith('refs/heads/') && !/^0+$/.test(u.newId));
    if (created) {
      const branch = created.ref.slice('refs/heads/'.length);
      await setHeadBranch(gitDir, branch);
      // GitLab protects the default branch its first push names (ProtectDefaultBranchService):
      // the rule made at creation for the branch named then follows the default branch.
      await deps.db.transaction().execute(async (tx) => {
        await tx.updateTable('projects').set({ default_branch: branch }).where('id', '=', project.id).execute();
        if (project.default_branch && project.default_branch !== branch) {
          await renameProtectedBranch(tx, project.id, project.default_branch, branch);
        }
        await protectDefaultBranch(tx, project, branch, deps.clock.now());
      });
    }
  }
  await recordRefChanges(deps, project, access.user, gitDir, updates);
}

/** Git's smart HTTP protocol at `<BASE_URL>/<full path>.git`, on native git. */
export function gitHttp(): Middleware<AppState, AppContext> {
  return async (ctx, next) => {
    const match = ROUTE.exec(ctx.path);
    if (!match) return next();
    const [, fullPath, action] = match as unknown as [string, string, string];
    const wanted: GitService | null =
      action === 'info/refs'
        ? ctx.query.service === 'git-upload-pack' || ctx.query.service === 'git-receive-pack'
          ? ctx.query.service
          : null
        : (action as GitService);
    const method = action === 'info/refs' ? 'GET' : 'POST';
    if (ctx.method !== method && !(method === 'GET' && ctx.method === 'HEAD')) return next();
    try {
      if (!wanted) throw new GitHttpError(403, MESSAGES.dumb);
      if (fullPath.includes('\0') || fullPath.split('/').some((s) => s === '' || s === '.' || s === '..')) {
        throw new GitHttpError(404, MESSAGES.notFound);
      }
      const access = await authorizeGit(ctx, fullPath, wanted);
      if (action === 'info/refs') await advertise(ctx, access, wanted);
      else await serve(ctx, access, wanted);
    } catch (error) {
      if (!(error instanceof GitHttpError)) throw error;
      ctx.status = error.status;
      ctx.type = 'text/plain';
      ctx.body = `${error.message}\n`;
      if (error.challenge) ctx.set('WWW-Authenticate', 'Basic realm="GitLab"');
    }
  };
}
