import { findNamespacesByIds } from '../../db/queries/namespaces.js';
import type { Build, Pipeline, Project, Runner, User } from '../../db/schema.js';
import { readObject } from '../../git/catfile.js';
import { type Commit, parseCommitObject } from '../../git/commit.js';
import type { JobView } from '../../presenters/ci.js';
import type { Deps } from '../deps.js';
import { namespaceFullNames } from '../project-views.js';

async function byIds<T extends { id: number }>(load: (ids: number[]) => Promise<T[]>, ids: (number | null)[]) {
  const wanted = [...new Set(ids.filter((id): id is number => id !== null))];
  if (wanted.length === 0) return new Map<number, T>();
  return new Map((await load(wanted)).map((row) => [row.id, row]));
}

/** Everything the job entity shows for a list of jobs, loaded in a few batched queries. */
export async function jobViews(deps: Deps, builds: Build[]): Promise<JobView[]> {
  const db = deps.db;
  const projects = await byIds<Project>(
    (ids) => db.selectFrom('projects').selectAll().where('id', 'in', ids).execute(),
    builds.map((b) => b.project_id),
  );
  const pipelines = await byIds<Pipeline>(
    (ids) => db.selectFrom('ci_pipelines').selectAll().where('id', 'in', ids).execute(),
    builds.map((b) => b.pipeline_id),
  );
  const users = await byIds<User>(
    (ids) => db.selectFrom('users').selectAll().where('id', 'in', ids).execute(),
    builds.map((b) => b.user_id),
  );
  const runners = await byIds<Runner>(
    (ids) => db.selectFrom('ci_runners').selectAll().where('id', 'in', ids).execute(),
    builds.map((b) => b.runner_id),
  );
  const namespaces = await findNamespacesByIds(db, [...new Set([...projects.values()].map((p) => p.namespace_id))]);
  const names = await namespaceFullNames(deps, namespaces);
  const commits = new Map<string, Commit | null>();
  for (const build of builds) {
    const project = projects.get(build.project_id);
    const key = `${build.project_id}:${build.sha}`;
    if (!project || commits.has(key)) continue;
    const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
    const object = await readObject(gitDir, build.sha).catch(() => null);
    commits.set(key, object?.type === 'commit' ? parseCommitObject(build.sha, object.data) : null);
  }
  return builds.flatMap((build) => {
    const project = projects.get(build.project_id);
    const pipeline = pipelines.get(build.pipeline_id);
    if (!project || !pipeline) return [];
    return [
      {
        build,
        project,
        pipeline,
        user: build.user_id ? (users.get(build.user_id) ?? null) : null,
        runner: build.runner_id ? (runners.get(build.runner_id) ?? null) : null,
        commit: commits.get(`${build.project_id}:${build.sha}`) ?? null,
        namespaceFullName: names.get(project.namespace_id) ?? '',
      },
    ];
  });
}
