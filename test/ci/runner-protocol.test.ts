import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { gitEnvironment } from '../../src/git/command.js';
import { register as registerShippedRunner, runOnce } from '../../src/runner/main.js';
import { failStuckBuilds, removeExpiredArtifacts } from '../../src/services/ci/builds.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { commitFiles, drainJobs, registerRunner, registrationToken, requestJob } from '../support/ci.js';
import { makeGroup, makeProject, makeSampleProject, makeUserWithToken } from '../support/factories.js';

const exec = promisify(execFile);
let app: TestApp;
let owner: User;
let ownerToken: string;
let adminToken: string;

beforeAll(async () => {
  app = await startTestApp();
  ({ user: owner, token: ownerToken } = await makeUserWithToken(app));
  ({ token: adminToken } = await makeUserWithToken(app, { admin: true }));
});
afterAll(async () => {
  await app?.close();
});

const TWO_STAGES = `
stages: [build, test]
variables:
  GREETING: hello
build-job:
  stage: build
  before_script:
    - echo "before $GREETING"
  script:
    - echo "building $CI_COMMIT_REF_NAME" > built.txt
    - cat built.txt
  after_script:
    - echo "after script ran"
  artifacts:
    paths: [built.txt]
test-job:
  stage: test
  script:
    - test -f built.txt && cat built.txt
    - echo "project $CI_PROJECT_PATH job $CI_JOB_NAME"
`;

async function pipelinesOf(projectId: number) {
  const res = await app.request(`/projects/${projectId}/pipelines`, { token: ownerToken });
  expect(res.status, res.text).toBe(200);
  return res.body as { id: number; status: string; ref: string; sha: string }[];
}

describe('the runner protocol as the GitLab runner speaks it', () => {
  it('hands out a job with the payload fields, streams a log with a gap refused, and finishes it', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'protocol-raw' });
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${project.id}`));
    expect(runner.token).toMatch(/^glrt-/);

    // Nothing to do yet: 204 with the long-polling header.
    const idle = await requestJob(app, runner.token);
    expect(idle.status).toBe(204);
    expect(idle.headers.get('X-GitLab-Last-Update')).toBeTruthy();

    const sha = await commitFiles(app, ownerToken, project, 'main', { '.gitlab-ci.yml': TWO_STAGES });
    expect(await drainJobs(app)).toBeGreaterThanOrEqual(1);
    const [pipeline] = await pipelinesOf(project.id);
    expect(pipeline).toMatchObject({ status: 'pending', ref: 'main', sha });

    const first = await requestJob(app, runner.token);
    expect(first.status, first.text).toBe(201);
    const job = first.body;
    expect(job).toMatchObject({
      allow_git_fetch: true,
      job_info: { name: 'build-job', stage: 'build', project_id: project.id },
      git_info: { ref: 'main', sha, ref_type: 'branch', before_sha: expect.any(String) },
      runner_info: { timeout: 3600 },
      image: null,
      services: [],
    });
    expect(job.token).toMatch(/^glcbt-/);
    expect(job.git_info.repo_url).toContain(`gitlab-ci-token:${job.token}@`);
    expect(job.steps[0]).toMatchObject({
      name: 'script',
      script: ['echo "before $GREETING"', 'echo "building $CI_COMMIT_REF_NAME" > built.txt', 'cat built.txt'],
    });
    expect(job.steps[1]).toMatchObject({ name: 'after_script', when: 'always' });
    expect(job.artifacts[0]).toMatchObject({ paths: ['built.txt'], artifact_type: 'archive', artifact_format: 'zip' });
    const vars = Object.fromEntries(job.variables.map((v: { key: string; value: string }) => [v.key, v.value]));
    expect(vars).toMatchObject({
      CI: 'true',
      GITLAB_CI: 'true',
      CI_JOB_ID: String(job.id),
      CI_JOB_TOKEN: job.token,
      CI_COMMIT_SHA: sha,
      CI_COMMIT_REF_NAME: 'main',
      CI_COMMIT_BRANCH: 'main',
      CI_PROJECT_ID: String(project.id),
      CI_PROJECT_PATH: project.full_path,
      CI_PIPELINE_ID: String(pipeline?.id),
      CI_PIPELINE_SOURCE: 'push',
      GREETING: 'hello',
    });

    // The runner is online now, with the info it sent.
    const detail = await app.request(`/runners/${runner.id}`, { token: ownerToken });
    expect(detail.body).toMatchObject({
      status: 'online',
      online: true,
      version: '17.0.0',
      platform: 'linux',
      architecture: 'amd64',
    });

    // The second job waits for the first stage.
    expect((await requestJob(app, runner.token)).status).toBe(204);

    const patch = (start: number, data: string, token = job.token) =>
      fetch(`${app.baseUrl}/api/v4/jobs/${job.id}/trace`, {
        method: 'PATCH',
        headers: {
          'JOB-TOKEN': token,
          'Content-Type': 'text/plain',
          'Content-Range': `${start}-${start + data.length - 1}`,
        },
        body: data,
      });
    const one = await patch(0, 'hello ');
    expect(one.status).toBe(202);
    expect(one.headers.get('Range')).toBe('0-6');
    expect(one.headers.get('Job-Status')).toBe('running');
    const gap = await patch(10, 'oops');
    expect(gap.status).toBe(416);
    expect(gap.headers.get('Range')).toBe('0-6');
    const two = await patch(6, 'world\n');
    expect(two.status).toBe(202);
    expect(two.headers.get('Range')).toBe('0-12');
    expect((await patch(12, 'x', 'glcbt-wrong')).status).toBe(403);
    const trace = await app.request(`/projects/${project.id}/jobs/${job.id}/trace`, { token: ownerToken });
    expect(trace.text).toBe('hello world\n');

    const done = await fetch(`${app.baseUrl}/api/v4/jobs/${job.id}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: job.token, state: 'success', exit_code: 0 }),
    });
    expect(done.status).toBe(200);
    expect(done.headers.get('Job-Status')).toBe('success');
    // A finished job's token no longer updates it.
    const again = await fetch(`${app.baseUrl}/api/v4/jobs/${job.id}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: job.token, state: 'failed' }),
    });
    expect(again.status).toBe(403);
    expect(again.headers.get('Job-Status')).toBe('success');

    const second = await requestJob(app, runner.token);
    expect(second.status).toBe(201);
    expect(second.body.job_info.name).toBe('test-job');
    const fail = await fetch(`${app.baseUrl}/api/v4/jobs/${second.body.id}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        token: second.body.token,
        state: 'failed',
        failure_reason: 'script_failure',
        exit_code: 2,
      }),
    });
    expect(fail.status).toBe(200);
    const finished = await app.request(`/projects/${project.id}/pipelines/${pipeline?.id}`, { token: ownerToken });
    expect(finished.body).toMatchObject({ status: 'failed', yaml_errors: null });
    const failedJob = await app.request(`/projects/${project.id}/jobs/${second.body.id}`, { token: ownerToken });
    expect(failedJob.body).toMatchObject({
      status: 'failed',
      failure_reason: 'script_failure',
      runner: { id: runner.id },
    });

    const ranJobs = await app.request(`/runners/${runner.id}/jobs`, { token: ownerToken });
    expect(ranJobs.status).toBe(200);
    expect(ranJobs.body.map((j: { id: number }) => j.id)).toEqual([second.body.id, job.id]);
    expect(ranJobs.body[0].project).toMatchObject({ id: project.id, path_with_namespace: project.full_path });
  });

  it('refuses an unknown runner token with 403, and bad input with GitLab 4xx that change nothing', async () => {
    expect((await requestJob(app, 'glrt-nope')).status).toBe(403);
    const noToken = await app.request('/jobs/request', { method: 'POST', body: {} });
    expect(noToken.status).toBe(400);
    expect(noToken.body).toEqual({ error: 'token is missing' });

    const { project } = await makeSampleProject(app, owner, { path: 'protocol-bad-input' });
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${project.id}`));
    await commitFiles(app, ownerToken, project, 'main', { '.gitlab-ci.yml': 'j:\n  script: [true]\n' });
    await drainJobs(app);
    const job = (await requestJob(app, runner.token)).body;
    const put = (body: Record<string, unknown>, id = job.id) =>
      app.request(`/jobs/${id}`, { method: 'PUT', body: { token: job.token, ...body } });
    expect((await put({ state: 'exploded' })).status).toBe(400);
    // An unknown job is 403 as a wrong token is (runner.rb authenticate_job!: never 404).
    expect((await put({ state: 'success' }, 999999)).status).toBe(403);
    // A user's credentials mean nothing to the runner protocol: the token is still missing.
    const userOnly = await app.request(`/jobs/${job.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { state: 'success' },
    });
    expect(userOnly.status).toBe(400);
    expect(userOnly.body).toEqual({ error: 'token is missing' });
    const noRange = await fetch(`${app.baseUrl}/api/v4/jobs/${job.id}/trace`, {
      method: 'PATCH',
      headers: { 'JOB-TOKEN': job.token },
      body: 'x',
    });
    expect(noRange.status).toBe(400);
    const noFile = await app.request(`/jobs/${job.id}/artifacts`, { method: 'POST', body: { token: job.token } });
    expect(noFile.status).toBe(400);
    expect(noFile.body).toEqual({ error: 'file is missing' });
    const still = await app.request(`/projects/${project.id}/jobs/${job.id}`, { token: ownerToken });
    expect(still.body).toMatchObject({ status: 'running', artifacts: [] });
    expect((await app.request(`/projects/${project.id}/jobs/${job.id}/trace`, { token: ownerToken })).text).toBe('');

    expect((await put({ state: 'success' })).status).toBe(200);
    const filtered = await app.request(`/runners/${runner.id}/jobs`, {
      token: ownerToken,
      query: { status: 'failed' },
    });
    expect(filtered.body).toEqual([]);
    const succeeded = await app.request(`/runners/${runner.id}/jobs`, {
      token: ownerToken,
      query: { status: 'success', sort: 'asc' },
    });
    expect(succeeded.body.map((j: { id: number }) => j.id)).toEqual([job.id]);
    const badSort = await app.request(`/runners/${runner.id}/jobs`, { token: ownerToken, query: { sort: 'sideways' } });
    expect(badSort.status).toBe(400);
  });

  it('gives each of two racing runners a different job', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'protocol-race' });
    const registration = await registrationToken(app, ownerToken, `/projects/${project.id}`);
    const runners = await Promise.all([registerRunner(app, registration), registerRunner(app, registration)]);
    const jobs = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`job${i}`, { script: ['true'] }]));
    await commitFiles(app, ownerToken, project, 'main', { '.gitlab-ci.yml': JSON.stringify(jobs) });
    await drainJobs(app);
    const claimed: number[] = [];
    for (let round = 0; round < 4; round++) {
      const answers = await Promise.all(runners.flatMap((r) => [requestJob(app, r.token), requestJob(app, r.token)]));
      for (const a of answers) if (a.status === 201) claimed.push(a.body.id);
    }
    expect(claimed).toHaveLength(6);
    expect(new Set(claimed).size).toBe(6);
  });

  it('matches jobs to runners by tags, run_untagged and protected refs', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'protocol-match' });
    const registration = await registrationToken(app, ownerToken, `/projects/${project.id}`);
    const untaggedOnly = await registerRunner(app, registration, { run_untagged: true });
    const docker = await registerRunner(app, registration, { tag_list: 'docker', run_untagged: false });
    const protectedOnly = await registerRunner(app, registration, {
      tag_list: 'deploy',
      access_level: 'ref_protected',
      run_untagged: false,
    });
    const config = {
      plain: { script: ['true'] },
      tagged: { script: ['true'], tags: ['docker'] },
      deploy: { script: ['true'], tags: ['deploy'] },
    };
    // `ci-topic` is not protected; `main` (the default branch) is.
    await commitFiles(
      app,
      ownerToken,
      project,
      'ci-topic',
      { '.gitlab-ci.yml': JSON.stringify(config) },
      { startBranch: 'main' },
    );
    await drainJobs(app);
    expect((await requestJob(app, protectedOnly.token)).status).toBe(204);
    const tagged = await requestJob(app, docker.token);
    expect(tagged.body.job_info.name).toBe('tagged');
    expect((await requestJob(app, docker.token)).status).toBe(204);
    const plain = await requestJob(app, untaggedOnly.token);
    expect(plain.body.job_info.name).toBe('plain');
    expect((await requestJob(app, untaggedOnly.token)).status).toBe(204);

    await commitFiles(app, ownerToken, project, 'main', {
      '.gitlab-ci.yml': JSON.stringify({ deploy: config.deploy }),
    });
    await drainJobs(app);
    const onMain = await requestJob(app, protectedOnly.token);
    expect(onMain.status).toBe(201);
    expect(onMain.body.git_info.ref).toBe('main');
    // The topic branch's deploy job is still waiting: the protected runner never takes it.
    expect((await requestJob(app, protectedOnly.token)).status).toBe(204);
  });

  it("hands jobs to instance runners and to runners of the project's group or its ancestors only", async () => {
    const top = await makeGroup(app, owner, { path: 'scope-top' });
    const sub = await makeGroup(app, owner, { path: 'scope-sub', parent: top });
    const elsewhere = await makeGroup(app, owner, { path: 'scope-elsewhere' });
    const { project } = await makeSampleProject(app, owner, {
      path: 'scope-project',
      namespace: sub,
      visibility: 'private',
    });
    const tags = { tag_list: 'scope-test', run_untagged: false };
    const foreign = await registerRunner(
      app,
      await registrationToken(app, ownerToken, `/groups/${elsewhere.id}`),
      tags,
    );
    const ancestor = await registerRunner(app, await registrationToken(app, ownerToken, `/groups/${top.id}`), tags);
    const instance = await registerRunner(app, await registrationToken(app, adminToken, ''), tags);
    const jobs = { a: { script: ['true'], tags: ['scope-test'] }, b: { script: ['true'], tags: ['scope-test'] } };
    await commitFiles(app, ownerToken, project, 'main', { '.gitlab-ci.yml': JSON.stringify(jobs) });
    await drainJobs(app);
    expect((await requestJob(app, foreign.token)).status).toBe(204);
    const viaGroup = await requestJob(app, ancestor.token);
    expect(viaGroup.status).toBe(201);
    expect(viaGroup.body.job_info.project_id).toBe(project.id);
    const viaInstance = await requestJob(app, instance.token);
    expect(viaInstance.status).toBe(201);
    expect(viaInstance.body.id).not.toBe(viaGroup.body.id);
  });

  it('lets a job token clone its own project over HTTP, and nothing else', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'protocol-clone', visibility: 'private' });
    const other = await makeProject(app, owner, { path: 'protocol-other', initializeWithReadme: true });
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${project.id}`));
    await commitFiles(app, ownerToken, project, 'main', { '.gitlab-ci.yml': 'j:\n  script: [true]\n' });
    await drainJobs(app);
    const job = (await requestJob(app, runner.token)).body;
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ci-clone-'));
    try {
      const clone = (url: string, target: string) =>
        exec('git', ['clone', '-q', url, path.join(dir, target)], { env: gitEnvironment() }).then(
          () => 0,
          () => 1,
        );
      expect(await clone(job.git_info.repo_url, 'ok')).toBe(0);
      const head = (
        await exec('git', ['-C', path.join(dir, 'ok'), 'rev-parse', 'HEAD'], { env: gitEnvironment() })
      ).stdout.trim();
      expect(head).toBe(job.git_info.sha);
      const otherUrl = job.git_info.repo_url.replace(project.full_path, other.full_path);
      expect(await clone(otherUrl, 'other')).toBe(1);
      // Once the job is over its token clones nothing.
      await fetch(`${app.baseUrl}/api/v4/jobs/${job.id}`, {
        method: 'PUT',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token: job.token, state: 'success' }),
      });
      expect(await clone(job.git_info.repo_url, 'late')).toBe(1);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('fails jobs stuck running past their timeout with stuck_or_timeout_failure', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'protocol-stuck' });
    const runner = await registerRunner(app, await registrationToken(app, ownerToken, `/projects/${project.id}`));
    await commitFiles(app, ownerToken, project, 'main', {
      '.gitlab-ci.yml': 'j:\n  script: [true]\n  timeout: 10 minutes\n',
    });
    await drainJobs(app);
    const job = (await requestJob(app, runner.token)).body;
    expect(job.runner_info.timeout).toBe(600);
    expect(await failStuckBuilds(app.deps)).toBe(0);
    app.clock.advance(2 * 60 * 60 * 1000);
    expect(await failStuckBuilds(app.deps)).toBe(1);
    const res = await app.request(`/projects/${project.id}/jobs/${job.id}`, { token: ownerToken });
    expect(res.body).toMatchObject({ status: 'failed', failure_reason: 'stuck_or_timeout_failure' });
  });
});

describe('the shipped runner', () => {
  it('registers, runs a two-stage pipeline to success with artifacts passed on, and one that fails', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'shipped-runner', visibility: 'private' });
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ci-runner-'));
    try {
      const config = await registerShippedRunner({
        url: app.baseUrl,
        registrationToken: await registrationToken(app, ownerToken, `/projects/${project.id}`),
        config: path.join(dir, 'runner.json'),
        description: 'shipped',
      });
      expect((await fs.stat(path.join(dir, 'runner.json'))).mode & 0o777).toBe(0o600);
      await commitFiles(app, ownerToken, project, 'main', { '.gitlab-ci.yml': TWO_STAGES });
      await drainJobs(app);
      expect(await runOnce({ ...config, buildsDir: dir })).toBe('success');
      expect(await runOnce({ ...config, buildsDir: dir })).toBe('success');
      expect(await runOnce({ ...config, buildsDir: dir })).toBeNull();
      const [pipeline] = await pipelinesOf(project.id);
      expect(pipeline?.status).toBe('success');
      const jobs = (await app.request(`/projects/${project.id}/pipelines/${pipeline?.id}/jobs`, { token: ownerToken }))
        .body;
      expect(jobs.map((j: { name: string; status: string }) => [j.name, j.status])).toEqual([
        ['build-job', 'success'],
        ['test-job', 'success'],
      ]);
      const buildLog = (await app.request(`/projects/${project.id}/jobs/${jobs[0].id}/trace`, { token: ownerToken }))
        .text;
      expect(buildLog).toContain('before hello');
      expect(buildLog).toContain('building main');
      expect(buildLog).toContain('after script ran');
      const testLog = (await app.request(`/projects/${project.id}/jobs/${jobs[1].id}/trace`, { token: ownerToken }))
        .text;
      expect(testLog).toContain('building main');
      expect(testLog).toContain(`project ${project.full_path} job test-job`);
      const artifacts = await app.request(`/projects/${project.id}/jobs/${jobs[0].id}/artifacts`, {
        token: ownerToken,
      });
      expect(artifacts.status).toBe(200);
      expect(artifacts.headers.get('Content-Type')).toBe('application/zip');
      // The archive expires after default_artifacts_expire_in (30 days): then the hourly job removes it.
      expect(jobs[0].artifacts_expire_at).not.toBeNull();
      expect(await removeExpiredArtifacts(app.deps)).toBe(0);
      app.clock.advance(31 * 24 * 60 * 60 * 1000);
      expect(await removeExpiredArtifacts(app.deps)).toBeGreaterThanOrEqual(1);
      const gone = await app.request(`/projects/${project.id}/jobs/${jobs[0].id}/artifacts`, { token: ownerToken });
      expect(gone.status).toBe(404);
      app.clock.advance(-31 * 24 * 60 * 60 * 1000);

      await commitFiles(
        app,
        ownerToken,
        project,
        'main',
        {
          '.gitlab-ci.yml':
            'stages: [a, b]\nbad:\n  stage: a\n  script: [echo failing, exit 3]\nnever:\n  stage: b\n  script: [echo unreachable]\n',
        },
        { action: 'update' },
      );
      await drainJobs(app);
      expect(await runOnce({ ...config, buildsDir: dir })).toBe('failed');
      expect(await runOnce({ ...config, buildsDir: dir })).toBeNull();
      const [latest] = await pipelinesOf(project.id);
      expect(latest?.status).toBe('failed');
      const failedJobs = (
        await app.request(`/projects/${project.id}/pipelines/${latest?.id}/jobs`, { token: ownerToken })
      ).body;
      expect(failedJobs.map((j: { name: string; status: string }) => [j.name, j.status])).toEqual([
        ['bad', 'failed'],
        ['never', 'skipped'],
      ]);
      expect(failedJobs[0].failure_reason).toBe('script_failure');
      const log = (await app.request(`/projects/${project.id}/jobs/${failedJobs[0].id}/trace`, { token: ownerToken }))
        .text;
      expect(log).toContain('failing');
      expect(log).toContain('exit code 3');
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('honours cancel and the job timeout, and runs on_failure jobs after a failure', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'shipped-cancel', visibility: 'private' });
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ci-runner-'));
    try {
      const config = await registerShippedRunner({
        url: app.baseUrl,
        registrationToken: await registrationToken(app, ownerToken, `/projects/${project.id}`),
        config: path.join(dir, 'runner.json'),
      });
      const yaml = [
        'stages: [a, b]',
        'long:',
        '  stage: a',
        '  script: [echo started, sleep 30]',
        'slow:',
        '  stage: a',
        '  script: [sleep 30]',
        '  timeout: 2 seconds',
        'rescue:',
        '  stage: b',
        '  script: [echo rescued]',
        '  when: on_failure',
        '',
      ].join('\n');
      await commitFiles(app, ownerToken, project, 'main', { '.gitlab-ci.yml': yaml });
      await drainJobs(app);
      const [pipeline] = await pipelinesOf(project.id);
      const jobs = (await app.request(`/projects/${project.id}/pipelines/${pipeline?.id}/jobs`, { token: ownerToken }))
        .body;
      const long = jobs.find((j: { name: string }) => j.name === 'long');
      const running = runOnce({ ...config, buildsDir: dir });
      // Cancel once the job has started and sent its first lines.
      for (let i = 0; i < 50; i++) {
        const log = await app.request(`/projects/${project.id}/jobs/${long.id}/trace`, { token: ownerToken });
        if (log.text.includes('started')) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const cancel = await app.request(`/projects/${project.id}/jobs/${long.id}/cancel`, {
        method: 'POST',
        token: ownerToken,
      });
      expect(cancel.status).toBe(201);
      const started = Date.now();
      expect(await running).toBe('canceled');
      expect(Date.now() - started).toBeLessThan(10_000);

      expect(await runOnce({ ...config, buildsDir: dir })).toBe('failed');
      const slow = (
        await app.request(`/projects/${project.id}/jobs/${jobs.find((j: { name: string }) => j.name === 'slow').id}`, {
          token: ownerToken,
        })
      ).body;
      expect(slow).toMatchObject({ status: 'failed', failure_reason: 'job_execution_timeout' });
      expect(await runOnce({ ...config, buildsDir: dir })).toBe('success');
      const after = (await app.request(`/projects/${project.id}/pipelines/${pipeline?.id}/jobs`, { token: ownerToken }))
        .body;
      expect(after.map((j: { name: string; status: string }) => [j.name, j.status])).toEqual([
        ['long', 'canceled'],
        ['slow', 'failed'],
        ['rescue', 'success'],
      ]);
      expect(
        (await app.request(`/projects/${project.id}/pipelines/${pipeline?.id}`, { token: ownerToken })).body.status,
      ).toBe('failed');
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('works from its command line: npm run runner -- register, then run --once', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'shipped-cli', visibility: 'private' });
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ci-cli-'));
    try {
      const cli = (...args: string[]) =>
        exec(process.execPath, ['--import', 'tsx', 'src/runner/main.ts', ...args], {
          cwd: path.resolve(import.meta.dirname, '../..'),
          env: { PATH: process.env.PATH ?? '', HOME: dir },
          encoding: 'utf8',
        });
      const registration = await registrationToken(app, ownerToken, `/projects/${project.id}`);
      const config = path.join(dir, 'runner.json');
      const registered = await cli(
        'register',
        '--url',
        app.baseUrl,
        '--token',
        registration,
        '--config',
        config,
        '--tag-list',
        'cli',
      );
      expect(registered.stdout).toMatch(/^Runner \d+ registered/);
      expect(JSON.parse(await fs.readFile(config, 'utf8'))).toMatchObject({
        url: app.baseUrl,
        token: expect.stringMatching(/^glrt-/),
      });
      expect((await cli('run', '--once', '--config', config)).stdout).toContain('No job');
      await commitFiles(app, ownerToken, project, 'main', {
        '.gitlab-ci.yml': 'hello:\n  tags: [cli]\n  script: [echo hello from the cli]\n',
      });
      await drainJobs(app);
      const ran = await cli('run', '--once', '--config', config);
      expect(ran.stdout).toContain('hello from the cli');
      expect(ran.stdout).toContain('Job success');
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
