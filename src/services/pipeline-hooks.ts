import type { Kysely } from 'kysely';
import { findProjectWithNamespace } from '../db/queries/projects.js';
import { findUserById } from '../db/queries/users.js';
import type { DB, Pipeline } from '../db/schema.js';
import { commitTitle } from '../git/commit.js';
import { readCommit } from '../git/refs.js';
import { enqueueJob } from '../jobs/queue.js';
import type { Deps } from './deps.js';
import { fanOutHooks } from './hook-delivery.js';
import { projectHookAttrs, userHookAttrs, xmlSchemaTime } from './hook-payloads.js';
import { hasListeners } from './webhooks.js';

export const PIPELINE_HOOKS_JOB = 'pipeline_hooks';

/** GitLab's hook time format for pipelines and jobs (`2026-11-26 10:00:00 UTC`). */
const hookTime = (date: Date | null) => (date ? `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC` : null);

/**
 * Tells the project's webhooks and integrations that a pipeline's status changed (GitLab sends a
 * Pipeline Hook on every change): call it in the transaction of the change. The payload is built
 * in the background from the pipeline as it then is.
 */
export async function queuePipelineHooks(db: Kysely<DB>, pipeline: Pipeline): Promise<void> {
  if (!(await hasListeners(db, pipeline.project_id))) return;
  await enqueueJob(db, PIPELINE_HOOKS_JOB, { pipeline_id: pipeline.id, status: pipeline.status });
}

/** GitLab's pipeline hook payload (Gitlab::DataBuilder::Pipeline), the fields Depot has. */
export async function buildPipelinePayload(deps: Deps, pipeline: Pipeline, status: string) {
  const found = await findProjectWithNamespace(deps.db, { id: pipeline.project_id });
  if (!found) return null;
  const baseUrl = deps.config.baseUrl;
  const project = projectHookAttrs(baseUrl, found.project, found.namespace);
  const user = pipeline.user_id ? await findUserById(deps.db, pipeline.user_id) : undefined;
  const builds = await deps.db
    .selectFrom('ci_builds')
    .selectAll()
    .where('pipeline_id', '=', pipeline.id)
    .where('retried', '=', false)
    .orderBy('stage_idx')
    .orderBy('id')
    .execute();
  const gitDir = deps.storages.repositoryPath(found.project.repository_storage, found.project.id);
  const commit = await readCommit(gitDir, pipeline.sha).catch(() => null);
  const stages = [...new Map(builds.map((b) => [b.stage_idx, b.stage])).entries()].sort((a, b) => a[0] - b[0]);
  const duration =
    pipeline.started_at && pipeline.finished_at
      ? Math.round((pipeline.finished_at.getTime() - pipeline.started_at.getTime()) / 1000)
      : null;
  return {
    object_kind: 'pipeline',
    object_attributes: {
      id: pipeline.id,
      iid: pipeline.iid,
      name: null,
      ref: pipeline.ref,
      tag: pipeline.tag,
      sha: pipeline.sha,
      before_sha: pipeline.before_sha,
      source: pipeline.source,
      status,
      detailed_status: status,
      stages: stages.map(([, name]) => name),
      created_at: hookTime(pipeline.created_at),
      finished_at: hookTime(pipeline.finished_at),
      duration,
      queued_duration: null,
      variables: [],
      url: `${project.web_url}/-/pipelines/${pipeline.id}`,
    },
    merge_request: null,
    user: user ? userHookAttrs(user) : null,
    project,
    commit: commit
      ? {
          id: commit.id,
          message: commit.message,
          title: commitTitle(commit.message),
          timestamp: xmlSchemaTime(commit.committer.time, commit.committer.tzMinutes),
          url: `${project.web_url}/-/commit/${commit.id}`,
          author: { name: commit.author.name, email: commit.author.email },
        }
      : null,
    builds: builds.map((b) => ({
      id: b.id,
      stage: b.stage,
      name: b.name,
      status: b.status,
      created_at: hookTime(b.created_at),
      started_at: hookTime(b.started_at),
      finished_at: hookTime(b.finished_at),
      duration: b.started_at && b.finished_at ? (b.finished_at.getTime() - b.started_at.getTime()) / 1000 : null,
      queued_duration: null,
      failure_reason: b.failure_reason,
      when: b.when,
      manual: b.when === 'manual',
      allow_failure: b.allow_failure,
      user: user ? userHookAttrs(user) : null,
      runner: null,
      artifacts_file: { filename: b.artifacts_file, size: b.artifacts_size === null ? null : Number(b.artifacts_size) },
      environment: null,
    })),
  };
}

/** The background half of queuePipelineHooks: build the payload, then fan it out. */
export async function runPipelineHooks(deps: Deps, pipelineId: number, status: string): Promise<void> {
  const pipeline = await deps.db.selectFrom('ci_pipelines').selectAll().where('id', '=', pipelineId).executeTakeFirst();
  if (!pipeline) return;
  const data = await buildPipelinePayload(deps, pipeline, status);
  if (!data) return;
  await fanOutHooks(deps, pipeline.project_id, [
    { trigger: 'pipeline_events', data, branch: pipeline.tag ? null : pipeline.ref },
  ]);
}
