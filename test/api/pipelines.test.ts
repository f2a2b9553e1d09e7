import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { parseCiConfig } from '../../src/services/ci/config.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { commitFiles, drainJobs, registerRunner, registrationToken, requestJob } from '../support/ci.js';
import { makeMembers, makeSampleProject, makeUserWithToken, putSettings } from '../support/factories.js';

let app: TestApp;
let owner: User;
let ownerToken: string;
let adminToken: string;

const client = (token: string) => new Gitlab({ host: app.baseUrl, token });

beforeAll(async () => {
  app = await startTestApp();
  ({ user: owner, token: ownerToken } = await makeUserWithToken(app));
  ({ token: adminToken } = await makeUserWithToken(app, { admin: true }));
});
afterAll(async () => {
  await app?.close();
});

async function pushCi(path: string, yaml: string, branch = 'main', visibility: 'public' | 'private' = 'public') {
  const { project } = await makeSampleProject(app, owner, { path, visibility });
  const sha = await commitFiles(
    app,
    ownerToken,
    project,
    branch,
    { '.gitlab-ci.yml': yaml },
    branch === 'main' ? {} : { startBranch: 'main' },
  );
  await drainJobs(app);
  const pipelines = (await app.request(`/projects/${project.id}/pipelines`, { token: ownerToken })).body;
  return { project, sha, pipelines };
}

async function jobsOf(projectId: number, pipelineId: number) {
  const res = await app.request(`/projects/${projectId}/pipelines/${pipelineId}/jobs`, { token: ownerToken });
  expect(res.status, res.text).toBe(200);
  return res.body as { id: number; name: string; status: string; stage: string; allow_failure: boolean }[];
}

describe('pipelines from the CI file', () => {
  it('creates a pipeline on push that a GitLab client follows', async () => {
    const { project, sha, pipelines } = await pushCi(
      'pipe-basic',
      'stages: [build, test]\nb:\n  stage: build\n  script: [make]\nt:\n  stage: test\n  script: [make test]\n',
    );
    expect(pipelines).toHaveLength(1);
    const gitlab = client(ownerToken);
    const listed = await gitlab.Pipelines.all(project.id);
    expect(listed[0]).toMatchObject({
      id: pipelines[0].id,
      iid: 1,
      sha,
      ref: 'main',
      status: 'pending',
      source: 'push',
      project_id: project.id,
    });
    const shown = await gitlab.Pipelines.show(project.id, pipelines[0].id);
    expect(shown).toMatchObject({
      status: 'pending',
      tag: false,
      yaml_errors: null,
      user: { id: owner.id },
      before_sha: expect.any(String),
    });
    const jobs = await gitlab.Jobs.all(project.id, { pipelineId: pipelines[0].id });
    expect(jobs.map((j) => [j.name, j.stage, j.status])).toEqual([
      ['b', 'build', 'pending'],
      ['t', 'test', 'created'],
    ]);
    const job = await gitlab.Jobs.show(project.id, jobs[0]?.id as number);
    expect(job).toMatchObject({
      name: 'b',
      pipeline: { id: pipelines[0].id },
      commit: { id: sha },
      runner: null,
      tag_list: [],
    });
    expect(await gitlab.Jobs.showLog(project.id, jobs[0]?.id as number)).toBe('');
  });

  it('runs a pipeline for a pushed tag, with the tag variables', async () => {
    const { project } = await pushCi('pipe-tag', 'release:\n  script: [x]\n  rules:\n    - if: $CI_COMMIT_TAG\n');
    expect((await app.request(`/projects/${project.id}/pipelines`, { token: ownerToken })).body).toEqual([]);
    const tag = await app.request(`/projects/${project.id}/repository/tags`, {
      method: 'POST',
      token: ownerToken,
      body: { tag_name: 'v9.9.9', ref: 'main', message: 'annotated' },
    });
    expect(tag.status, tag.text).toBe(201);
    await drainJobs(app);
    const [pipeline] = (await app.request(`/projects/${project.id}/pipelines`, { token: ownerToken })).body;
    expect(pipeline).toMatchObject({ ref: 'v9.9.9', sha: tag.body.commit.id });
    const shown = await app.request(`/projects/${project.id}/pipelines/${pipeline.id}`, { token: ownerToken });
    expect(shown.body.tag).toBe(true);
    const tagged = await app.request(`/projects/${project.id}/pipelines`, {
      token: ownerToken,
      query: { scope: 'tags' },
    });
    expect(tagged.body).toHaveLength(1);
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${project.id}`));
    const job = (await requestJob(app, runner.token)).body;
    const vars = Object.fromEntries(job.variables.map((v: { key: string; value: string }) => [v.key, v.value]));
    expect(vars).toMatchObject({ CI_COMMIT_TAG: 'v9.9.9', CI_COMMIT_REF_NAME: 'v9.9.9' });
    expect(vars).not.toHaveProperty('CI_COMMIT_BRANCH');
    expect(job.git_info).toMatchObject({ ref_type: 'tag', sha: tag.body.commit.id });
  });

  it('makes no pipeline without a CI file, nor for a deleted branch', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'pipe-none' });
    await commitFiles(app, ownerToken, project, 'main', { 'other.txt': 'x' });
    await drainJobs(app);
    expect((await app.request(`/projects/${project.id}/pipelines`, { token: ownerToken })).body).toEqual([]);
  });

  it('reads the CI file from ci_config_path, else from default_ci_config_path', async () => {
    await putSettings(app, adminToken, { default_ci_config_path: 'ci/pipeline.yml' });
    try {
      const { project } = await makeSampleProject(app, owner, { path: 'pipe-config-path' });
      await commitFiles(app, ownerToken, project, 'main', { '.gitlab-ci.yml': 'a:\n  script: [x]\n' });
      await drainJobs(app);
      expect((await app.request(`/projects/${project.id}/pipelines`, { token: ownerToken })).body).toEqual([]);
      await commitFiles(app, ownerToken, project, 'main', { 'ci/pipeline.yml': 'b:\n  script: [x]\n' });
      await drainJobs(app);
      const [pipeline] = (await app.request(`/projects/${project.id}/pipelines`, { token: ownerToken })).body;
      expect((await jobsOf(project.id, pipeline.id)).map((j) => j.name)).toEqual(['b']);
    } finally {
      await putSettings(app, adminToken, { default_ci_config_path: '' });
    }
  });

  it('fails the pipeline with GitLab yaml_errors for an invalid file, never a 500', async () => {
    const cases: [string, string][] = [
      ['a: [unclosed', 'Invalid configuration format'],
      ['job:\n  stage: test\n', 'jobs:job config should implement the script:, run:, or trigger: keyword'],
      [
        'job:\n  stage: nope\n  script: [x]\n',
        'job job: chosen stage nope does not exist; available stages are .pre, build, test, deploy, .post',
      ],
      ['a:\n  script: [x]\n  needs: [ghost]\n', 'a job: undefined need: ghost'],
      ['.hidden:\n  script: [x]\n', 'jobs config should contain at least one visible job'],
      [
        'a:\n  script: [x]\n  when: sometimes\n',
        'jobs:a when should be one of: on_success, on_failure, always, manual, delayed',
      ],
    ];
    for (const [index, [yaml, error]] of cases.entries()) {
      const { project, pipelines } = await pushCi(`pipe-invalid-${index}`, yaml);
      expect(pipelines, yaml).toHaveLength(1);
      const shown = await app.request(`/projects/${project.id}/pipelines/${pipelines[0].id}`, { token: ownerToken });
      expect(shown.body, yaml).toMatchObject({ status: 'failed', yaml_errors: error });
      expect(await jobsOf(project.id, pipelines[0].id)).toEqual([]);
      const manual = await app.request(`/projects/${project.id}/pipeline`, {
        method: 'POST',
        token: ownerToken,
        body: { ref: 'main' },
      });
      expect(manual.status).toBe(400);
      expect(manual.body).toEqual({ message: { base: [error] } });
    }
    expect(parseCiConfig('a:\n  script: [x]\n  rules:\n    - if: $X ==\n').ok).toBe(false);
  });

  it('applies rules:if, only/except, workflow:rules, when and needs', async () => {
    const yaml = `
workflow:
  rules:
    - if: $CI_COMMIT_BRANCH =~ /^skip-/
      when: never
    - when: always
stages: [one, two, three]
on-main:
  stage: one
  script: [x]
  rules:
    - if: $CI_COMMIT_BRANCH == "main" && $CI_PIPELINE_SOURCE == "push"
not-main:
  stage: one
  script: [x]
  except: [main]
only-tags:
  stage: one
  script: [x]
  only: [tags]
quick:
  stage: three
  script: [x]
  needs: []
deploy:
  stage: two
  script: [x]
  when: manual
cleanup:
  stage: three
  script: [x]
  when: on_failure
`;
    const { project, pipelines } = await pushCi('pipe-rules', yaml);
    const jobs = await jobsOf(project.id, pipelines[0].id);
    expect(jobs.map((j) => [j.name, j.status])).toEqual([
      ['on-main', 'pending'],
      ['quick', 'pending'],
      ['deploy', 'created'],
      ['cleanup', 'created'],
    ]);
    expect(jobs.find((j) => j.name === 'deploy')?.allow_failure).toBe(true);

    await commitFiles(app, ownerToken, project, 'topic-x', { 'f.txt': 'x' }, { startBranch: 'main' });
    await commitFiles(app, ownerToken, project, 'skip-this', { 'f.txt': 'x' }, { startBranch: 'main' });
    await drainJobs(app);
    const all = (await app.request(`/projects/${project.id}/pipelines`, { token: ownerToken })).body;
    expect(all.map((p: { ref: string }) => p.ref)).toEqual(['topic-x', 'main']);
    const topicJobs = await jobsOf(project.id, all[0].id);
    expect(topicJobs.map((j) => j.name)).toEqual(['not-main', 'quick', 'deploy', 'cleanup']);
  });

  it('runs a manual job when played, on_failure jobs after a failure, and retries and cancels', async () => {
    const yaml =
      'stages: [a, b]\nwork:\n  stage: a\n  script: [x]\nship:\n  stage: b\n  script: [x]\n  when: manual\nrescue:\n  stage: b\n  script: [x]\n  when: on_failure\n';
    const { project, pipelines } = await pushCi('pipe-actions', yaml);
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${project.id}`));
    const gitlab = client(ownerToken);
    const first = (await requestJob(app, runner.token)).body;
    await fetch(`${app.baseUrl}/api/v4/jobs/${first.id}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: first.token, state: 'success' }),
    });
    let jobs = await jobsOf(project.id, pipelines[0].id);
    expect(jobs.map((j) => [j.name, j.status])).toEqual([
      ['work', 'success'],
      ['ship', 'manual'],
      ['rescue', 'skipped'],
    ]);
    expect((await gitlab.Pipelines.show(project.id, pipelines[0].id)).status).toBe('success');

    const ship = jobs.find((j) => j.name === 'ship') as { id: number };
    const [reporter, developer, maintainer] = await makeMembers(app, { type: 'project', id: project.id }, [
      'reporter',
      'developer',
      'maintainer',
    ]);
    const play = (token?: string) =>
      app.request(`/projects/${project.id}/jobs/${ship.id}/play`, { method: 'POST', token });
    expect((await play(reporter?.token)).status).toBe(403);
    // main is fully protected: a developer may not deploy from it.
    expect((await play(developer?.token)).status).toBe(403);
    const played = await client(maintainer?.token as string).Jobs.play(project.id, ship.id);
    expect(played).toMatchObject({ status: 'pending', user: { id: maintainer?.user.id } });
    const replay = await app.request(`/projects/${project.id}/jobs/${ship.id}/play`, {
      method: 'POST',
      token: ownerToken,
    });
    expect(replay.status).toBe(400);
    const canceled = await gitlab.Jobs.cancel(project.id, ship.id);
    expect(canceled.status).toBe('canceled');

    const retried = await gitlab.Jobs.retry(project.id, ship.id);
    expect(retried).toMatchObject({ name: 'ship', status: 'pending' });
    expect(retried.id).not.toBe(ship.id);
    jobs = await jobsOf(project.id, pipelines[0].id);
    expect(jobs.map((j) => j.name)).toEqual(['work', 'rescue', 'ship']);
    const withRetried = await app.request(`/projects/${project.id}/pipelines/${pipelines[0].id}/jobs`, {
      token: ownerToken,
      query: { include_retried: true },
    });
    expect(withRetried.body).toHaveLength(4);

    const pipelineCanceled = await gitlab.Pipelines.cancel(project.id, pipelines[0].id);
    expect(pipelineCanceled.status).toBe('canceled');
    // Retrying brings the canceled manual job back as manual (waiting to be played again).
    const pipelineRetried = await gitlab.Pipelines.retry(project.id, pipelines[0].id);
    expect(pipelineRetried.status).toBe('success');
    jobs = await jobsOf(project.id, pipelines[0].id);
    expect(jobs.map((j) => [j.name, j.status])).toEqual([
      ['work', 'success'],
      ['rescue', 'skipped'],
      ['ship', 'manual'],
    ]);
  });

  it('creates a pipeline through POST /projects/:id/pipeline with variables', async () => {
    const { project } = await pushCi('pipe-api', 'v:\n  script: [x]\n  rules:\n    - if: $DEPLOY == "yes"\n');
    const gitlab = client(ownerToken);
    const none = await app.request(`/projects/${project.id}/pipeline`, {
      method: 'POST',
      token: ownerToken,
      body: { ref: 'main' },
    });
    expect(none.status).toBe(400);
    expect(none.body.message.base[0]).toMatch(/Pipeline will not run/);
    const made = await gitlab.Pipelines.create(project.id, 'main', {
      variables: [{ key: 'DEPLOY', value: 'yes' }],
    } as never);
    expect(made).toMatchObject({ status: 'pending', source: 'api', ref: 'main' });
    const missingRef = await app.request(`/projects/${project.id}/pipeline`, {
      method: 'POST',
      token: ownerToken,
      body: {},
    });
    expect(missingRef.status).toBe(400);
    expect(missingRef.body).toEqual({ error: 'ref is missing' });
    const badRef = await app.request(`/projects/${project.id}/pipeline`, {
      method: 'POST',
      token: ownerToken,
      body: { ref: 'nope' },
    });
    expect(badRef.status).toBe(400);
    expect(badRef.body).toEqual({ message: { base: ['Reference not found'] } });
  });
});

describe('archive_builds_in_human_readable', () => {
  it('archives jobs older than the setting: no retry or play', async () => {
    const { project, pipelines } = await pushCi(
      'pipe-archive',
      'a:\n  script: [x]\nm:\n  script: [x]\n  when: manual\n',
    );
    const jobs = await jobsOf(project.id, pipelines[0].id);
    const manual = jobs.find((j) => j.name === 'm') as { id: number };
    await putSettings(app, adminToken, { archive_builds_in_human_readable: '1 day' });
    try {
      const fresh = await app.request(`/projects/${project.id}/jobs/${manual.id}`, { token: ownerToken });
      expect(fresh.body.archived).toBe(false);
      app.clock.advance(2 * 24 * 60 * 60 * 1000);
      const old = await app.request(`/projects/${project.id}/jobs/${manual.id}`, { token: ownerToken });
      expect(old.body.archived).toBe(true);
      const play = await app.request(`/projects/${project.id}/jobs/${manual.id}/play`, {
        method: 'POST',
        token: ownerToken,
      });
      expect(play.status).toBe(400);
      expect(play.body).toEqual({ message: 'Unplayable Job' });
      expect((await app.request(`/projects/${project.id}/jobs/${manual.id}`, { token: ownerToken })).body.status).toBe(
        'manual',
      );
    } finally {
      await putSettings(app, adminToken, { archive_builds_in_human_readable: '' });
    }
  });
});

describe('permissions', () => {
  it('lets every role that may read the project read pipelines, developers act, and hides private projects', async () => {
    const { project, pipelines } = await pushCi('pipe-perms', 'a:\n  script: [x]\n', 'main', 'private');
    const personas = await makeMembers(app, { type: 'project', id: project.id }, [
      'guest',
      'reporter',
      'developer',
      'maintainer',
    ]);
    const outsider = await makeUserWithToken(app);
    const read = (token?: string) => app.request(`/projects/${project.id}/pipelines`, token ? { token } : {});
    expect((await read()).status).toBe(404);
    expect((await read(outsider.token)).status).toBe(404);
    for (const member of personas) expect((await read(member.token)).status, member.name).toBe(200);
    const create = (token?: string) =>
      app.request(`/projects/${project.id}/pipeline`, {
        method: 'POST',
        body: { ref: 'main' },
        ...(token ? { token } : {}),
      });
    expect((await create()).status).toBe(401);
    for (const member of personas) {
      expect((await create(member.token)).status, member.name).toBe(
        ['developer', 'maintainer'].includes(member.name) ? 201 : 403,
      );
    }
    const cancel = (token: string) =>
      app.request(`/projects/${project.id}/pipelines/${pipelines[0].id}/cancel`, { method: 'POST', token });
    expect((await cancel(personas[1]?.token as string)).status).toBe(403);
    expect((await cancel(personas[2]?.token as string)).status).toBe(201);
    expect((await app.request(`/projects/${project.id}/pipelines/999999`, { token: ownerToken })).body).toEqual({
      message: '404 Not found',
    });
    expect((await app.request(`/projects/${project.id}/jobs/999999`, { token: ownerToken })).status).toBe(404);
    expect(
      (await app.request(`/projects/${project.id}/pipelines`, { token: ownerToken, query: { status: 'bogus' } }))
        .status,
    ).toBe(400);
  });
});
