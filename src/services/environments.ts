import { createHash } from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import { UNIQUE_VIOLATION } from '../db/database.js';
import type { Build, DB, Deployment, Environment, Pipeline, Project, User } from '../db/schema.js';
import { parseDuration } from './application-settings.js';
import { cloneForRetry, playBuild } from './ci/pipelines.js';
import type { Deps } from './deps.js';

/**
 * Environments and deployments (GitLab's app/models/environment.rb, deployment.rb and
 * app/services/environments/): name and slug rules, deployments that follow their CI job, stop
 * (with the `on_stop` job), auto-stop and the review-app clean-up.
 */

type Executor = Transaction<DB> | Deps['db'];

export const ENVIRONMENT_STATES = ['available', 'stopping', 'stopped'] as const;
export const ENVIRONMENT_TIERS = ['production', 'staging', 'testing', 'development', 'other'] as const;
export const DEPLOYMENT_STATUSES = [
  'created',
  'running',
  'success',
  'failed',
  'canceled',
  'skipped',
  'blocked',
] as const;
/** The review-app clean-up deletes what it schedules this long after the request (GitLab: 1 week). */
export const REVIEW_APP_DELETION_DELAY_MS = 7 * 24 * 60 * 60 * 1000;
/** `before` of the review-app clean-up when not given (GitLab: 30 days ago). */
export const REVIEW_APP_DEFAULT_AGE_MS = 30 * 24 * 60 * 60 * 1000;

export const NAME_MESSAGE =
  "can contain only letters, digits, '-', '_', '/', '$', '{', '}', '.', and spaces, but it cannot start or end with '/'";

/** GitLab's environment name rule (Gitlab::Regex.environment_name_regex). */
export function environmentNameErrors(name: string): string[] {
  const errors: string[] = [];
  if (name.trim() === '') errors.push("can't be blank");
  else if (!/^[a-zA-Z0-9_/${}. -]+$/.test(name) || name.startsWith('/') || name.endsWith('/')) {
    errors.push(NAME_MESSAGE);
  }
  if (name.length > 255) errors.push('is too long (maximum is 255 characters)');
  return errors;
}

/** GitLab's external_url rule: an http(s) address of at most 255 characters. */
export function externalUrlErrors(url: string): string[] {
  const errors: string[] = [];
  if (url.length > 255) errors.push('is too long (maximum is 255 characters)');
  let parsed: URL | null = null;
  try {
    parsed = new URL(url);
  } catch {
    errors.push('must be a valid URL');
  }
  if (parsed && !['http:', 'https:'].includes(parsed.protocol)) {
    errors.push('is blocked: Only allowed schemes are http, https');
  }
  return errors;
}

/**
 * GitLab's Gitlab::Slug::Environment: lower-case letters, digits and single dashes, starting with
 * a letter, at most 24 characters. When slugging changed the name (or it is too long), the first 17
 * characters get a 6-character suffix from the name's SHA-256 (what GitLab calls its random suffix:
 * random-looking, but the same name always gets the same one).
 */
export function environmentSlug(name: string): string {
  let slug = name.toLowerCase().replace(/[^a-z0-9]/g, '-');
  if (!/^[a-z]/.test(slug)) slug = `env-${slug}`;
  slug = slug.replace(/-+/g, '-');
  if (slug.length > 24 || slug !== name) {
    slug = slug.slice(0, 17);
    if (!slug.endsWith('-')) slug += '-';
    const digest = createHash('sha256').update(name).digest('hex');
    return slug + BigInt(`0x${digest}`).toString(36).slice(-6);
  }
  return slug.replace(/-$/, '');
}

/** GitLab's Environment#guess_tier from the name. */
export function guessTier(name: string): string {
  if (/(dev|review|trunk)/i.test(name)) return 'development';
  if (/(test|tst|int|ac(ce|)pt|qa|qc|control|quality)/i.test(name)) return 'testing';
  if (/(st(a|)g|mod(e|)l|pre|demo|non)/i.test(name)) return 'staging';
  if (/(pr(o|)d|live)/i.test(name)) return 'production';
  return 'other';
}

/** Validation errors of an environment's fields, by field (GitLab's `{"message": {field: [...]}}`). */
export type FieldErrors = Record<string, string[]>;

export type EnvironmentWrite = { ok: true; environment: Environment } | { ok: false; errors: FieldErrors };

function validate(fields: { name?: string; external_url?: string | null; description?: string }): FieldErrors {
  const errors: FieldErrors = {};
  if (fields.description !== undefined && fields.description.length > 10000) {
    errors.description = ['is too long (maximum is 10000 characters)'];
  }
  if (fields.name !== undefined) {
    const e = environmentNameErrors(fields.name);
    if (e.length > 0) errors.name = e;
  }
  if (fields.external_url) {
    const e = externalUrlErrors(fields.external_url);
    if (e.length > 0) errors.external_url = e;
  }
  return errors;
}

const isUniqueViolation = (error: unknown, constraint: string) =>
  (error as { code?: string; constraint?: string }).code === UNIQUE_VIOLATION &&
  (error as { constraint?: string }).constraint === constraint;

/** POST /projects/:id/environments. */
export async function createEnvironment(
  deps: Deps,
  project: Project,
  input: { name: string; external_url?: string; tier?: string; description?: string },
): Promise<EnvironmentWrite> {
  const errors = validate(input);
  if (Object.keys(errors).length > 0) return { ok: false, errors };
  const now = deps.clock.now();
  try {
    const environment = await deps.db
      .insertInto('environments')
      .values({
        project_id: project.id,
        name: input.name,
        slug: environmentSlug(input.name),
        external_url: input.external_url || null,
        tier: input.tier ?? guessTier(input.name),
        description: input.description ?? null,
        created_at: now,
        updated_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { ok: true, environment };
  } catch (error) {
    if (isUniqueViolation(error, 'environments_project_name')) {
      return { ok: false, errors: { name: ['has already been taken'] } };
    }
    if (isUniqueViolation(error, 'environments_project_slug')) {
      return { ok: false, errors: { slug: ['has already been taken'] } };
    }
    throw error;
  }
}

/** PUT /projects/:id/environments/:environment_id (renaming is deprecated but still allowed, as in GitLab). */
export async function updateEnvironment(
  deps: Deps,
  environment: Environment,
  input: { name?: string; external_url?: string; tier?: string; description?: string },
): Promise<EnvironmentWrite> {
  const errors = validate(input);
  if (Object.keys(errors).length > 0) return { ok: false, errors };
  const changes: Partial<Environment> = {};
  if (input.name !== undefined && input.name !== environment.name) {
    changes.name = input.name;
    changes.slug = environmentSlug(input.name);
  }
  if (input.external_url !== undefined) changes.external_url = input.external_url || null;
  if (input.tier !== undefined) changes.tier = input.tier;
  if (input.description !== undefined) changes.description = input.description;
  if (Object.keys(changes).length === 0) return { ok: true, environment };
  try {
    const updated = await deps.db
      .updateTable('environments')
      .set({ ...changes, updated_at: deps.clock.now() })
      .where('id', '=', environment.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { ok: true, environment: updated };
  } catch (error) {
    if (isUniqueViolation(error, 'environments_project_name')) {
      return { ok: false, errors: { name: ['has already been taken'] } };
    }
    if (isUniqueViolation(error, 'environments_project_slug')) {
      return { ok: false, errors: { slug: ['has already been taken'] } };
    }
    throw error;
  }
}

export async function findEnvironment(db: Executor, projectId: number, id: number): Promise<Environment | undefined> {
  return db
    .selectFrom('environments')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The environment of a name, made when missing (CI jobs and POST /deployments). */
export async function findOrCreateEnvironment(
  db: Executor,
  projectId: number,
  name: string,
  now: Date,
): Promise<Environment | undefined> {
  await db
    .insertInto('environments')
    .values({
      project_id: projectId,
      name,
      slug: environmentSlug(name),
      tier: guessTier(name),
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.doNothing())
    .execute();
  return db
    .selectFrom('environments')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('name', '=', name)
    .executeTakeFirst(); // undefined only when another environment already has this name's slug
}

/** The last successful deployment of each environment (GitLab's Environment#last_deployment). */
export async function lastDeployments(db: Executor, environmentIds: number[]): Promise<Map<number, Deployment>> {
  if (environmentIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('deployments')
    .selectAll()
    .distinctOn('environment_id')
    .where('environment_id', 'in', environmentIds)
    .where('status', '=', 'success')
    .orderBy('environment_id')
    .orderBy('id', 'desc')
    .execute();
  return new Map(rows.map((d) => [d.environment_id, d]));
}

/** The next deployment number of a project; serialised per project by an advisory lock. */
async function nextDeploymentIid(tx: Transaction<DB>, projectId: number): Promise<number> {
  await sql`SELECT pg_advisory_xact_lock(20023, ${projectId})`.execute(tx);
  const row = await tx
    .selectFrom('deployments')
    .select((eb) => eb.fn.max('iid').as('iid'))
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  return Number(row?.iid ?? 0) + 1;
}

const inTransaction = <T>(db: Executor, work: (tx: Transaction<DB>) => Promise<T>): Promise<T> =>
  'isTransaction' in db && db.isTransaction
    ? work(db as Transaction<DB>)
    : (db as Deps['db']).transaction().execute(work);

/** Marks an environment stopped (clears its auto-stop). */
async function markStopped(db: Executor, environmentId: number, now: Date): Promise<void> {
  await db
    .updateTable('environments')
    .set({ state: 'stopped', auto_stop_at: null, updated_at: now })
    .where('id', '=', environmentId)
    .execute();
}

/** A deployment that finished: its environment is available again, with the job's URL and auto-stop. */
async function deploymentSucceeded(
  db: Executor,
  environmentId: number,
  url: string | undefined,
  autoStopIn: string | undefined,
  now: Date,
): Promise<void> {
  const seconds = autoStopIn ? parseDuration(autoStopIn) : undefined;
  await db
    .updateTable('environments')
    .set({
      state: 'available',
      auto_delete_at: null,
      ...(url && externalUrlErrors(url).length === 0 ? { external_url: url } : {}),
      ...(autoStopIn !== undefined ? { auto_stop_at: seconds ? new Date(now.getTime() + seconds * 1000) : null } : {}),
      updated_at: now,
    })
    .where('id', '=', environmentId)
    .execute();
}

// ---- CI ----------------------------------------------------------------------------------------

interface JobEnvironment {
  name: string;
  url?: string;
  action?: string;
  on_stop?: string;
  auto_stop_in?: string;
}

const refSlug = (ref: string) =>
  ref
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '-')
    .slice(0, 63)
    .replace(/^-+|-+$/g, '');

/** `$VAR` and `${VAR}` of the variables a job's environment may use (unknown ones become empty). */
function expand(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (_m, a, b) => vars[a ?? b] ?? '');
}

function jobVariables(project: Project, pipeline: Pipeline, build: Build): Record<string, string> {
  const options = build.options as { variables?: Record<string, string> };
  return {
    CI_PROJECT_ID: String(project.id),
    CI_PROJECT_NAME: project.path,
    CI_PROJECT_PATH: project.full_path,
    CI_PROJECT_PATH_SLUG: refSlug(project.full_path),
    CI_DEFAULT_BRANCH: project.default_branch ?? '',
    CI_PIPELINE_ID: String(pipeline.id),
    CI_PIPELINE_IID: String(pipeline.iid),
    CI_JOB_ID: String(build.id),
    CI_JOB_NAME: build.name,
    CI_COMMIT_SHA: build.sha,
    CI_COMMIT_SHORT_SHA: build.sha.slice(0, 8),
    CI_COMMIT_REF_NAME: build.ref,
    CI_COMMIT_REF_SLUG: refSlug(build.ref),
    ...(build.tag ? { CI_COMMIT_TAG: build.ref } : { CI_COMMIT_BRANCH: build.ref }),
    ...(options.variables ?? {}),
    ...Object.fromEntries((pipeline.variables ?? []).map((v) => [v.key, v.value])),
  };
}

/**
 * GitLab's CI_ENVIRONMENT_* variables of a job with `environment:` (name and URL expanded, the
 * environment's slug and tier); none for other jobs.
 */
export async function environmentJobVariables(
  db: Executor,
  project: Project,
  pipeline: Pipeline,
  build: Build,
): Promise<Record<string, string>> {
  const env = (build.options as { environment?: JobEnvironment | null }).environment;
  if (!env) return {};
  const vars = jobVariables(project, pipeline, build);
  const name = expand(env.name, vars).trim();
  const row = await db
    .selectFrom('environments')
    .selectAll()
    .where('project_id', '=', project.id)
    .where('name', '=', name)
    .executeTakeFirst();
  const slug = row?.slug ?? environmentSlug(name);
  const url = env.url
    ? expand(env.url, { ...vars, CI_ENVIRONMENT_NAME: name, CI_ENVIRONMENT_SLUG: slug })
    : row?.external_url;
  return {
    CI_ENVIRONMENT_NAME: name,
    CI_ENVIRONMENT_SLUG: slug,
    ...(url ? { CI_ENVIRONMENT_URL: url } : {}),
    CI_ENVIRONMENT_ACTION: env.action ?? 'start',
    CI_ENVIRONMENT_TIER: row?.tier ?? guessTier(name),
  };
}

/** The deployment status that follows a job's status (GitLab's Deployment state machine). */
export function deploymentStatusOf(buildStatus: string): string {
  switch (buildStatus) {
    case 'running':
      return 'running';
    case 'success':
      return 'success';
    case 'failed':
      return 'failed';
    case 'canceled':
      return 'canceled';
    case 'skipped':
      return 'skipped';
    default:
      return 'created';
  }
}

const FINISHED = ['success', 'failed', 'canceled', 'skipped'];

/**
 * The one hook from CI: called by processPipeline (inside its transaction, with the pipeline's row
 * locked) after job statuses moved. A job with `environment:` (action start, the default) has a
 * deployment to that environment, made on first sight and following the job's status; a stop job
 * (`action: stop`) that succeeded stops its environment.
 */
export async function syncPipelineDeployments(
  tx: Transaction<DB>,
  pipeline: Pipeline,
  builds: Build[],
  now: Date,
): Promise<void> {
  const withEnvironment = builds.filter((b) => (b.options as { environment?: JobEnvironment | null }).environment);
  if (withEnvironment.length === 0) return;
  const project = await tx.selectFrom('projects').selectAll().where('id', '=', pipeline.project_id).executeTakeFirst();
  if (!project) return;
  const existing = new Map(
    (
      await tx
        .selectFrom('deployments')
        .selectAll()
        .where(
          'deployable_id',
          'in',
          withEnvironment.map((b) => b.id),
        )
        .execute()
    ).map((d) => [d.deployable_id, d]),
  );
  for (const build of withEnvironment) {
    const env = (build.options as { environment: JobEnvironment }).environment;
    const action = env.action ?? 'start';
    const vars = jobVariables(project, pipeline, build);
    const name = expand(env.name, vars).trim();
    if (environmentNameErrors(name).length > 0) continue;
    if (action === 'stop') {
      const environment = await tx
        .selectFrom('environments')
        .selectAll()
        .where('project_id', '=', project.id)
        .where('name', '=', name)
        .executeTakeFirst();
      if (!environment) continue;
      // processPipeline runs again whenever any job of the pipeline moves: a stop job acts once.
      if (environment.last_stop_build_id === build.id) continue;
      if (build.status === 'success') {
        await tx
          .updateTable('environments')
          .set({ state: 'stopped', auto_stop_at: null, last_stop_build_id: build.id, updated_at: now })
          .where('id', '=', environment.id)
          .execute();
      } else if (['failed', 'canceled'].includes(build.status)) {
        // A stop job that did not succeed leaves a stopping environment as it was.
        await tx
          .updateTable('environments')
          .set({
            ...(environment.state === 'stopping' ? { state: 'available' } : {}),
            last_stop_build_id: build.id,
            updated_at: now,
          })
          .where('id', '=', environment.id)
          .execute();
      }
      continue;
    }
    if (action !== 'start') continue;
    const status = deploymentStatusOf(build.status);
    let deployment = existing.get(build.id);
    if (!deployment) {
      const environment = await findOrCreateEnvironment(tx, project.id, name, now);
      if (!environment) continue;
      const iid = await nextDeploymentIid(tx, project.id);
      deployment = await tx
        .insertInto('deployments')
        .values({
          iid,
          project_id: project.id,
          environment_id: environment.id,
          ref: build.ref,
          tag: build.tag,
          sha: build.sha,
          user_id: build.user_id,
          deployable_id: build.id,
          status,
          on_stop: env.on_stop ?? null,
          created_at: now,
          updated_at: now,
          finished_at: FINISHED.includes(status) ? now : null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      if (status === 'success') {
        const slugVars = { ...vars, CI_ENVIRONMENT_NAME: name, CI_ENVIRONMENT_SLUG: environment.slug };
        await deploymentSucceeded(
          tx,
          environment.id,
          env.url ? expand(env.url, slugVars) : undefined,
          env.auto_stop_in,
          now,
        );
      }
      continue;
    }
    if (deployment.status === status) continue;
    // A finished deployment does not move again (a retry makes a new job and a new deployment).
    if (FINISHED.includes(deployment.status)) continue;
    await tx
      .updateTable('deployments')
      .set({
        status,
        user_id: build.user_id ?? deployment.user_id,
        updated_at: now,
        finished_at: FINISHED.includes(status) ? now : null,
      })
      .where('id', '=', deployment.id)
      .execute();
    if (status === 'success') {
      const environment = await tx
        .selectFrom('environments')
        .selectAll()
        .where('id', '=', deployment.environment_id)
        .executeTakeFirstOrThrow();
      const slugVars = { ...vars, CI_ENVIRONMENT_NAME: name, CI_ENVIRONMENT_SLUG: environment.slug };
      await deploymentSucceeded(
        tx,
        environment.id,
        env.url ? expand(env.url, slugVars) : undefined,
        env.auto_stop_in,
        now,
      );
    }
  }
}

// ---- Stop --------------------------------------------------------------------------------------

/**
 * The job that stops an environment (GitLab's Environment#stop_actions): the `on_stop` job of its
 * last successful deployment, in that deployment's pipeline, when it can be played.
 */
export async function stopAction(db: Executor, environment: Environment): Promise<Build | undefined> {
  const last = (await lastDeployments(db, [environment.id])).get(environment.id);
  if (!last?.on_stop || !last.deployable_id) return undefined;
  const deployable = await db
    .selectFrom('ci_builds')
    .select('pipeline_id')
    .where('id', '=', last.deployable_id)
    .executeTakeFirst();
  if (!deployable) return undefined;
  return db
    .selectFrom('ci_builds')
    .selectAll()
    .where('pipeline_id', '=', deployable.pipeline_id)
    .where('name', '=', last.on_stop)
    .where('retried', '=', false)
    .orderBy('id', 'desc')
    .executeTakeFirst();
}

/**
 * Stops an environment (GitLab's Environments::StopService): with a stop job, the environment is
 * `stopping` and the job is played (a manual job) or run again (a finished one); the job's success
 * stops it. Without one, or with `force`, it is stopped at once.
 */
export async function stopEnvironment(
  deps: Deps,
  environment: Environment,
  user: User | null,
  options: { force?: boolean } = {},
): Promise<Environment> {
  const now = deps.clock.now();
  if (environment.state === 'stopped') return environment;
  const action = options.force ? undefined : await stopAction(deps.db, environment);
  const actor =
    user ??
    (action?.user_id
      ? await deps.db.selectFrom('users').selectAll().where('id', '=', action.user_id).executeTakeFirst()
      : undefined);
  if (action && actor && (action.status === 'manual' || FINISHED.includes(action.status))) {
    // The job first: a crash between the two leaves an available environment whose stop job
    // still runs (and stops it), never one stuck in `stopping`.
    if (action.status === 'manual') await playBuild(deps, action, actor);
    else await cloneForRetry(deps, action, actor);
    await deps.db
      .updateTable('environments')
      .set({ state: 'stopping', auto_stop_at: null, updated_at: now })
      .where('id', '=', environment.id)
      .where('state', '=', 'available')
      .execute();
  } else if (!action || !['pending', 'running'].includes(action.status)) {
    await markStopped(deps.db, environment.id, now);
  }
  return (await findEnvironment(deps.db, environment.project_id, environment.id)) as Environment;
}

// ---- Review apps and the recurring jobs -------------------------------------------------------

export interface ReviewAppsResult {
  status: 200 | 400;
  scheduled: Environment[];
  unprocessable: Environment[];
  message?: string;
}

/**
 * DELETE /projects/:id/environments/review_apps (GitLab's ScheduleToDeleteReviewAppsService and
 * Environment.stopped_review_apps): stopped environments in the `review/` folder, not yet
 * scheduled, created before `before`, oldest first, at most `limit`; unless a dry run, they are
 * deleted one week later.
 */
export async function scheduleReviewAppsDeletion(
  deps: Deps,
  project: Project,
  input: { before: Date; limit: number; dryRun: boolean },
): Promise<ReviewAppsResult> {
  const environments = await deps.db
    .selectFrom('environments')
    .selectAll()
    .where('project_id', '=', project.id)
    .where('state', '=', 'stopped')
    .where('auto_delete_at', 'is', null)
    .where('name', 'like', 'review/%')
    .where('created_at', '<', input.before)
    .orderBy('created_at')
    .orderBy('id')
    .limit(input.limit)
    .execute();
  if (environments.length === 0) {
    return {
      status: 400,
      scheduled: [],
      unprocessable: [],
      message:
        'No environments found for scheduled deletion. Either your query did not match any environments (default parameters match environments that are 30 days or older), or you have insufficient permissions to delete matching environments.',
    };
  }
  if (!input.dryRun) {
    const now = deps.clock.now();
    await deps.db
      .updateTable('environments')
      .set({ auto_delete_at: new Date(now.getTime() + REVIEW_APP_DELETION_DELAY_MS), updated_at: now })
      .where(
        'id',
        'in',
        environments.map((e) => e.id),
      )
      .where('auto_delete_at', 'is', null)
      .execute();
  }
  return { status: 200, scheduled: environments, unprocessable: [] };
}

/** Deletes stopped environments whose scheduled deletion is due (GitLab's AutoDeleteCronWorker). */
export async function deleteDueEnvironments(deps: Deps): Promise<number> {
  const rows = await deps.db
    .deleteFrom('environments')
    .where('auto_delete_at', '<=', deps.clock.now())
    .where('state', '=', 'stopped')
    .returning('id')
    .execute();
  return rows.length;
}

/** Stops environments whose auto_stop_at has passed, running their stop job (GitLab's AutoStopCronWorker). */
export async function stopDueEnvironments(deps: Deps): Promise<number> {
  const due = await deps.db
    .selectFrom('environments')
    .selectAll()
    .where('auto_stop_at', '<=', deps.clock.now())
    .where('state', '=', 'available')
    .orderBy('auto_stop_at')
    .limit(1000)
    .execute();
  for (const environment of due) await stopEnvironment(deps, environment, null);
  return due.length;
}

// ---- Deployments through the API --------------------------------------------------------------

export type DeploymentWrite = { ok: true; deployment: Deployment } | { ok: false; errors: FieldErrors };

/** POST /projects/:id/deployments: a deployment made outside Depot's CI (GitLab's Deployments::CreateService). */
export async function createApiDeployment(
  deps: Deps,
  project: Project,
  user: User,
  input: { environment: string; sha: string; ref: string; tag: boolean; status: string },
): Promise<DeploymentWrite> {
  const nameErrors = environmentNameErrors(input.environment);
  if (nameErrors.length > 0) return { ok: false, errors: { environment: nameErrors } };
  if (!/^[0-9a-f]{40}$/.test(input.sha)) return { ok: false, errors: { sha: ['is invalid'] } };
  if (input.ref.trim() === '') return { ok: false, errors: { ref: ["can't be blank"] } };
  const now = deps.clock.now();
  return inTransaction(deps.db, async (tx) => {
    const environment = await findOrCreateEnvironment(tx, project.id, input.environment, now);
    if (!environment) return { ok: false as const, errors: { slug: ['has already been taken'] } };
    const iid = await nextDeploymentIid(tx, project.id);
    const deployment = await tx
      .insertInto('deployments')
      .values({
        iid,
        project_id: project.id,
        environment_id: environment.id,
        ref: input.ref,
        tag: input.tag,
        sha: input.sha,
        user_id: user.id,
        deployable_id: null,
        status: input.status,
        created_at: now,
        updated_at: now,
        finished_at: FINISHED.includes(input.status) ? now : null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    if (input.status === 'success') await deploymentSucceeded(tx, environment.id, undefined, undefined, now);
    return { ok: true as const, deployment };
  });
}

/** PUT /projects/:id/deployments/:deployment_id for an API deployment. */
export async function updateApiDeployment(deps: Deps, deployment: Deployment, status: string): Promise<Deployment> {
  const now = deps.clock.now();
  return inTransaction(deps.db, async (tx) => {
    const updated = await tx
      .updateTable('deployments')
      .set({ status, updated_at: now, finished_at: FINISHED.includes(status) ? now : null })
      .where('id', '=', deployment.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (status === 'success') await deploymentSucceeded(tx, deployment.environment_id, undefined, undefined, now);
    return updated;
  });
}

/**
 * POST /projects/:id/environments/stop_stale (GitLab's Environments::StopStaleService): stops the
 * available environments neither updated nor deployed to since `before`, running their stop jobs.
 */
export async function stopStaleEnvironments(deps: Deps, project: Project, user: User, before: Date): Promise<number> {
  const stale = await deps.db
    .selectFrom('environments')
    .selectAll()
    .where('project_id', '=', project.id)
    .where('state', '=', 'available')
    .where('updated_at', '<', before)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('deployments')
            .select('deployments.id')
            .whereRef('deployments.environment_id', '=', 'environments.id')
            .where('deployments.created_at', '>=', before),
        ),
      ),
    )
    .orderBy('id')
    .limit(1000)
    .execute();
  for (const environment of stale) await stopEnvironment(deps, environment, user);
  return stale.length;
}

export type DeploymentDestroy = { ok: true } | { ok: false; message: string };

/** DELETE /projects/:id/deployments/:id (GitLab's Ci::Deployments::DestroyService). */
export async function destroyDeployment(deps: Deps, deployment: Deployment): Promise<DeploymentDestroy> {
  if (deployment.status === 'running') return { ok: false, message: 'Cannot destroy running deployment' };
  const last = (await lastDeployments(deps.db, [deployment.environment_id])).get(deployment.environment_id);
  if (last?.id === deployment.id) return { ok: false, message: 'Deployment currently deployed to environment' };
  await deps.db.deleteFrom('deployments').where('id', '=', deployment.id).execute();
  return { ok: true };
}
