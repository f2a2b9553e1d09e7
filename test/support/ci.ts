import { expect } from 'vitest';
import type { Project } from '../../src/db/schema.js';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import type { TestApp } from './app.js';

/** A registration token for the instance (admin), a project or a group (their reset endpoints). */
export async function registrationToken(app: TestApp, token: string, scope: string): Promise<string> {
  const res = await app.request(`${scope}/runners/reset_registration_token`, { method: 'POST', token });
  expect(res.status, res.text).toBe(201);
  return res.body.token;
}

/** Registers a runner as the runner does (POST /runners); returns { id, token }. */
export async function registerRunner(
  app: TestApp,
  registration: string,
  extra: Record<string, unknown> = {},
): Promise<{ id: number; token: string }> {
  const res = await app.request('/runners', {
    method: 'POST',
    body: {
      token: registration,
      description: 'test runner',
      info: { name: 'gitlab-runner', version: '17.0.0' },
      ...extra,
    },
  });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

/** Commits files to a branch through the commits API (a push as far as CI is concerned). */
export async function commitFiles(
  app: TestApp,
  token: string,
  project: Pick<Project, 'id'>,
  branch: string,
  files: Record<string, string>,
  options: { startBranch?: string; action?: 'create' | 'update' } = {},
): Promise<string> {
  const { startBranch, action = 'create' } = options;
  const res = await app.request(`/projects/${project.id}/repository/commits`, {
    method: 'POST',
    token,
    body: {
      branch,
      ...(startBranch ? { start_branch: startBranch } : {}),
      commit_message: 'CI test commit',
      actions: Object.entries(files).map(([file_path, content]) => ({ action, file_path, content })),
    },
  });
  expect(res.status, res.text).toBe(201);
  return res.body.id;
}

/** Runs the queued background jobs (push pipelines among them). */
export async function drainJobs(app: TestApp): Promise<number> {
  return new Worker(app.deps, JOB_KINDS).drain();
}

/** POST /jobs/request as the GitLab runner sends it. */
export async function requestJob(app: TestApp, runnerToken: string) {
  return app.request('/jobs/request', {
    method: 'POST',
    body: {
      token: runnerToken,
      info: {
        name: 'gitlab-runner',
        version: '17.0.0',
        revision: 'abcdef12',
        platform: 'linux',
        architecture: 'amd64',
        executor: 'shell',
        shell: 'bash',
        features: { variables: true, artifacts: true, cancelable: true, trace_reset: true },
      },
    },
  });
}
