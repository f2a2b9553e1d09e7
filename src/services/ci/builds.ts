import fs from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import { countUpTo } from '../../db/queries/count.js';
import { findProjectById } from '../../db/queries/projects.js';
import type { Build, Pipeline, Project, Runner, User } from '../../db/schema.js';
import { digestToken, generateToken } from '../../lib/crypto.js';
import { getApplicationSettings, parseDuration } from '../application-settings.js';
import { cachedLookup, type Deps } from '../deps.js';
import { environmentJobVariables } from '../environments.js';
import { pipelineVariables, processPipeline } from './pipelines.js';

/**
 * Jobs as runners see them (GitLab's lib/api/ci/runner.rb and Ci::RegisterJobService): claiming
 * the next job a runner may take, its payload, state updates, the log and artifacts.
 */

/** GitLab's CI job token prefix. */
export const JOB_TOKEN_PREFIX = 'glcbt-';
/** How often the runner should send the log (X-GitLab-Trace-Update-Interval), seconds. */
export const TRACE_UPDATE_INTERVAL_SECONDS = 3;
/** A pending job nobody took for this long is failed (GitLab's StuckCiJobsWorker: 1 day). */
export const PENDING_STUCK_SECONDS = 24 * 60 * 60;
/** A running job is failed when its timeout plus this grace has passed without an end. */
export const RUNNING_GRACE_SECONDS = 60 * 60;
/** Largest log a job may have (bytes). */
export const MAX_TRACE_BYTES = 100 * 1024 * 1024;

const FAILURE_REASONS = [
  'unknown_failure',
  'script_failure',
  'api_failure',
  'stuck_or_timeout_failure',
  'runner_system_failure',
  'missing_dependency_failure',
  'runner_unsupported',
  'stale_schedule',
  'job_execution_timeout',
  'archived_failure',
  'unmet_prerequisites',
  'scheduler_failure',
  'data_integrity_failure',
  'forward_deployment_failure',
  'user_blocked',
  'project_deleted',
  'insufficient_bridge_permissions',
  'downstream_bridge_project_not_found',
  'invalid_bridge_trigger',
  'bridge_pipeline_is_child_pipeline',
  'downstream_pipeline_creation_failed',
  'secrets_provider_not_found',
  'reached_max_descendant_pipelines_depth',
  'ip_restriction_failure',
] as const;

/**
 * Claims the oldest pending job `runner` may take, with `FOR UPDATE SKIP LOCKED` so two runners
 * asking at once never get the same one. Eligibility as GitLab's: the runner's scope (instance,
 * the project's group or an ancestor, or the project), tags (the job's tags are all the runner's;
 * untagged jobs need run_untagged), and ref_protected runners only for protected refs.
 */
export async function claimBuild(deps: Deps, runner: Runner): Promise<{ build: Build; token: string } | undefined> {
  if (!runner.active) return undefined;
  // Most polls find nothing: whether anything is pending is kept in process until jobs change.
  const anyPending = await cachedLookup(deps, 'ciPendingBuilds', 'any', async () => {
    const row = await deps.db
      .selectFrom('ci_builds')
      .select('id')
      .where('status', '=', 'pending')
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  });
  if (anyPending === false) return undefined;
  const token = generateToken(JOB_TOKEN_PREFIX);
  const now = deps.clock.now();
  const scope =
    runner.runner_type === 'instance_type'
      ? sql`true`
      : runner.runner_type === 'project_type'
        ? sql`EXISTS (SELECT 1 FROM ci_runner_projects rp WHERE rp.runner_id = ${runner.id} AND rp.project_id = b.project_id)`
        : sql`EXISTS (SELECT 1 FROM ci_runner_namespaces rn JOIN projects p ON p.id = b.project_id
            JOIN namespaces ns ON ns.id = p.namespace_id
            WHERE rn.runner_id = ${runner.id} AND rn.namespace_id = ANY(ns.traversal_ids))`;
  const { rows } = await sql<Build>`
    UPDATE ci_builds SET status = 'running', runner_id = ${runner.id}, token_digest = ${digestToken(token)},
      started_at = ${now}, updated_at = ${now}
    WHERE id = (
      SELECT b.id FROM ci_builds b
      WHERE b.status = 'pending'
        AND b.tag_list <@ ${sql.val(runner.tag_list)}::text[]
        AND (cardinality(b.tag_list) > 0 OR ${runner.run_untagged})
        AND (${runner.access_level !== 'ref_protected'} OR b.protected)
        AND ${scope}
      ORDER BY b.id
      LIMIT 1
      FOR UPDATE SKIP LOCKED)
    RETURNING *`.execute(deps.db);
  const build = rows[0];
  if (!build) return undefined;
  await processPipeline(deps.db, build.pipeline_id, now);
  return { build, token };
}

/** The job a job token belongs to (any state), for the runner's calls. */
export async function findBuildByToken(deps: Deps, token: string): Promise<Build | undefined> {
  if (!token) return undefined;
  return deps.db.selectFrom('ci_builds').selectAll().where('token_digest', '=', digestToken(token)).executeTakeFirst();
}

/** The running job of a job token: what `gitlab-ci-token` authenticates with while the job runs. */
export async function findRunningBuildByToken(deps: Deps, token: string): Promise<Build | undefined> {
  const build = await findBuildByToken(deps, token);
  return build?.status === 'running' ? build : undefined;
}

interface JobOptions {
  script?: string[];
  before_script?: string[];
  after_script?: string[];
  image?: { name: string; entrypoint?: string[] } | null;
  services?: { name: string; entrypoint?: string[] }[];
  variables?: Record<string, string>;
  environment?: { name: string; url?: string; action?: string } | null;
  artifacts?: {
    paths: string[];
    name?: string;
    when: string;
    expire_in?: string;
    untracked: boolean;
    reports?: Record<string, string[]>;
  } | null;
}

const variable = (key: string, value: string, isPublic = true, masked = false) => ({
  key,
  value,
  public: isPublic,
  file: false,
  masked,
  raw: false,
});

/** The seconds a job may run on this runner: the job's, capped by the runner's maximum_timeout. */
export function effectiveTimeout(build: Build, runner: Runner): number {
  return runner.maximum_timeout ? Math.min(build.timeout, runner.maximum_timeout) : build.timeout;
}

/** The job payload of `POST /jobs/request` (GitLab's Entities::Ci::JobRequest::Response). */
export async function jobPayload(deps: Deps, build: Build, token: string, runner: Runner) {
  const project = (await findProjectById(deps.db, build.project_id)) as Project;
  const pipeline = await deps.db
    .selectFrom('ci_pipelines')
    .selectAll()
    .where('id', '=', build.pipeline_id)
    .executeTakeFirstOrThrow();
  const user = build.user_id
    ? ((await deps.db.selectFrom('users').selectAll().where('id', '=', build.user_id).executeTakeFirst()) ?? null)
    : null;
  const options = build.options as JobOptions;
  const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
  const base = new URL(deps.config.baseUrl);
  const repoUrl = new URL(`${deps.config.baseUrl}/${project.full_path}.git`);
  repoUrl.username = 'gitlab-ci-token';
  repoUrl.password = token;
  const timeout = effectiveTimeout(build, runner);
  const predefined = await pipelineVariables(deps, project, pipeline, user, gitDir);
  const variables = [
    variable('CI_JOB_ID', String(build.id)),
    variable('CI_JOB_NAME', build.name),
    variable('CI_JOB_STAGE', build.stage),
    variable('CI_JOB_URL', `${deps.config.baseUrl}/${project.full_path}/-/jobs/${build.id}`),
    variable('CI_JOB_TOKEN', token, false, true),
    variable('CI_JOB_TIMEOUT', String(timeout)),
    variable('CI_REPOSITORY_URL', repoUrl.toString(), false),
    variable('CI_REGISTRY_USER', 'gitlab-ci-token'),
    variable('CI_REGISTRY_PASSWORD', token, false, true),
    variable('CI_RUNNER_ID', String(runner.id)),
    variable('CI_RUNNER_DESCRIPTION', runner.description),
    variable('CI_RUNNER_TAGS', JSON.stringify(runner.tag_list)),
    variable('CI_NODE_TOTAL', '1'),
    ...Object.entries(predefined).map(([k, v]) => variable(k, v)),
    ...Object.entries(await environmentJobVariables(deps.db, project, pipeline, build)).map(([k, v]) => variable(k, v)),
    ...Object.entries(options.variables ?? {}).map(([k, v]) => variable(k, v)),
    ...(pipeline.variables ?? []).map((v) => variable(v.key, v.value, false)),
  ];
  const dependencies = await deps.db
    .selectFrom('ci_builds')
    .selectAll()
    .where('pipeline_id', '=', build.pipeline_id)
    .where('retried', '=', false)
    .where('status', '=', 'success')
    .where('artifacts_file', 'is not', null)
    .where((eb) =>
      build.needs
        ? build.needs.length > 0
          ? eb('name', 'in', build.needs)
          : eb.val(false)
        : eb('stage_idx', '<', build.stage_idx),
    )
    .orderBy('id')
    .execute();
  const artifacts = options.artifacts;
  return {
    id: build.id,
    token,
    allow_git_fetch: true,
    job_info: {
      id: build.id,
      name: build.name,
      stage: build.stage,
      project_id: project.id,
      project_name: project.name,
      time_in_queue_seconds:
        build.queued_at && build.started_at
          ? Math.max(0, (build.started_at.getTime() - build.queued_at.getTime()) / 1000)
          : 0,
      project_jobs_running_on_instance_runners_count: '+Inf',
    },
    git_info: {
      repo_url: repoUrl.toString(),
      repo_object_format: 'sha1',
      ref: build.ref,
      sha: build.sha,
      before_sha: pipeline.before_sha,
      ref_type: build.tag ? 'tag' : 'branch',
      refspecs: [
        build.tag
          ? `+refs/tags/${build.ref}:refs/tags/${build.ref}`
          : `+refs/heads/${build.ref}:refs/remotes/origin/${build.ref}`,
      ],
      depth: Number(project.settings.ci_default_git_depth ?? 20),
    },
    runner_info: { timeout, runner_session_url: null },
    variables,
    steps: [
      {
        name: 'script',
        script: [...(options.before_script ?? []), ...(options.script ?? [])],
        timeout,
        when: 'on_success',
        allow_failure: false,
      },
      ...((options.after_script ?? []).length > 0
        ? [{ name: 'after_script', script: options.after_script, timeout, when: 'always', allow_failure: true }]
        : []),
    ],
    image: options.image ? { name: options.image.name, entrypoint: options.image.entrypoint ?? null, ports: [] } : null,
    services: (options.services ?? []).map((s) => ({
      name: s.name,
      entrypoint: s.entrypoint ?? null,
      ports: [],
      alias: null,
      command: null,
    })),
    artifacts: artifacts
      ? [
          ...(artifacts.paths.length > 0 || artifacts.untracked
            ? [
                {
                  name: artifacts.name ?? null,
                  untracked: artifacts.untracked,
                  paths: artifacts.paths,
                  when: artifacts.when,
                  expire_in: artifacts.expire_in ?? null,
                  artifact_type: 'archive',
                  artifact_format: 'zip',
                },
              ]
            : []),
          ...Object.entries(artifacts.reports ?? {}).map(([kind, paths]) => ({
            name: null,
            untracked: false,
            paths,
            when: 'always',
            expire_in: artifacts.expire_in ?? null,
            artifact_type: kind,
            artifact_format: 'raw',
          })),
        ]
      : [],
    cache: [],
    credentials: [{ type: 'registry', url: base.host, username: 'gitlab-ci-token', password: token }],
    dependencies: dependencies.map((d) => ({
      id: d.id,
      name: d.name,
      token,
      artifacts_file: { filename: 'artifacts.zip', size: Number(d.artifacts_size ?? 0) },
    })),
    features: { trace_sections: true, failure_reasons: FAILURE_REASONS },
  };
}

export type JobState = 'running' | 'success' | 'failed';

/** A runner's state update (PUT /jobs/:id): success or failure ends the job. */
export async function updateBuildState(
  deps: Deps,
  build: Build,
  state: JobState,
  exitCode: number | undefined,
  failureReason: string | undefined,
): Promise<Build> {
  if (state === 'running' || build.status !== 'running') return build;
  const now = deps.clock.now();
  const reason =
    state === 'failed'
      ? (FAILURE_REASONS as readonly string[]).includes(failureReason ?? '')
        ? (failureReason as string)
        : 'unknown_failure'
      : null;
  const updated = await deps.db
    .updateTable('ci_builds')
    .set({
      status: state,
      failure_reason: reason,
      exit_code: exitCode ?? null,
      finished_at: now,
      updated_at: now,
    })
    .where('id', '=', build.id)
    .where('status', '=', 'running')
    .returningAll()
    .executeTakeFirst();
  await processPipeline(deps.db, build.pipeline_id, now);
  return updated ?? build;
}

export type TraceAppend = { ok: true; size: number } | { ok: false; size: number };

/**
 * Appends `data` at byte `start` of the job's log; a start other than the current length is a
 * gap or an overlap (GitLab's 416 with the length the server has).
 */
export async function appendTrace(deps: Deps, build: Build, start: number, data: Buffer): Promise<TraceAppend> {
  return deps.db.transaction().execute(async (tx) => {
    const row = await tx
      .selectFrom('ci_builds')
      .select(['trace_size'])
      .where('id', '=', build.id)
      .forUpdate()
      .executeTakeFirstOrThrow();
    if (start !== row.trace_size) return { ok: false as const, size: row.trace_size };
    if (data.length === 0) return { ok: true as const, size: row.trace_size };
    if (row.trace_size + data.length > MAX_TRACE_BYTES) return { ok: true as const, size: row.trace_size };
    await tx.insertInto('ci_build_trace_chunks').values({ build_id: build.id, offset: start, data }).execute();
    const size = row.trace_size + data.length;
    await tx.updateTable('ci_builds').set({ trace_size: size }).where('id', '=', build.id).execute();
    return { ok: true as const, size };
  });
}

/** The whole log of a job. */
export async function readTrace(deps: Deps, buildId: number): Promise<Buffer> {
  const chunks = await deps.db
    .selectFrom('ci_build_trace_chunks')
    .select('data')
    .where('build_id', '=', buildId)
    .orderBy('offset')
    .execute();
  return Buffer.concat(chunks.map((c) => c.data));
}

/** Where a job's artifact archive lives: STORAGE_DIR/ci/artifacts/<project>/<job>/artifacts.zip. */
export function artifactsPath(deps: Deps, build: Pick<Build, 'id' | 'project_id'>): string {
  return path.join(
    deps.config.storageDir,
    'ci',
    'artifacts',
    String(build.project_id),
    String(build.id),
    'artifacts.zip',
  );
}

/** Keeps an uploaded artifact archive with its expiry (the job's, else the instance default). */
export async function saveArtifacts(
  deps: Deps,
  build: Build,
  uploadedPath: string,
  size: number,
  expireIn: string | undefined,
): Promise<Build> {
  const target = artifactsPath(deps, build);
  await fs.mkdir(path.dirname(target), { recursive: true });
  await fs.copyFile(uploadedPath, target);
  const seconds = expireIn ? parseDuration(expireIn) : undefined;
  const expireAt = seconds ? new Date(deps.clock.now().getTime() + seconds * 1000) : null;
  return deps.db
    .updateTable('ci_builds')
    .set({ artifacts_file: 'artifacts.zip', artifacts_size: size, artifacts_expire_at: expireAt })
    .where('id', '=', build.id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Fails jobs stuck pending for a day or running past their timeout (GitLab's StuckCiJobsWorker
 * and Ci::StuckBuilds::DropRunningService), with failure_reason stuck_or_timeout_failure.
 */
export async function failStuckBuilds(deps: Deps): Promise<number> {
  const now = deps.clock.now();
  const pendingBefore = new Date(now.getTime() - PENDING_STUCK_SECONDS * 1000);
  const { rows } = await sql<{ id: number; pipeline_id: number }>`
    UPDATE ci_builds SET status = 'failed', failure_reason = 'stuck_or_timeout_failure', finished_at = ${now},
      updated_at = ${now}
    WHERE (status = 'pending' AND queued_at < ${pendingBefore})
       OR (status = 'running' AND started_at + make_interval(secs => timeout + ${RUNNING_GRACE_SECONDS}) < ${now})
    RETURNING id, pipeline_id`.execute(deps.db);
  for (const pipelineId of new Set(rows.map((r) => r.pipeline_id))) await processPipeline(deps.db, pipelineId, now);
  return rows.length;
}

/**
 * Removes the artifact archives whose `expire_in` (else default_artifacts_expire_in) has passed,
 * as GitLab's Ci::JobArtifacts::DestroyAllExpiredService does. Returns how many went.
 */
export async function removeExpiredArtifacts(deps: Deps): Promise<number> {
  const expired = await deps.db
    .updateTable('ci_builds')
    .set({ artifacts_file: null, artifacts_size: null })
    .where('artifacts_file', 'is not', null)
    .where('artifacts_expire_at', '<', deps.clock.now())
    .returning(['id', 'project_id'])
    .execute();
  for (const build of expired) {
    await fs.rm(path.dirname(artifactsPath(deps, build)), { recursive: true, force: true });
  }
  return expired.length;
}

/** Jobs a runner ran, newest first unless asked otherwise. */
export async function runnerBuilds(
  deps: Deps,
  runnerId: number,
  status: string | undefined,
  sort: 'asc' | 'desc',
  window: { limit: number; offset: number },
): Promise<Build[]> {
  let query = deps.db.selectFrom('ci_builds').selectAll().where('runner_id', '=', runnerId);
  if (status) query = query.where('status', '=', status);
  return query.orderBy('id', sort).limit(window.limit).offset(window.offset).execute();
}

export async function countRunnerBuilds(
  deps: Deps,
  runnerId: number,
  status: string | undefined,
  cap: number,
): Promise<number> {
  let query = deps.db.selectFrom('ci_builds').select('id').where('runner_id', '=', runnerId);
  if (status) query = query.where('status', '=', status);
  return countUpTo(deps.db, query, cap);
}

/**
 * Jobs created before this instant are archived (`archive_builds_in_human_readable`): they can no
 * longer be retried or played. Null when the setting is off.
 */
export async function archiveCutoff(deps: Deps): Promise<Date | null> {
  const value = (await getApplicationSettings(deps)).values.archive_builds_in_human_readable;
  if (value === null || value === undefined || String(value).trim() === '') return null;
  const seconds = parseDuration(String(value));
  return seconds ? new Date(deps.clock.now().getTime() - seconds * 1000) : null;
}

export type { Pipeline, User };
