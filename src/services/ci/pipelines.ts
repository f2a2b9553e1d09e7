import { sql, type Transaction } from 'kysely';
import type { Build, DB, Pipeline, Project, User } from '../../db/schema.js';
import { readBlob } from '../../git/blob.js';
import { readObject } from '../../git/catfile.js';
import { commitTitle, parseCommitObject } from '../../git/commit.js';
import { resolveCommitId } from '../../git/refs.js';
import { readTreeEntry } from '../../git/tree.js';
import { isValidBranchName } from '../../git/validate.js';
import { failpoint } from '../../lib/failpoints.js';
import { getApplicationSettings } from '../application-settings.js';
import type { Deps } from '../deps.js';
import { syncPipelineDeployments } from '../environments.js';
import { queuePipelineHooks } from '../pipeline-hooks.js';
import { protectedBranchRules } from '../protected-branches.js';
import { type CiConfig, type CiJob, matchRules, parseCiConfig, refsMatch } from './config.js';

/**
 * Pipelines (GitLab's Ci::CreatePipelineService and Ci::ProcessPipelineService): a pipeline is made
 * from the CI file at a commit, its jobs wait for their stage (or their `needs`), and statuses
 * move as the jobs finish.
 */

export const DEFAULT_CI_CONFIG_PATH = '.gitlab-ci.yml';
/** The project's build_timeout default (GitLab: 1 hour). */
export const DEFAULT_JOB_TIMEOUT_SECONDS = 3600;
export const ZERO_SHA = '0000000000000000000000000000000000000000';

export const COMPLETED_STATUSES = ['success', 'failed', 'canceled', 'skipped'];
export const ACTIVE_STATUSES = ['created', 'pending', 'running'];
export const CANCELABLE_STATUSES = ['created', 'pending', 'running'];

export interface PipelineRef {
  /** Branch or tag name. */
  name: string;
  tag: boolean;
}

export interface CreatePipelineInput {
  project: Project;
  user: User | null;
  ref: PipelineRef;
  sha: string;
  beforeSha: string;
  source: 'push' | 'web' | 'api';
  variables?: { key: string; value: string }[];
}

export type CreatePipelineResult =
  | { created: true; pipeline: Pipeline }
  | { created: false; reason: 'no_config' | 'filtered' | 'no_jobs' | 'missing_ref' };

/** The CI file path a project reads (its own, else the instance default, else `.gitlab-ci.yml`). */
export async function ciConfigPath(deps: Deps, project: Project): Promise<string> {
  const own = project.settings.ci_config_path;
  if (typeof own === 'string' && own !== '') return own;
  const fallback = (await getApplicationSettings(deps)).values.default_ci_config_path;
  return typeof fallback === 'string' && fallback !== '' ? fallback : DEFAULT_CI_CONFIG_PATH;
}

async function readCiFile(gitDir: string, sha: string, path: string): Promise<string | null> {
  const entry = await readTreeEntry(gitDir, sha, path).catch(() => null);
  if (entry?.type !== 'blob') return null;
  const blob = await readBlob(gitDir, entry.id);
  return blob ? blob.toString('utf8') : null;
}

const slug = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '-')
    .slice(0, 63)
    .replace(/^-+|-+$/g, '');

/** GitLab's predefined variables known when the pipeline is made. */
export async function pipelineVariables(
  deps: Deps,
  project: Project,
  pipeline: Pick<Pipeline, 'id' | 'iid' | 'ref' | 'tag' | 'sha' | 'before_sha' | 'source' | 'protected'>,
  user: User | null,
  gitDir: string,
): Promise<Record<string, string>> {
  const base = deps.config.baseUrl;
  const url = new URL(base);
  const commit = await readObject(gitDir, pipeline.sha).catch(() => null);
  const parsed = commit?.type === 'commit' ? parseCommitObject(pipeline.sha, commit.data) : null;
  const namespace = project.full_path.slice(0, project.full_path.lastIndexOf('/'));
  return {
    CI: 'true',
    GITLAB_CI: 'true',
    CI_SERVER: 'yes',
    CI_SERVER_URL: base,
    CI_SERVER_HOST: url.hostname,
    CI_SERVER_PORT: url.port || (url.protocol === 'https:' ? '443' : '80'),
    CI_SERVER_PROTOCOL: url.protocol.replace(':', ''),
    CI_SERVER_NAME: 'GitLab',
    CI_API_V4_URL: `${base}/api/v4`,
    CI_PROJECT_ID: String(project.id),
    CI_PROJECT_NAME: project.path,
    CI_PROJECT_TITLE: project.name,
    CI_PROJECT_PATH: project.full_path,
    CI_PROJECT_PATH_SLUG: slug(project.full_path),
    CI_PROJECT_NAMESPACE: namespace,
    CI_PROJECT_ROOT_NAMESPACE: project.full_path.split('/')[0] ?? '',
    CI_PROJECT_URL: `${base}/${project.full_path}`,
    CI_PROJECT_VISIBILITY: project.visibility,
    CI_DEFAULT_BRANCH: project.default_branch ?? '',
    CI_PIPELINE_ID: String(pipeline.id),
    CI_PIPELINE_IID: String(pipeline.iid),
    CI_PIPELINE_SOURCE: pipeline.source,
    CI_PIPELINE_URL: `${base}/${project.full_path}/-/pipelines/${pipeline.id}`,
    CI_COMMIT_SHA: pipeline.sha,
    CI_COMMIT_SHORT_SHA: pipeline.sha.slice(0, 8),
    CI_COMMIT_BEFORE_SHA: pipeline.before_sha,
    CI_COMMIT_REF_NAME: pipeline.ref,
    CI_COMMIT_REF_SLUG: slug(pipeline.ref),
    CI_COMMIT_REF_PROTECTED: String(pipeline.protected),
    ...(pipeline.tag ? { CI_COMMIT_TAG: pipeline.ref } : { CI_COMMIT_BRANCH: pipeline.ref }),
    ...(parsed
      ? {
          CI_COMMIT_MESSAGE: parsed.message,
          CI_COMMIT_TITLE: commitTitle(parsed.message),
          CI_COMMIT_AUTHOR: `${parsed.author.name} <${parsed.author.email}>`,
        }
      : {}),
    ...(user
      ? {
          GITLAB_USER_ID: String(user.id),
          GITLAB_USER_LOGIN: user.username,
          GITLAB_USER_EMAIL: user.email,
          GITLAB_USER_NAME: user.name,
        }
      : {}),
  };
}

interface SelectedJob {
  job: CiJob;
  when: string;
  allowFailure: boolean;
  variables: Record<string, string>;
}

/** Jobs that `rules` and `only`/`except` keep for this pipeline, with the `when` a rule gave. */
function selectJobs(config: CiConfig, vars: Record<string, string>, ref: PipelineRef, source: string): SelectedJob[] {
  const selected: SelectedJob[] = [];
  for (const job of config.jobs) {
    const jobVars = { ...vars, ...config.variables, ...job.variables };
    if (job.rules) {
      const rule = matchRules(job.rules, jobVars);
      if (!rule || rule.when === 'never') continue;
      const when = rule.when ?? job.when;
      selected.push({
        job,
        when,
        allowFailure:
          rule.allow_failure ??
          (rule.when === 'manual' && job.allow_failure === false ? false : job.allow_failure || when === 'manual'),
        variables: { ...job.variables, ...rule.variables },
      });
      continue;
    }
    const target = { name: ref.name, tag: ref.tag, source };
    if (job.only && !refsMatch(job.only, target)) continue;
    if (!job.only && !job.rules && !refsMatch(['branches', 'tags'], target)) continue;
    if (job.except && refsMatch(job.except, target)) continue;
    selected.push({ job, when: job.when, allowFailure: job.allow_failure, variables: job.variables });
  }
  return selected;
}

async function nextIid(tx: Transaction<DB>, projectId: number): Promise<number> {
  // One pipeline numbering per project; the project row lock serialises concurrent pushes.
  await sql`SELECT id FROM projects WHERE id = ${projectId} FOR UPDATE`.execute(tx);
  const row = await tx
    .selectFrom('ci_pipelines')
    .select((eb) => eb.fn.max('iid').as('iid'))
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  return Number(row?.iid ?? 0) + 1;
}

/**
 * Creates the pipeline of a ref at a commit from the CI file there: none when there is no CI file
 * or the workflow rules or job filters leave nothing; a failed pipeline with `yaml_errors` when the
 * file is invalid.
 */
export async function createPipeline(deps: Deps, input: CreatePipelineInput): Promise<CreatePipelineResult> {
  const { project, user, ref, sha } = input;
  const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
  const path = await ciConfigPath(deps, project);
  const text = await readCiFile(gitDir, sha, path);
  failpoint('pipeline:after-config-read');
  if (text === null) return { created: false, reason: 'no_config' };
  const parsed = parseCiConfig(text);
  const isProtected = !ref.tag && (await protectedBranchRules(deps, project.id, ref.name)) !== null;
  const now = deps.clock.now();
  const settings = await getApplicationSettings(deps);
  const buildTimeout =
    Number(project.settings.build_timeout ?? DEFAULT_JOB_TIMEOUT_SECONDS) || DEFAULT_JOB_TIMEOUT_SECONDS;

  const result = await deps.db.transaction().execute(async (tx) => {
    const iid = await nextIid(tx, project.id);
    // One pipeline per push: a job run again (its worker died) finds the one it made, under the
    // project row lock nextIid took, so two runs at once cannot both make one.
    if (input.source === 'push') {
      const existing = await findPushPipeline(tx, project.id, ref, sha, input.beforeSha);
      if (existing) return { created: true as const, pipeline: existing };
    }
    const base = {
      iid,
      project_id: project.id,
      ref: ref.name,
      tag: ref.tag,
      sha,
      before_sha: input.beforeSha,
      source: input.source,
      protected: isProtected,
      user_id: user?.id ?? null,
      variables: JSON.stringify(input.variables ?? []),
      created_at: now,
      updated_at: now,
    };
    if (!parsed.ok) {
      const pipeline = await tx
        .insertInto('ci_pipelines')
        .values({ ...base, status: 'failed', yaml_errors: parsed.errors.join(', '), finished_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      return { created: true as const, pipeline };
    }
    const vars = {
      ...(await pipelineVariables(deps, project, { id: 0, ...base }, user, gitDir)),
      ...Object.fromEntries((input.variables ?? []).map((v) => [v.key, v.value])),
    };
    const { config } = parsed;
    if (config.workflowRules) {
      const rule = matchRules(config.workflowRules, { ...vars, ...config.variables });
      if (!rule || rule.when === 'never') return { created: false as const, reason: 'filtered' as const };
    }
    const jobs = selectJobs(config, vars, ref, input.source);
    if (jobs.length === 0) return { created: false as const, reason: 'no_jobs' as const };
    const pipeline = await tx
      .insertInto('ci_pipelines')
      .values({ ...base, status: 'created', yaml_errors: null })
      .returningAll()
      .executeTakeFirstOrThrow();
    failpoint('pipeline:after-pipeline-row');
    const expireIn = String(settings.values.default_artifacts_expire_in ?? '30 days');
    const kept = new Set(jobs.map((j) => j.job.name));
    await tx
      .insertInto('ci_builds')
      .values(
        jobs.map(({ job, when, allowFailure, variables }) => ({
          pipeline_id: pipeline.id,
          project_id: project.id,
          name: job.name,
          stage: job.stage,
          stage_idx: config.stages.indexOf(job.stage),
          status: 'created',
          when,
          allow_failure: allowFailure,
          // A need on a job the rules left out is dropped, as GitLab's optional needs are.
          needs: job.needs ? job.needs.filter((n) => kept.has(n)) : null,
          tag_list: job.tags,
          options: JSON.stringify({
            script: job.script,
            before_script: job.before_script,
            after_script: job.after_script,
            image: job.image,
            services: job.services,
            variables: { ...config.variables, ...variables },
            environment: job.environment,
            artifacts: job.artifacts ? { expire_in: expireIn, ...job.artifacts } : null,
            timeout: job.timeout,
          }),
          ref: ref.name,
          tag: ref.tag,
          sha,
          protected: isProtected,
          timeout: job.timeout ?? buildTimeout,
          user_id: user?.id ?? null,
          created_at: now,
          updated_at: now,
        })),
      )
      .execute();
    failpoint('pipeline:after-jobs-rows');
    // Moves the first stage to pending and queues the pipeline hooks, in this transaction.
    await processPipeline(tx, pipeline.id, now);
    failpoint('pipeline:after-hooks-queued');
    const fresh = await tx
      .selectFrom('ci_pipelines')
      .selectAll()
      .where('id', '=', pipeline.id)
      .executeTakeFirstOrThrow();
    return { created: true as const, pipeline: fresh };
  });
  failpoint('pipeline:after-commit');
  return result;
}

/** The pipeline a push of `ref` from `beforeSha` to `sha` made, if any. */
function findPushPipeline(
  db: Executor,
  projectId: number,
  ref: { name: string; tag: boolean },
  sha: string,
  beforeSha: string,
): Promise<Pipeline | undefined> {
  return db
    .selectFrom('ci_pipelines')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('ref', '=', ref.name)
    .where('tag', '=', ref.tag)
    .where('sha', '=', sha)
    .where('before_sha', '=', beforeSha)
    .where('source', '=', 'push')
    .executeTakeFirst();
}

/** The pipeline for a push of one ref (the job queued by recordRefChanges runs this). */
export async function createPushPipeline(
  deps: Deps,
  project: Project,
  user: User | null,
  fullRef: string,
  beforeSha: string,
  afterSha: string,
): Promise<CreatePipelineResult> {
  if (/^0+$/.test(afterSha)) return { created: false, reason: 'missing_ref' };
  const tag = fullRef.startsWith('refs/tags/');
  const name = fullRef.replace(/^refs\/(heads|tags)\//, '');
  // A re-run of the same job (after a crash) finds the pipeline it made.
  const existing = await findPushPipeline(deps.db, project.id, { name, tag }, afterSha, beforeSha);
  if (existing) return { created: true, pipeline: existing };
  const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
  // Annotated tags point at a tag object: the pipeline runs on its commit.
  const sha = (await resolveCommitId(gitDir, afterSha)) ?? afterSha;
  return createPipeline(deps, { project, user, ref: { name, tag }, sha, beforeSha, source: 'push' });
}

/** A pipeline of a ref's tip (POST /projects/:id/pipeline). */
export async function createRefPipeline(
  deps: Deps,
  project: Project,
  user: User,
  refName: string,
  variables: { key: string; value: string }[],
): Promise<CreatePipelineResult> {
  const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
  if (!isValidBranchName(refName)) return { created: false, reason: 'missing_ref' };
  let tag = false;
  let sha = await resolveCommitId(gitDir, `refs/heads/${refName}`);
  if (!sha) {
    sha = await resolveCommitId(gitDir, `refs/tags/${refName}`);
    tag = sha !== null;
  }
  if (!sha) return { created: false, reason: 'missing_ref' };
  return createPipeline(deps, {
    project,
    user,
    ref: { name: refName, tag },
    sha,
    beforeSha: ZERO_SHA,
    source: 'api',
    variables,
  });
}

type Executor = Transaction<DB> | Deps['db'];

/** The status of a group of finished-or-not jobs, as GitLab's Ci::HasStatus.composite_status. */
export function compositeStatus(builds: Pick<Build, 'status' | 'allow_failure'>[]): string {
  if (builds.length === 0) return 'skipped';
  const statuses = builds.map((b) => (b.status === 'failed' && b.allow_failure ? 'success' : b.status));
  const has = (s: string) => statuses.includes(s);
  const all = (...s: string[]) => statuses.every((x) => s.includes(x));
  if (all('skipped')) return 'skipped';
  if (all('success', 'skipped')) return 'success';
  if (all('created')) return 'created';
  if (all('pending', 'created', 'skipped') && has('pending')) return 'pending';
  if (has('running') || has('pending') || has('created')) return 'running';
  if (has('manual') && !builds.some((b) => b.status === 'manual' && !b.allow_failure)) {
    return has('failed') ? 'failed' : has('canceled') ? 'canceled' : 'success';
  }
  if (has('manual')) return 'manual';
  if (has('failed')) return 'failed';
  if (has('canceled')) return 'canceled';
  return 'success';
}

const isDone = (b: Build) => COMPLETED_STATUSES.includes(b.status) || (b.status === 'manual' && b.allow_failure);

/**
 * Moves created jobs whose prerequisites (earlier stages, or their `needs`) are done to pending,
 * manual or skipped by their `when`, then sets the pipeline's status. Takes the pipeline's row
 * lock so two jobs finishing at once see each other.
 */
export async function processPipeline(db: Executor, pipelineId: number, now: Date): Promise<Pipeline | undefined> {
  const run = async (tx: Transaction<DB>) => {
    const pipeline = await tx
      .selectFrom('ci_pipelines')
      .selectAll()
      .where('id', '=', pipelineId)
      .forUpdate()
      .executeTakeFirst();
    if (!pipeline) return undefined;
    const builds = await tx
      .selectFrom('ci_builds')
      .selectAll()
      .where('pipeline_id', '=', pipelineId)
      .where('retried', '=', false)
      .orderBy('stage_idx')
      .orderBy('id')
      .execute();
    let changed = true;
    while (changed) {
      changed = false;
      for (const build of builds) {
        if (build.status !== 'created') continue;
        const prerequisites = build.needs
          ? builds.filter((b) => build.needs?.includes(b.name))
          : builds.filter((b) => b.stage_idx < build.stage_idx);
        if (!prerequisites.every(isDone)) continue;
        const prior = compositeStatus(prerequisites.filter((b) => b.status !== 'manual'));
        const failed = prior === 'failed' || prior === 'canceled';
        let next: string;
        if (build.when === 'always') next = 'pending';
        else if (build.when === 'on_failure') next = failed ? 'pending' : 'skipped';
        else if (build.when === 'manual') next = failed ? 'skipped' : 'manual';
        else next = failed ? 'skipped' : 'pending';
        build.status = next;
        changed = true;
        await tx
          .updateTable('ci_builds')
          .set({
            status: next,
            updated_at: now,
            ...(next === 'pending' ? { queued_at: now } : {}),
            ...(next === 'skipped' ? { finished_at: null } : {}),
          })
          .where('id', '=', build.id)
          .where('status', '=', 'created')
          .execute();
      }
    }
    // Deployments follow their jobs (issue 20): the one call from CI into environments.
    await syncPipelineDeployments(tx, pipeline, builds, now);
    const status = pipeline.yaml_errors ? 'failed' : compositeStatus(builds);
    const finished = COMPLETED_STATUSES.includes(status) || status === 'manual';
    const started = builds.some((b) => b.started_at !== null);
    const startedAt =
      pipeline.started_at ??
      (started
        ? (builds
            .map((b) => b.started_at)
            .filter((d) => d !== null)
            .sort()[0] ?? now)
        : null);
    const updated = await tx
      .updateTable('ci_pipelines')
      .set({
        status,
        updated_at: now,
        started_at: startedAt,
        finished_at: finished ? (pipeline.finished_at ?? now) : null,
      })
      .where('id', '=', pipelineId)
      .returningAll()
      .executeTakeFirst();
    // Webhooks and integrations hear of every status change (GitLab's Pipeline Hook).
    if (updated && updated.status !== pipeline.status) await queuePipelineHooks(tx, updated);
    return updated;
  };
  if ('isTransaction' in db && db.isTransaction) return run(db as Transaction<DB>);
  return (db as Deps['db']).transaction().execute(run);
}

/** Cancels a pipeline's unfinished jobs. */
export async function cancelPipeline(deps: Deps, pipeline: Pipeline): Promise<Pipeline | undefined> {
  const now = deps.clock.now();
  await deps.db
    .updateTable('ci_builds')
    .set({ status: 'canceled', finished_at: now, updated_at: now })
    .where('pipeline_id', '=', pipeline.id)
    .where('status', 'in', [...CANCELABLE_STATUSES, 'manual'])
    .execute();
  return processPipeline(deps.db, pipeline.id, now);
}

/** Retries a pipeline's failed and canceled jobs (GitLab's RetryPipelineService). */
export async function retryPipeline(deps: Deps, pipeline: Pipeline, user: User): Promise<Pipeline | undefined> {
  const builds = await deps.db
    .selectFrom('ci_builds')
    .selectAll()
    .where('pipeline_id', '=', pipeline.id)
    .where('retried', '=', false)
    .where('status', 'in', ['failed', 'canceled'])
    .execute();
  for (const build of builds) await cloneForRetry(deps, build, user, false);
  // Skipped jobs after them become created again, so they run when their turn comes.
  await deps.db
    .updateTable('ci_builds')
    .set({ status: 'created', finished_at: null })
    .where('pipeline_id', '=', pipeline.id)
    .where('retried', '=', false)
    .where('status', '=', 'skipped')
    .execute();
  return processPipeline(deps.db, pipeline.id, deps.clock.now());
}

/** A new try of a job (the old one is marked retried); processed unless `process` is false. */
export async function cloneForRetry(deps: Deps, build: Build, user: User, process = true): Promise<Build> {
  const now = deps.clock.now();
  const copy = await deps.db.transaction().execute(async (tx) => {
    await tx.updateTable('ci_builds').set({ retried: true }).where('id', '=', build.id).execute();
    return tx
      .insertInto('ci_builds')
      .values({
        pipeline_id: build.pipeline_id,
        project_id: build.project_id,
        name: build.name,
        stage: build.stage,
        stage_idx: build.stage_idx,
        status: 'created',
        when: build.when,
        allow_failure: build.allow_failure,
        needs: build.needs,
        tag_list: build.tag_list,
        options: JSON.stringify(build.options),
        ref: build.ref,
        tag: build.tag,
        sha: build.sha,
        protected: build.protected,
        timeout: build.timeout,
        user_id: user.id,
        created_at: now,
        updated_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  if (process) {
    // A retried job runs now: its prerequisites already ran.
    await deps.db
      .updateTable('ci_builds')
      .set({ status: 'pending', queued_at: now })
      .where('id', '=', copy.id)
      .execute();
    await processPipeline(deps.db, build.pipeline_id, now);
  }
  return deps.db.selectFrom('ci_builds').selectAll().where('id', '=', copy.id).executeTakeFirstOrThrow();
}

/** Cancels one job. */
export async function cancelBuild(deps: Deps, build: Build): Promise<Build> {
  const now = deps.clock.now();
  if (CANCELABLE_STATUSES.includes(build.status)) {
    await deps.db
      .updateTable('ci_builds')
      .set({ status: 'canceled', finished_at: now, updated_at: now })
      .where('id', '=', build.id)
      .where('status', 'in', CANCELABLE_STATUSES)
      .execute();
    await processPipeline(deps.db, build.pipeline_id, now);
  }
  return deps.db.selectFrom('ci_builds').selectAll().where('id', '=', build.id).executeTakeFirstOrThrow();
}

/** Starts a manual job. */
export async function playBuild(deps: Deps, build: Build, user: User): Promise<Build> {
  const now = deps.clock.now();
  await deps.db
    .updateTable('ci_builds')
    .set({ status: 'pending', queued_at: now, user_id: user.id, updated_at: now })
    .where('id', '=', build.id)
    .where('status', '=', 'manual')
    .execute();
  await processPipeline(deps.db, build.pipeline_id, now);
  return deps.db.selectFrom('ci_builds').selectAll().where('id', '=', build.id).executeTakeFirstOrThrow();
}
