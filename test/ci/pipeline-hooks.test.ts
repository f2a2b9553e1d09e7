import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { User } from '../../src/db/schema.js';
import { register as registerShippedRunner, runOnce } from '../../src/runner/main.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { commitFiles, drainJobs, registrationToken } from '../support/ci.js';
import { makeAdmin, makeSampleProject, makeToken, putSettings } from '../support/factories.js';
import { type Receiver, startReceiver } from '../support/receiver.js';

/**
 * Pipeline events reach webhooks and chat integrations (GitLab's Pipeline Hook on every status
 * change; chat notifiers on finished pipelines), with a pipeline run by the shipped runner.
 */
let app: TestApp;
let owner: User;
let ownerToken: string;
let receiver: Receiver;
let dir: string;

beforeAll(async () => {
  app = await startTestApp();
  owner = await makeAdmin(app);
  ownerToken = await makeToken(app, owner);
  receiver = await startReceiver();
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-pipeline-hooks-'));
  await putSettings(app, ownerToken, { allow_local_requests_from_web_hooks_and_services: true });
});
afterAll(async () => {
  await app?.close();
  await receiver?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe('pipeline events', () => {
  it('a webhook hears every status change of a pipeline, a chat notifier its end', { timeout: 120_000 }, async () => {
    const { project } = await makeSampleProject(app, owner, { path: 'hooked' });
    const hook = await app.request(`/projects/${project.id}/hooks`, {
      method: 'POST',
      token: ownerToken,
      body: { url: `${receiver.url}/hook`, push_events: false, pipeline_events: true, token: 's3cret' },
    });
    expect(hook.status, hook.text).toBe(201);
    const chat = await app.request(`/projects/${project.id}/integrations/slack`, {
      method: 'PUT',
      token: ownerToken,
      body: { webhook: `${receiver.url}/slack`, notify_only_broken_pipelines: false, push_events: false },
    });
    expect(chat.status, chat.text).toBe(200);
    const config = await registerShippedRunner({
      url: app.baseUrl,
      registrationToken: await registrationToken(app, ownerToken, `/projects/${project.id}`),
      config: path.join(dir, 'runner.json'),
    });

    const sha = await commitFiles(app, ownerToken, project, 'main', {
      '.gitlab-ci.yml': 'build:\n  script:\n    - echo built\n',
    });
    await drainJobs(app);
    expect(await runOnce({ ...config, buildsDir: dir })).toBe('success');
    await drainJobs(app);

    const hooks = receiver.requests.filter((r) => r.path === '/hook');
    expect(hooks.every((r) => r.headers['x-gitlab-event'] === 'Pipeline Hook')).toBe(true);
    expect(hooks.every((r) => r.headers['x-gitlab-token'] === 's3cret')).toBe(true);
    const statuses = hooks.map((r) => r.json.object_attributes.status);
    expect(statuses).toContain('pending');
    expect(statuses.at(-1)).toBe('success');
    const last = hooks.at(-1)?.json;
    expect(last).toMatchObject({
      object_kind: 'pipeline',
      object_attributes: { ref: 'main', tag: false, sha, source: 'push', status: 'success', stages: ['test'] },
      user: { username: owner.username },
      project: { id: project.id, path_with_namespace: project.full_path },
      commit: { id: sha },
      builds: [{ name: 'build', stage: 'test', status: 'success' }],
    });

    // The chat notifier speaks of the finished pipeline only.
    const slack = receiver.requests.filter((r) => r.path === '/slack');
    expect(slack).toHaveLength(1);
    expect(JSON.stringify(slack[0]?.json)).toMatch(/passed|success/i);
  });
});
