import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { scheduleEnvironmentJobs } from '../../src/jobs/environments.js';
import { type RunnerConfig, register as registerShippedRunner, runOnce } from '../../src/runner/main.js';
import { environmentSlug } from '../../src/services/environments.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { commitFiles, drainJobs, registrationToken, requestJob } from '../support/ci.js';
import { makeMembers, makePersonas, makeSampleProject, makeUserWithToken } from '../support/factories.js';

let app: TestApp;
let owner: User;
let ownerToken: string;
let adminToken: string;
let runnerDir: string;
let runner: RunnerConfig;

const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;
const client = (token: string) => new Gitlab({ host: app.baseUrl, token });

beforeAll(async () => {
  app = await startTestApp();
  ({ user: owner, token: ownerToken } = await makeUserWithToken(app));
  ({ token: adminToken } = await makeUserWithToken(app, { admin: true }));
  runnerDir = await fs.mkdtemp(path.join(os.tmpdir(), 'env-runner-'));
  // One instance runner (the shipped one) serves every project of this file.
  runner = await registerShippedRunner({
    url: app.baseUrl,
    registrationToken: await registrationToken(app, adminToken, ''),
    config: path.join(runnerDir, 'runner.json'),
    description: 'environments',
  });
});
afterAll(async () => {
  await app?.close();
  if (runnerDir) await fs.rm(runnerDir, { recursive: true, force: true });
});

const run = () => runOnce({ ...runner, buildsDir: runnerDir });

const REVIEW_CI = `
stages: [deploy, cleanup]
deploy-review:
  stage: deploy
  script:
    - echo "deploying $CI_ENVIRONMENT_NAME" > deployed.txt
    - echo "env $CI_ENVIRONMENT_NAME $CI_ENVIRONMENT_SLUG $CI_ENVIRONMENT_URL $CI_ENVIRONMENT_TIER $CI_ENVIRONMENT_ACTION"
  artifacts:
    paths: [deployed.txt]
  environment:
    name: review/$CI_COMMIT_REF_SLUG
    url: https://$CI_ENVIRONMENT_SLUG.example.com
    on_stop: stop-review
    auto_stop_in: 1 day
stop-review:
  stage: cleanup
  script:
    - echo "stopping review app"
  when: manual
  environment:
    name: review/$CI_COMMIT_REF_SLUG
    action: stop
`;

async function pushCi(project: Project, yaml: string, branch = 'main'): Promise<string> {
  const sha = await commitFiles(
    app,
    ownerToken,
    project,
    branch,
    { '.gitlab-ci.yml': yaml },
    branch === 'main' ? {} : { startBranch: 'main' },
  );
  await drainJobs(app);
  return sha;
}

async function deploymentsOf(projectId: number) {
  const res = await app.request(`/projects/${projectId}/deployments`, { token: ownerToken });
  expect(res.status, res.text).toBe(200);
  return res.body as { id: number; iid: number; status: string; environment: { name: string } }[];
}

describe('deployments from CI, run by the shipped runner', () => {
  it('deploys a review app with its URL and last deployment, and stopping runs the on_stop job', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-review', visibility: 'private' });
    const sha = await pushCi(project, REVIEW_CI, 'feature/login');
    const name = 'review/feature-login';
    const slug = environmentSlug(name);
    // The slug is GitLab's: changed by slugging, so 17 characters, a dash and a 6-character suffix.
    expect(slug).toMatch(/^review-feature-lo-[a-z0-9]{6}$/);

    // The environment and a `created` deployment exist as soon as the job does.
    const [pending] = await deploymentsOf(project.id);
    expect(pending).toMatchObject({ iid: 1, status: 'created', environment: { name } });

    const deployedAt = app.clock.now();
    expect(await run()).toBe('success');
    expect(await run()).toBeNull(); // the stop job is manual

    const gitlab = client(ownerToken);
    const environments = await gitlab.Environments.all(project.id);
    expect(environments).toHaveLength(1);
    const listed = environments[0] as Record<string, unknown>;
    expect(listed).toMatchObject({ name, slug, state: 'available', external_url: `https://${slug}.example.com` });
    expect(listed.last_deployment).toBeUndefined();
    expect(listed.project).toMatchObject({ id: project.id, path_with_namespace: project.full_path });

    const shown = (await gitlab.Environments.show(project.id, listed.id as number)) as Record<string, any>;
    expect(shown).toMatchObject({ id: listed.id, name, slug, state: 'available', tier: 'development' });
    expect(new Date(shown.auto_stop_at).getTime() - deployedAt.getTime()).toBeGreaterThanOrEqual(DAY - 1000);
    expect(new Date(shown.auto_stop_at).getTime() - deployedAt.getTime()).toBeLessThanOrEqual(DAY + 60_000);
    const last = shown.last_deployment;
    expect(last).toMatchObject({
      id: pending?.id,
      iid: 1,
      ref: 'feature/login',
      sha,
      status: 'success',
      user: { id: owner.id, username: owner.username },
    });
    expect(last.environment).toBeUndefined();
    expect(shown.project).toBeUndefined();
    const runnerRow = await app.deps.db.selectFrom('ci_runners').select('id').executeTakeFirstOrThrow();
    expect(last.deployable).toMatchObject({
      name: 'deploy-review',
      stage: 'deploy',
      status: 'success',
      ref: 'feature/login',
      tag: false,
      coverage: null,
      user: { id: owner.id },
      commit: { id: sha, short_id: sha.slice(0, 8) },
      pipeline: { sha, ref: 'feature/login', status: 'success' },
      runner: { id: runnerRow.id, description: 'environments' },
      artifacts: [{ file_type: 'archive', filename: 'artifacts.zip', file_format: 'zip' }],
    });
    expect(last.deployable.artifacts[0].size).toBeGreaterThan(0);
    expect(last.deployable.started_at).toEqual(expect.any(String));
    expect(last.deployable.finished_at).toEqual(expect.any(String));
    expect(last.deployable.duration).toEqual(expect.any(Number));
    expect(last.deployable.web_url).toContain(`/-/jobs/${last.deployable.id}`);
    expect(last.deployable.artifacts_expire_at).toEqual(expect.any(String));
    // The job saw GitLab's CI_ENVIRONMENT_* variables, expanded.
    const trace = await app.request(`/projects/${project.id}/jobs/${last.deployable.id}/trace`, { token: ownerToken });
    expect(trace.text).toContain(`env ${name} ${slug} https://${slug}.example.com development start`);

    // Stop: the environment is stopping while its on_stop job runs, stopped when the job succeeds.
    const stopping = await gitlab.Environments.stop(project.id, listed.id as number);
    expect(stopping).toMatchObject({ id: listed.id, state: 'stopping' });
    expect(await run()).toBe('success');
    const stopped = await gitlab.Environments.show(project.id, listed.id as number);
    expect(stopped).toMatchObject({ state: 'stopped', auto_stop_at: null });
    const jobs = (await app.request(`/projects/${project.id}/jobs`, { token: ownerToken })).body as {
      name: string;
      status: string;
    }[];
    expect(jobs.find((j) => j.name === 'stop-review')?.status).toBe('success');
    // A stop job makes no deployment.
    expect(await deploymentsOf(project.id)).toHaveLength(1);

    // A new deployment to the stopped environment makes it available again.
    await app.request(`/projects/${project.id}/pipeline`, {
      method: 'POST',
      token: ownerToken,
      body: { ref: 'feature/login' },
    });
    expect(await run()).toBe('success');
    expect(await gitlab.Environments.show(project.id, listed.id as number)).toMatchObject({ state: 'available' });
    const again = await deploymentsOf(project.id);
    expect(again.map((d) => [d.iid, d.status])).toEqual([
      [1, 'success'],
      [2, 'success'],
    ]);
    expect((await gitlab.Environments.show(project.id, listed.id as number)).last_deployment).toMatchObject({
      iid: 2,
    });
    // The first pipeline moving again (a retried job) does not replay its old stop job.
    const retry = await app.request(`/projects/${project.id}/jobs/${last.deployable.id}/retry`, {
      method: 'POST',
      token: ownerToken,
    });
    expect(retry.status, retry.text).toBe(201);
    expect(await gitlab.Environments.show(project.id, listed.id as number)).toMatchObject({ state: 'available' });
    expect(await run()).toBe('success');
    expect(await gitlab.Environments.show(project.id, listed.id as number)).toMatchObject({ state: 'available' });
    expect((await deploymentsOf(project.id)).map((d) => [d.iid, d.status])).toEqual([
      [1, 'success'],
      [2, 'success'],
      [3, 'success'],
    ]);
  });

  it('follows the job: created, running, failed; a failed deployment is not the last one', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-states', visibility: 'private' });
    await pushCi(project, 'deploy:\n  script: [exit 1]\n  environment: production\n');
    const [deployment] = await deploymentsOf(project.id);
    expect(deployment).toMatchObject({ status: 'created', environment: { name: 'production' } });
    const claimed = await requestJob(app, runner.token);
    expect(claimed.status, claimed.text).toBe(201);
    expect((await deploymentsOf(project.id))[0]?.status).toBe('running');
    const put = await app.request(`/jobs/${claimed.body.id}`, {
      method: 'PUT',
      body: { token: claimed.body.token, state: 'failed', failure_reason: 'script_failure', exit_code: 1 },
    });
    expect(put.status, put.text).toBe(200);
    const [failed] = await deploymentsOf(project.id);
    expect(failed?.status).toBe('failed');
    const gitlab = client(ownerToken);
    const [environment] = await gitlab.Environments.all(project.id, { name: 'production' });
    expect(environment).toMatchObject({ name: 'production', slug: 'production', tier: 'production' });
    expect((await gitlab.Environments.show(project.id, environment?.id as number)).last_deployment).toBeNull();

    // A canceled job cancels its deployment.
    await app.request(`/projects/${project.id}/pipeline`, { method: 'POST', token: ownerToken, body: { ref: 'main' } });
    const pipelines = (await app.request(`/projects/${project.id}/pipelines`, { token: ownerToken })).body;
    const cancel = await app.request(`/projects/${project.id}/pipelines/${pipelines[0].id}/cancel`, {
      method: 'POST',
      token: ownerToken,
    });
    expect(cancel.status, cancel.text).toBe(201);
    expect((await deploymentsOf(project.id)).map((d) => d.status)).toEqual(['failed', 'canceled']);
  });

  it('a failed stop job leaves the environment available; force stops without the job', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-stop-fail', visibility: 'private' });
    await pushCi(project, REVIEW_CI.replace('echo "stopping review app"', 'exit 3'));
    expect(await run()).toBe('success');
    const gitlab = client(ownerToken);
    const [review] = await gitlab.Environments.all(project.id, { name: 'review/main' });
    const id = review?.id as number;
    expect(await gitlab.Environments.stop(project.id, id)).toMatchObject({ state: 'stopping' });
    expect(await run()).toBe('failed');
    expect(await gitlab.Environments.show(project.id, id)).toMatchObject({ state: 'available' });
    // Stopping again runs the stop job again (a new try of it).
    expect(await gitlab.Environments.stop(project.id, id)).toMatchObject({ state: 'stopping' });
    const retried = await requestJob(app, runner.token);
    expect(retried.status, retried.text).toBe(201);
    expect(retried.body.job_info.name).toBe('stop-review');
    await app.request(`/jobs/${retried.body.id}`, {
      method: 'PUT',
      body: { token: retried.body.token, state: 'failed', failure_reason: 'script_failure' },
    });
    expect(await gitlab.Environments.show(project.id, id)).toMatchObject({ state: 'available' });
    // force: stopped at once, no job run.
    const jobsBefore = (await app.request(`/projects/${project.id}/jobs`, { token: ownerToken })).body.length;
    const forced = await app.request(`/projects/${project.id}/environments/${id}/stop`, {
      method: 'POST',
      token: ownerToken,
      body: { force: true },
    });
    expect(forced.status, forced.text).toBe(200);
    expect(forced.body).toMatchObject({ id, state: 'stopped' });
    expect((await app.request(`/projects/${project.id}/jobs`, { token: ownerToken })).body).toHaveLength(jobsBefore);
    expect(await run()).toBeNull();
  });

  it('auto_stop_in stops the environment through the durable recurring job, running the stop job', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-autostop', visibility: 'private' });
    await pushCi(
      project,
      REVIEW_CI.replace('auto_stop_in: 1 day', 'auto_stop_in: 2 hours').replaceAll('review/$CI_COMMIT_REF_SLUG', 'qa'),
    );
    expect(await run()).toBe('success');
    const gitlab = client(ownerToken);
    const [qa] = await gitlab.Environments.all(project.id, { name: 'qa' });
    expect(qa).toMatchObject({ state: 'available' });

    const runRecurring = async () => {
      await app.deps.db
        .insertInto('jobs')
        .values({
          kind: 'environments_auto_stop',
          payload: JSON.stringify({ recurring: true }),
          locked_by: null,
          locked_at: null,
          heartbeat_at: null,
          last_error: null,
          finished_at: null,
        })
        .execute();
      await drainJobs(app);
    };
    // Not yet due: nothing happens.
    app.clock.advance(HOUR);
    await runRecurring();
    expect(await gitlab.Environments.show(project.id, qa?.id as number)).toMatchObject({ state: 'available' });
    // Due: the on_stop job is played and its success stops the environment.
    app.clock.advance(2 * HOUR);
    await runRecurring();
    const queuedNext = await app.deps.db
      .selectFrom('jobs')
      .select(['kind', 'run_at'])
      .where('kind', '=', 'environments_auto_stop')
      .where('state', '=', 'queued')
      .execute();
    expect(queuedNext).toHaveLength(1);
    expect(await gitlab.Environments.show(project.id, qa?.id as number)).toMatchObject({ state: 'stopping' });
    expect(await run()).toBe('success');
    expect(await gitlab.Environments.show(project.id, qa?.id as number)).toMatchObject({
      state: 'stopped',
      auto_stop_at: null,
    });
  });
});

describe('environments API', () => {
  it('creates with GitLab name rules and slugs, lists with name, search and states, updates and deletes', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-crud', visibility: 'private' });
    const gitlab = client(ownerToken);
    const production = await gitlab.Environments.create(project.id, 'Production', {
      externalUrl: 'https://prod.example.com',
    });
    expect(production).toMatchObject({
      name: 'Production',
      slug: environmentSlug('Production'),
      external_url: 'https://prod.example.com',
      state: 'available',
      tier: 'production',
    });
    // Lower-casing changed the name: 17 characters at most, a dash and the 6-character suffix.
    expect(production.slug).toMatch(/^production-[a-z0-9]{6}$/);
    const staging = await gitlab.Environments.create(project.id, 'staging');
    expect(staging).toMatchObject({ slug: 'staging', external_url: null, tier: 'staging' });
    expect((await gitlab.Environments.create(project.id, '1-app')).slug).toMatch(/^env-1-app-[a-z0-9]{6}$/);
    expect((await gitlab.Environments.create(project.id, 'review/a-very-long-branch-name-here')).slug).toMatch(
      /^review-a-very-lon-[a-z0-9]{6}$/,
    );

    const post = (body: Record<string, unknown>) =>
      app.request(`/projects/${project.id}/environments`, { method: 'POST', token: ownerToken, body });
    const invalidName = await post({ name: '/leading' });
    expect(invalidName.status).toBe(400);
    expect(invalidName.body).toEqual({
      message: {
        name: [
          "can contain only letters, digits, '-', '_', '/', '$', '{', '}', '.', and spaces, but it cannot start or end with '/'",
        ],
      },
    });
    expect((await post({ name: 'bad*name' })).status).toBe(400);
    expect((await post({ name: 'staging' })).body).toEqual({ message: { name: ['has already been taken'] } });
    expect((await post({ name: 'x', slug: 'x' })).body).toEqual({
      error: 'slug is automatically generated and cannot be changed',
    });
    expect((await post({ name: 'x', external_url: 'not a url' })).body).toEqual({
      message: { external_url: ['must be a valid URL'] },
    });
    expect((await post({ name: 'x', external_url: 'javascript:alert(1)' })).status).toBe(400);
    expect((await post({})).body).toEqual({ error: 'name is missing' });
    expect((await post({ name: 'x', tier: 'nope' })).body).toEqual({ error: 'tier does not have a valid value' });
    expect((await post({ name: 'x', description: 'd'.repeat(10001) })).body).toEqual({
      message: { description: ['is too long (maximum is 10000 characters)'] },
    });
    // Nothing was made by the refused requests.
    expect(await gitlab.Environments.all(project.id)).toHaveLength(4);

    // Listing: exact name, search, states; name and search together refused; a short search refused.
    expect((await gitlab.Environments.all(project.id, { name: 'staging' })).map((e) => e.name)).toEqual(['staging']);
    // search: the name, or its part inside the folder, starts with the query (any case).
    const search = async (q: string) => (await gitlab.Environments.all(project.id, { search: q })).map((e) => e.name);
    expect(await search('PROD')).toEqual(['Production']);
    expect(await search('duct')).toEqual([]);
    expect(await search('a-very')).toEqual(['review/a-very-long-branch-name-here']);
    expect(await search('review/a-v')).toEqual(['review/a-very-long-branch-name-here']);
    expect(await search('1-a%')).toEqual([]);
    expect(await search('1-a')).toEqual(['1-app']);
    const list = (query: string) => app.request(`/projects/${project.id}/environments?${query}`, { token: ownerToken });
    expect((await list('name=staging&search=sta')).body).toEqual({ error: 'name, search cannot be used together' });
    expect((await list('search=st')).body).toEqual({
      message: '400 Bad request - Search query is less than 3 characters',
    });
    expect((await list('states=gone')).body).toEqual({ error: 'states does not have a valid value' });

    // Update: external_url, and the deprecated rename that recomputes the slug.
    const edited = await gitlab.Environments.edit(project.id, staging.id, {
      externalUrl: 'https://staging.example.com',
    });
    expect(edited).toMatchObject({ name: 'staging', external_url: 'https://staging.example.com', description: null });
    const described = await app.request(`/projects/${project.id}/environments/${staging.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { description: 'the staging site' },
    });
    expect(described.body).toMatchObject({
      description: 'the staging site',
      external_url: 'https://staging.example.com',
    });
    const put = (id: number, body: Record<string, unknown>) =>
      app.request(`/projects/${project.id}/environments/${id}`, { method: 'PUT', token: ownerToken, body });
    // gitbeaker no longer sends the deprecated name; GitLab still takes it.
    const renamed = await put(staging.id, { name: 'pre-production' });
    expect(renamed.body).toMatchObject({ name: 'pre-production', slug: 'pre-production' });
    expect((await put(staging.id, { external_url: 'ftp://x.example.com' })).status).toBe(400);
    expect((await put(staging.id, { slug: 'other' })).status).toBe(400);
    expect((await put(staging.id, { name: 'Production' })).body).toEqual({
      message: { name: ['has already been taken'] },
    });
    expect(await gitlab.Environments.show(project.id, staging.id)).toMatchObject({
      name: 'pre-production',
      external_url: 'https://staging.example.com',
    });

    // An available environment cannot be deleted; stopped, it can.
    const del = (id: number | string) =>
      app.request(`/projects/${project.id}/environments/${id}`, { method: 'DELETE', token: ownerToken });
    expect((await del(staging.id)).status).toBe(403);
    const stopped = await gitlab.Environments.stop(project.id, staging.id);
    expect(stopped).toMatchObject({ state: 'stopped' });
    // Stopping again answers 200 with the environment as it is.
    expect(await gitlab.Environments.stop(project.id, staging.id)).toMatchObject({ state: 'stopped' });
    await gitlab.Environments.all(project.id, { states: 'stopped' }).then((envs) =>
      expect(envs.map((e) => e.id)).toEqual([staging.id]),
    );
    expect((await del(staging.id)).status).toBe(204);

    // Unknown environments: GitLab's record 404, for every verb.
    for (const res of [
      await app.request(`/projects/${project.id}/environments/${staging.id}`, { token: ownerToken }),
      await del(staging.id),
      await put(999999, { external_url: 'https://x.example.com' }),
      await app.request(`/projects/${project.id}/environments/999999/stop`, { method: 'POST', token: ownerToken }),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: '404 Not found' });
    }
    expect((await del('abc')).status).toBe(400);
  });

  it('answers every role as GitLab: reporters (and anyone signed in on a public project) read, developers write', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-roles', visibility: 'public' });
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const ownerClient = client(ownerToken);
    const expected: Record<string, { read: number; write: number }> = {
      anonymous: { read: 401, write: 401 },
      // A public project's environments are readable by every signed-in user (GitLab's public_access).
      'non-member': { read: 200, write: 403 },
      guest: { read: 200, write: 403 },
      reporter: { read: 200, write: 403 },
      developer: { read: 200, write: 201 },
      maintainer: { read: 200, write: 201 },
      owner: { read: 200, write: 201 },
      admin: { read: 200, write: 201 },
    };
    for (const persona of personas) {
      const want = expected[persona.name];
      if (!want) continue;
      const environment = await ownerClient.Environments.create(project.id, `env-${persona.name}`);
      const as = (url: string, method = 'GET', body?: Record<string, unknown>) =>
        app.request(url, { method, ...(persona.token ? { token: persona.token } : {}), ...(body ? { body } : {}) });
      const base = `/projects/${project.id}/environments`;
      expect((await as(base)).status, `${persona.name} list`).toBe(want.read);
      expect((await as(`${base}/${environment.id}`)).status, `${persona.name} show`).toBe(want.read);
      expect((await as(`/projects/${project.id}/deployments`)).status, `${persona.name} deployments`).toBe(want.read);
      expect((await as(base, 'POST', { name: `made-by-${persona.name}` })).status, `${persona.name} create`).toBe(
        want.write,
      );
      const writeOk = want.write === 201 ? 200 : want.write;
      expect(
        (await as(`${base}/${environment.id}`, 'PUT', { external_url: 'https://x.example.com' })).status,
        `${persona.name} update`,
      ).toBe(writeOk);
      const stop = await as(`${base}/${environment.id}/stop`, 'POST');
      expect(stop.status, `${persona.name} stop`).toBe(want.read === 200 ? writeOk : want.read);
      expect((await ownerClient.Environments.show(project.id, environment.id)).state).toBe(
        writeOk === 200 ? 'stopped' : 'available',
      );
      if (writeOk !== 200) await ownerClient.Environments.stop(project.id, environment.id);
      const del = await as(`${base}/${environment.id}`, 'DELETE');
      expect(del.status, `${persona.name} delete`).toBe(want.read === 200 ? (writeOk === 200 ? 204 : 403) : want.read);
    }

    // The environments feature turned off: nobody reads or writes them, not even the owner.
    const ownerEnv = await ownerClient.Environments.create(project.id, 'feature-check');
    const setLevel = await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { environments_access_level: 'disabled' },
    });
    expect(setLevel.status, setLevel.text).toBe(200);
    expect((await app.request(`/projects/${project.id}/environments`, { token: ownerToken })).status).toBe(403);
    expect(
      (
        await app.request(`/projects/${project.id}/environments/${ownerEnv.id}/stop`, {
          method: 'POST',
          token: ownerToken,
        })
      ).status,
    ).toBe(403);
    await app.request(`/projects/${project.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { environments_access_level: 'enabled' },
    });
    // An archived project is read-only.
    // (No archive endpoint on this branch: the flag is set directly.)
    await app.deps.db.updateTable('projects').set({ archived: true }).where('id', '=', project.id).execute();
    expect((await app.request(`/projects/${project.id}/environments`, { token: ownerToken })).status).toBe(200);
    const archivedCreate = await app.request(`/projects/${project.id}/environments`, {
      method: 'POST',
      token: ownerToken,
      body: { name: 'after-archive' },
    });
    expect(archivedCreate.status).toBe(403);
    expect((await ownerClient.Environments.show(project.id, ownerEnv.id)).state).toBe('available');

    // A private project is not found for those outside it.
    const { project: hidden } = await makeSampleProject(app, owner, { path: 'env-hidden', visibility: 'private' });
    const outsider = personas.find((p) => p.name === 'non-member');
    const res = await app.request(`/projects/${hidden.id}/environments`, { token: outsider?.token });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: '404 Project Not Found' });
    // In a private project a guest does not read them; a reporter does.
    const [hiddenGuest, hiddenReporter] = await makeMembers(app, { type: 'project', id: hidden.id }, [
      'guest',
      'reporter',
    ]);
    expect((await app.request(`/projects/${hidden.id}/environments`, { token: hiddenGuest?.token })).status).toBe(403);
    expect((await app.request(`/projects/${hidden.id}/deployments`, { token: hiddenGuest?.token })).status).toBe(403);
    expect((await app.request(`/projects/${hidden.id}/environments`, { token: hiddenReporter?.token })).status).toBe(
      200,
    );
  });
});

describe('review-app clean-up', () => {
  it('schedules stopped review apps created before `before` (dry run by default, limit), deleted a week later', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-review-apps', visibility: 'private' });
    const sha = await commitFiles(app, ownerToken, project, 'main', { 'README.md': 'x' }, { action: 'update' });
    const gitlab = client(ownerToken);
    const deploy = async (environment: string) => {
      const deployment = await gitlab.Deployments.create(project.id, environment, sha, 'main', false, {
        status: 'success',
      });
      return deployment.environment.id as number;
    };
    const oldA = await deploy('review/old-a');
    const oldB = await deploy('review/old-b');
    const available = await deploy('review/still-up');
    const notReview = await deploy('staging');
    app.clock.advance(20 * DAY);
    const recent = await deploy('review/recent');
    app.clock.advance(15 * DAY);
    // As GitLab's stopped_review_apps: the environment's creation counts, not its last deployment.
    await deploy('review/old-a');
    for (const id of [oldA, oldB, recent, notReview]) await gitlab.Environments.stop(project.id, id);
    app.clock.advance(5 * DAY);

    const clean = (query = '') =>
      app.request(`/projects/${project.id}/environments/review_apps${query}`, { method: 'DELETE', token: ownerToken });
    const names = (entries: { name: string }[]) => entries.map((e) => e.name);

    // Dry run (the default): the old stopped review apps are listed, nothing changes.
    const dry = await gitlab.Environments.removeReviewApps(project.id);
    expect(names(dry.scheduled_entries as { name: string }[])).toEqual(['review/old-a', 'review/old-b']);
    expect(dry.scheduled_entries[0]).toEqual({
      id: oldA,
      name: 'review/old-a',
      slug: environmentSlug('review/old-a'),
      external_url: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(dry.unprocessable_entries).toEqual([]);
    const rows = async () =>
      app.deps.db
        .selectFrom('environments')
        .select(['name', 'auto_delete_at'])
        .where('project_id', '=', project.id)
        .orderBy('id')
        .execute();
    expect((await rows()).every((r) => r.auto_delete_at === null)).toBe(true);

    // limit and before.
    expect(names((await clean('?limit=1')).body.scheduled_entries)).toEqual(['review/old-a']);
    const before = new Date(app.clock.now().getTime() - 10 * DAY).toISOString();
    expect(names((await clean(`?before=${before}`)).body.scheduled_entries)).toEqual([
      'review/old-a',
      'review/old-b',
      'review/recent',
    ]);

    // Bad input changes nothing.
    for (const [query, error] of [
      ['?before=yesterday', 'before is invalid'],
      ['?limit=0', 'limit does not have a valid value'],
      ['?limit=1001', 'limit does not have a valid value'],
      ['?dry_run=maybe', 'dry_run is invalid'],
    ] as const) {
      const res = await clean(query);
      expect(res.status, query).toBe(400);
      expect(res.body).toEqual({ error });
    }

    // For real: scheduled a week from now; a second request finds nothing left to schedule.
    const real = await clean('?dry_run=false');
    expect(real.status, real.text).toBe(200);
    expect(names(real.body.scheduled_entries)).toEqual(['review/old-a', 'review/old-b']);
    const scheduled = (await rows()).filter((r) => r.auto_delete_at !== null);
    expect(scheduled.map((r) => r.name)).toEqual(['review/old-a', 'review/old-b']);
    expect(scheduled[0]?.auto_delete_at?.getTime()).toBe(app.clock.now().getTime() + 7 * DAY);
    const none = await clean('?dry_run=false');
    expect(none.status).toBe(400);
    expect(none.body).toMatchObject({ scheduled_entries: [], unprocessable_entries: [] });
    expect(none.body.message).toMatch(/^No environments found for scheduled deletion/);

    // The recurring job deletes them once the week has passed, not before.
    const runDelete = async () => {
      await app.deps.db
        .insertInto('jobs')
        .values({
          kind: 'environments_auto_delete',
          payload: JSON.stringify({ recurring: true }),
          locked_by: null,
          locked_at: null,
          heartbeat_at: null,
          last_error: null,
          finished_at: null,
        })
        .execute();
      await drainJobs(app);
    };
    app.clock.advance(6 * DAY);
    await runDelete();
    expect(await rows()).toHaveLength(5);
    app.clock.advance(DAY + HOUR);
    await runDelete();
    expect(names(await rows())).toEqual(['review/still-up', 'staging', 'review/recent']);
    expect((await app.request(`/projects/${project.id}/environments/${oldA}`, { token: ownerToken })).status).toBe(404);
    expect(available).toBeGreaterThan(0);
  });

  it('needs the right to delete environments: reporters get GitLab 401 message, guests 403', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-review-roles', visibility: 'private' });
    const [guest, reporter, developer] = await makeMembers(app, { type: 'project', id: project.id }, [
      'guest',
      'reporter',
      'developer',
    ]);
    const clean = (token?: string) =>
      app.request(`/projects/${project.id}/environments/review_apps`, { method: 'DELETE', token });
    expect((await clean()).status).toBe(401);
    expect((await clean(guest?.token)).status).toBe(403);
    const refused = await clean(reporter?.token);
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({
      scheduled_entries: [],
      unprocessable_entries: [],
      message: 'You do not have permission to destroy environments in this project',
    });
    // A developer may (GitLab's destroy_environment); nothing matches here.
    const empty = await clean(developer?.token);
    expect(empty.status).toBe(400);
    expect(empty.body.scheduled_entries).toEqual([]);
  });
});

describe('deployments API', () => {
  it('records deployments made outside CI, lists and filters them, and updates their status', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-deployments', visibility: 'private' });
    const sha = await commitFiles(app, ownerToken, project, 'main', { 'README.md': 'y' }, { action: 'update' });
    const [reporter, developer] = await makeMembers(app, { type: 'project', id: project.id }, [
      'reporter',
      'developer',
    ]);
    const dev = client(developer?.token as string);
    const made = await dev.Deployments.create(project.id, 'production', sha, 'main', false, { status: 'running' });
    expect(made).toMatchObject({
      iid: 1,
      ref: 'main',
      sha,
      status: 'running',
      deployable: null,
      user: { id: developer?.user.id },
      environment: { name: 'production', slug: 'production', external_url: null },
    });
    await dev.Deployments.create(project.id, 'staging', sha, 'main', false, { status: 'success' });
    const updated = await dev.Deployments.edit(project.id, made.id, 'success');
    expect(updated).toMatchObject({ id: made.id, status: 'success' });
    const production = await dev.Environments.show(project.id, made.environment.id as number);
    expect(production.last_deployment).toMatchObject({ id: made.id, status: 'success', deployable: null });

    const all = await dev.Deployments.all(project.id, { environment: 'staging' });
    expect(all.map((d) => d.iid)).toEqual([2]);
    expect((await dev.Deployments.all(project.id, { sort: 'desc' })).map((d) => d.iid)).toEqual([2, 1]);
    expect((await dev.Deployments.show(project.id, made.id)).environment).toMatchObject({ name: 'production' });

    const post = (token: string | undefined, body: Record<string, unknown>) =>
      app.request(`/projects/${project.id}/deployments`, { method: 'POST', token, body });
    const good = { environment: 'production', sha, ref: 'main', tag: false, status: 'success' };
    expect((await post(reporter?.token, good)).status).toBe(403);
    expect((await post(developer?.token, { ...good, status: 'created' })).body).toEqual({
      error: 'status does not have a valid value',
    });
    expect((await post(developer?.token, { ...good, environment: '/bad/' })).status).toBe(400);
    expect((await post(developer?.token, { ...good, sha: 'nope' })).status).toBe(400);
    expect((await post(developer?.token, { environment: 'production' })).body).toEqual({
      error: 'sha is missing, ref is missing, tag is missing, status is missing',
    });
    expect(await dev.Deployments.all(project.id)).toHaveLength(2);
    const missing = await app.request(`/projects/${project.id}/deployments/999999`, { token: reporter?.token });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ message: '404 Not found' });
    const reporterPut = await app.request(`/projects/${project.id}/deployments/${made.id}`, {
      method: 'PUT',
      token: reporter?.token,
      body: { status: 'failed' },
    });
    expect(reporterPut.status).toBe(403);
  });

  it('numbers concurrent deployments of a project without gaps or duplicates, one environment per name', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-concurrent', visibility: 'private' });
    const sha = await commitFiles(app, ownerToken, project, 'main', { 'README.md': 'c' }, { action: 'update' });
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        app.request(`/projects/${project.id}/deployments`, {
          method: 'POST',
          token: ownerToken,
          body: { environment: `env-${i % 3}`, sha, ref: 'main', tag: false, status: 'success' },
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(12).fill(201));
    expect(results.map((r) => r.body.iid).sort((a: number, b: number) => a - b)).toEqual(
      Array.from({ length: 12 }, (_, i) => i + 1),
    );
    const environments = await client(ownerToken).Environments.all(project.id);
    expect(environments.map((e) => e.name).sort()).toEqual(['env-0', 'env-1', 'env-2']);
  });

  it('refuses to update a deployment made by a CI job', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-ci-put', visibility: 'private' });
    await pushCi(project, 'deploy:\n  script: [echo hi]\n  environment: production\n');
    const [deployment] = await deploymentsOf(project.id);
    const res = await app.request(`/projects/${project.id}/deployments/${deployment?.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { status: 'success' },
    });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({
      message: '403 Forbidden - Deployments created using GitLab CI can not be updated using the API',
    });
    expect((await deploymentsOf(project.id))[0]?.status).toBe('created');
  });
});

describe('stale environments and deleting deployments', () => {
  it('stops environments neither deployed to nor updated since before (maintainers; before 1 week to 10 years ago)', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-stale', visibility: 'private' });
    const sha = await commitFiles(app, ownerToken, project, 'main', { 'README.md': 'z' }, { action: 'update' });
    const [reporter, developer] = await makeMembers(app, { type: 'project', id: project.id }, [
      'reporter',
      'developer',
    ]);
    const gitlab = client(ownerToken);
    const old = await gitlab.Environments.create(project.id, 'old-one');
    const deployedOld = (await gitlab.Deployments.create(project.id, 'deployed-long-ago', sha, 'main', false, {
      status: 'success',
    })) as { environment: { id: number } };
    app.clock.advance(30 * DAY);
    const fresh = (await gitlab.Deployments.create(project.id, 'fresh', sha, 'main', false, {
      status: 'success',
    })) as { environment: { id: number } };
    app.clock.advance(10 * DAY);
    const stale = (before: string, token = ownerToken) =>
      app.request(`/projects/${project.id}/environments/stop_stale`, { method: 'POST', token, body: { before } });
    const dayAgo = (days: number) => new Date(app.clock.now().getTime() - days * DAY).toISOString();
    for (const before of [dayAgo(1), dayAgo(11 * 365)]) {
      const res = await stale(before);
      expect(res.status, before).toBe(400);
      expect(res.body).toEqual({ message: '400 Bad request - Invalid Date' });
    }
    expect((await stale('last week')).body).toEqual({ error: 'before is invalid' });
    // Bulk stop is a maintainer's (GitLab's project-level stop_environment).
    expect((await stale(dayAgo(20), reporter?.token)).status).toBe(403);
    expect((await stale(dayAgo(20), developer?.token)).status).toBe(403);
    const states = async () =>
      Object.fromEntries((await gitlab.Environments.all(project.id)).map((e) => [e.name, e.state]));
    expect(await states()).toEqual({ 'old-one': 'available', 'deployed-long-ago': 'available', fresh: 'available' });

    const done = await stale(dayAgo(20));
    expect(done.status, done.text).toBe(200);
    expect(done.body).toEqual({ message: 'Successfully requested stop for all stale environments' });
    expect(await states()).toEqual({ 'old-one': 'stopped', 'deployed-long-ago': 'stopped', fresh: 'available' });
    expect([old.id, deployedOld.environment.id, fresh.environment.id]).toHaveLength(3);
  });

  it('deletes a deployment that is neither running nor the last one, for maintainers', async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'env-del-deploy', visibility: 'private' });
    const sha = await commitFiles(app, ownerToken, project, 'main', { 'README.md': 'w' }, { action: 'update' });
    const [developer, maintainer] = await makeMembers(app, { type: 'project', id: project.id }, [
      'developer',
      'maintainer',
    ]);
    const gitlab = client(ownerToken);
    const first = await gitlab.Deployments.create(project.id, 'production', sha, 'main', false, { status: 'success' });
    const second = await gitlab.Deployments.create(project.id, 'production', sha, 'main', false, { status: 'success' });
    const running = await gitlab.Deployments.create(project.id, 'production', sha, 'main', false, {
      status: 'running',
    });
    const del = (id: number, token?: string) =>
      app.request(`/projects/${project.id}/deployments/${id}`, { method: 'DELETE', token });
    expect((await del(first.id, developer?.token)).status).toBe(403);
    const runningRes = await del(running.id, maintainer?.token);
    expect(runningRes.status).toBe(400);
    expect(runningRes.body).toEqual({ message: 'Cannot destroy running deployment' });
    const lastRes = await del(second.id, maintainer?.token);
    expect(lastRes.status).toBe(400);
    expect(lastRes.body).toEqual({ message: 'Deployment currently deployed to environment' });
    expect((await gitlab.Deployments.all(project.id)).map((d) => d.id)).toEqual([first.id, second.id, running.id]);
    expect((await del(first.id, maintainer?.token)).status).toBe(204);
    expect((await del(first.id, maintainer?.token)).status).toBe(404);
    expect((await gitlab.Deployments.all(project.id)).map((d) => d.id)).toEqual([second.id, running.id]);
  });
});

describe('the recurring jobs', () => {
  it("are queued once each at start-up, at GitLab's minutes past the hour", async () => {
    await scheduleEnvironmentJobs(app.deps);
    await scheduleEnvironmentJobs(app.deps);
    const queued = await app.deps.db
      .selectFrom('jobs')
      .select(['kind', 'run_at'])
      .where('kind', 'in', ['environments_auto_stop', 'environments_auto_delete'])
      .where('state', '=', 'queued')
      .orderBy('kind')
      .execute();
    expect(queued.map((j) => [j.kind, j.run_at.getUTCMinutes()])).toEqual([
      ['environments_auto_delete', 34],
      ['environments_auto_stop', 24],
    ]);
  });
});
