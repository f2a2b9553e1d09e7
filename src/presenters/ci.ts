import type { Build, Pipeline, Project, Runner, User } from '../db/schema.js';
import type { Commit } from '../git/commit.js';
import { isoTime } from '../lib/clock.js';
import { runnerOnline, runnerStatus } from '../services/ci/runners.js';
import { presentCommit } from './commit.js';
import { presentProjectIdentity } from './project.js';
import { type PresentContext, presentUser, presentUserBasic } from './user.js';

/** GitLab's Entities::Ci::Runner (the summary form of lists). */
export function presentRunner(runner: Runner, now: Date) {
  return {
    id: runner.id,
    description: runner.description,
    ip_address: runner.ip_address ?? '',
    active: runner.active,
    paused: !runner.active,
    is_shared: runner.runner_type === 'instance_type',
    runner_type: runner.runner_type,
    name: runner.name,
    online: runnerOnline(runner, now),
    status: runnerStatus(runner, now),
  };
}

export interface RunnerProjectView {
  project: Project;
  namespaceFullName: string;
}

/** GitLab's Entities::Ci::RunnerDetails. */
export function presentRunnerDetails(
  runner: Runner,
  now: Date,
  projects: RunnerProjectView[],
  groups: { id: number; name: string; web_url: string }[],
) {
  return {
    ...presentRunner(runner, now),
    tag_list: runner.tag_list,
    run_untagged: runner.run_untagged,
    locked: runner.locked,
    maximum_timeout: runner.maximum_timeout,
    access_level: runner.access_level,
    version: runner.version,
    revision: runner.revision,
    platform: runner.platform,
    architecture: runner.architecture,
    contacted_at: isoTime(runner.contacted_at),
    maintenance_note: null,
    projects: projects.map(({ project, namespaceFullName }) => ({
      id: project.id,
      name: project.name,
      name_with_namespace: `${namespaceFullName} / ${project.name}`,
      path: project.path,
      path_with_namespace: project.full_path,
    })),
    groups,
  };
}

const seconds = (from: Date | null, to: Date | null) =>
  from && to ? Math.max(0, (to.getTime() - from.getTime()) / 1000) : null;

export function pipelineWebUrl(pc: PresentContext, project: Pick<Project, 'full_path'>, id: number) {
  return `${pc.baseUrl}/${project.full_path}/-/pipelines/${id}`;
}

/** GitLab's Entities::Ci::PipelineBasic. */
export function presentPipelineBasic(pipeline: Pipeline, project: Project, pc: PresentContext) {
  return {
    id: pipeline.id,
    iid: pipeline.iid,
    project_id: pipeline.project_id,
    sha: pipeline.sha,
    ref: pipeline.ref,
    status: pipeline.status,
    source: pipeline.source,
    created_at: isoTime(pipeline.created_at),
    updated_at: isoTime(pipeline.updated_at),
    web_url: pipelineWebUrl(pc, project, pipeline.id),
  };
}

/** GitLab's Entities::Ci::Pipeline (the detail form). */
export function presentPipeline(pipeline: Pipeline, project: Project, user: User | null, pc: PresentContext) {
  const finished = pipeline.finished_at;
  return {
    ...presentPipelineBasic(pipeline, project, pc),
    before_sha: pipeline.before_sha,
    tag: pipeline.tag,
    yaml_errors: pipeline.yaml_errors,
    user: user ? presentUserBasic(user, pc) : null,
    started_at: isoTime(pipeline.started_at),
    finished_at: isoTime(finished),
    committed_at: null,
    duration:
      seconds(pipeline.started_at, finished) === null
        ? null
        : Math.round(seconds(pipeline.started_at, finished) as number),
    queued_duration: seconds(pipeline.created_at, pipeline.started_at),
    coverage: null,
    detailed_status: {
      icon: `status_${pipeline.status}`,
      text: pipeline.status,
      label: pipeline.status,
      group: pipeline.status,
      tooltip: pipeline.status,
      has_details: true,
      details_path: `/${project.full_path}/-/pipelines/${pipeline.id}`,
      illustration: null,
      favicon: `/assets/ci_favicons/favicon_status_${pipeline.status}.png`,
    },
  };
}

export interface JobView {
  build: Build;
  project: Project;
  pipeline: Pipeline;
  user: User | null;
  runner: Runner | null;
  commit: Commit | null;
  namespaceFullName: string;
  /** Older than archive_builds_in_human_readable. */
  archived?: boolean;
}

/** GitLab's Entities::Ci::Job. */
export function presentJob(view: JobView, pc: PresentContext, now: Date) {
  const { build, project, pipeline } = view;
  const end = build.finished_at ?? (build.status === 'running' ? now : null);
  const artifacts = build.artifacts_file
    ? [{ file_type: 'archive', size: Number(build.artifacts_size ?? 0), filename: 'artifacts.zip', file_format: 'zip' }]
    : [];
  return {
    id: build.id,
    status: build.status,
    stage: build.stage,
    name: build.name,
    ref: build.ref,
    tag: build.tag,
    coverage: build.coverage,
    allow_failure: build.allow_failure,
    created_at: isoTime(build.created_at),
    started_at: isoTime(build.started_at),
    finished_at: isoTime(build.finished_at),
    erased_at: null,
    duration: seconds(build.started_at, end),
    queued_duration: seconds(build.queued_at, build.started_at ?? (build.status === 'pending' ? now : null)),
    user: view.user ? presentUser(view.user, pc, true) : null,
    commit: view.commit ? presentCommit(view.commit, project, pc) : null,
    pipeline: presentPipelineBasic(pipeline, project, pc),
    web_url: `${pc.baseUrl}/${project.full_path}/-/jobs/${build.id}`,
    project: { ci_job_token_scope_enabled: false },
    artifacts_file: build.artifacts_file
      ? { filename: 'artifacts.zip', size: Number(build.artifacts_size ?? 0) }
      : undefined,
    artifacts,
    runner: view.runner ? presentRunner(view.runner, now) : null,
    runner_manager: null,
    artifacts_expire_at: isoTime(build.artifacts_expire_at),
    archived: view.archived === true,
    tag_list: build.tag_list,
    ...(build.status === 'failed' ? { failure_reason: build.failure_reason ?? 'unknown_failure' } : {}),
  };
}

/** GitLab's Entities::Ci::JobBasicWithProject (items of GET /runners/:id/jobs). */
export function presentRunnerJob(view: JobView, pc: PresentContext, now: Date) {
  const job = presentJob(view, pc, now);
  return {
    ...job,
    pipeline: {
      id: view.pipeline.id,
      project_id: view.pipeline.project_id,
      sha: view.pipeline.sha,
      ref: view.pipeline.ref,
      status: view.pipeline.status,
    },
    project: presentProjectIdentity(view.project, view.namespaceFullName),
  };
}
