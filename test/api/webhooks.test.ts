import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { DELIVERY_LOG_PRUNE_SCHEDULE, scheduleHookJobs } from '../../src/jobs/hooks.js';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import { instanceKey, openSecret } from '../../src/lib/secret-box.js';
import { queueProjectHooks } from '../../src/services/webhooks.js';
import { startTestApp, type TestApp } from '../support/app.js';
import {
  makePersonas,
  makeSampleProject,
  makeToken,
  makeUser,
  putSettings,
  resetSettings,
} from '../support/factories.js';
import { remoteUrl, runGitClient } from '../support/git-client.js';
import { lacks, OPENSSL } from '../support/programs.js';
import { type Receiver, startReceiver } from '../support/receiver.js';

let app: TestApp;
let worker: Worker;
let receiver: Receiver;
let scratch: string;
let owner: User;
let ownerToken: string;
let adminToken: string;
let counter = 0;

beforeAll(async () => {
  app = await startTestApp();
  worker = new Worker(app.deps, JOB_KINDS);
  receiver = await startReceiver();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-webhooks-'));
  owner = await makeUser(app, { name: 'Hook Owner' });
  ownerToken = await makeToken(app, owner);
  adminToken = await makeToken(app, await makeUser(app, { admin: true }));
});
afterAll(async () => {
  await receiver?.close();
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});
beforeEach(async () => {
  await resetSettings(app);
  receiver.requests = [];
  receiver.status = 200;
});

const allowLocal = () => putSettings(app, adminToken, { allow_local_requests_from_web_hooks_and_services: true });

async function git(args: string[], cwd = scratch): Promise<string> {
  const result = await runGitClient(args, cwd);
  expect({ args, code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
  return result.stdout.trim();
}

async function workClone(project: Project): Promise<string> {
  const dir = path.join(scratch, `work-${++counter}`);
  await git([
    'clone',
    '--quiet',
    remoteUrl(app.baseUrl, project, { login: owner.username, password: ownerToken }),
    dir,
  ]);
  return dir;
}

async function commitFile(dir: string, file: string, content: string, message: string): Promise<string> {
  await fs.mkdir(path.dirname(path.join(dir, file)), { recursive: true });
  await fs.writeFile(path.join(dir, file), content);
  await git(['add', '-A'], dir);
  await git(['commit', '--quiet', '-m', message], dir);
  return git(['rev-parse', 'HEAD'], dir);
}

/** Runs queued jobs, also those waiting for a retry (their back-off skipped), until none is left. */
async function drainAll(): Promise<void> {
  for (let round = 0; round < 10; round++) {
    await app.deps.db
      .updateTable('jobs')
      .set({ run_at: new Date(0) })
      .where('state', '=', 'queued')
      .execute();
    if ((await worker.drain()) === 0) return;
  }
}

async function addHook(project: Project, body: Record<string, unknown>) {
  const res = await app.request(`/projects/${project.id}/hooks`, { method: 'POST', token: ownerToken, body });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

describe('project hooks API', () => {
  it('creates, lists, shows, edits and deletes a hook through @gitbeaker/rest; the token never comes back', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    const api = new Gitlab({ host: app.baseUrl, token: ownerToken });
    const hook = await api.ProjectHooks.add(project.id, `${receiver.url}/hook`, {
      token: 's3cret-token',
      tagPushEvents: true,
      pushEventsBranchFilter: 'main',
    });
    expect(hook).toMatchObject({
      url: `${receiver.url}/hook`,
      project_id: project.id,
      push_events: true,
      tag_push_events: true,
      merge_requests_events: false,
      pipeline_events: false,
      enable_ssl_verification: true,
      push_events_branch_filter: 'main',
      branch_filter_strategy: 'wildcard',
    });
    expect(JSON.stringify(hook)).not.toContain('s3cret-token');
    expect(hook).not.toHaveProperty('token');

    // Sealed at rest with the instance key.
    const row = await app.deps.db
      .selectFrom('web_hooks')
      .selectAll()
      .where('id', '=', hook.id)
      .executeTakeFirstOrThrow();
    expect(row.sealed_token).not.toContain('s3cret-token');
    expect(
      openSecret(instanceKey(app.deps.config.storageDir, app.deps.config.secretKey), row.sealed_token as string),
    ).toBe('s3cret-token');

    const list = await api.ProjectHooks.all(project.id);
    expect(list.map((h) => h.id)).toEqual([hook.id]);
    const shown = await api.ProjectHooks.show(project.id, hook.id);
    expect(shown.url).toBe(`${receiver.url}/hook`);

    const edited = await api.ProjectHooks.edit(project.id, hook.id, `${receiver.url}/other`, {
      pipelineEvents: true,
      pushEvents: false,
    });
    expect(edited).toMatchObject({
      url: `${receiver.url}/other`,
      pipeline_events: true,
      push_events: false,
      tag_push_events: true,
    });
    // The token was not given: the stored one is kept.
    const kept = await app.deps.db
      .selectFrom('web_hooks')
      .selectAll()
      .where('id', '=', hook.id)
      .executeTakeFirstOrThrow();
    expect(kept.sealed_token).toBe(row.sealed_token);

    await api.ProjectHooks.remove(project.id, hook.id);
    const gone = await app.request(`/projects/${project.id}/hooks/${hook.id}`, { token: ownerToken });
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ message: '404 Not found' });
  });

  it('refuses local and private addresses by default with 422, and changes nothing', async () => {
    const { project } = await makeSampleProject(app, owner);
    for (const url of [`${receiver.url}/hook`, 'http://10.0.0.7/hook', 'http://[::1]:9/x', 'http://169.254.169.254/']) {
      const res = await app.request(`/projects/${project.id}/hooks`, {
        method: 'POST',
        token: ownerToken,
        body: { url },
      });
      expect(res.status, url).toBe(422);
      expect(res.body).toEqual({ message: 'Invalid url given' });
    }
    const bad = await app.request(`/projects/${project.id}/hooks`, {
      method: 'POST',
      token: ownerToken,
      body: { url: 'not a url' },
    });
    expect(bad.status).toBe(422);
    const ftp = await app.request(`/projects/${project.id}/hooks`, {
      method: 'POST',
      token: ownerToken,
      body: { url: 'ftp://example.com/' },
    });
    expect(ftp.status).toBe(422);
    const list = await app.request(`/projects/${project.id}/hooks`, { token: ownerToken });
    expect(list.body).toEqual([]);

    // Allowed once the setting says so; then an edit to a private address is refused too.
    await allowLocal();
    const hook = await addHook(project, { url: `${receiver.url}/hook` });
    await resetSettings(app);
    const edit = await app.request(`/projects/${project.id}/hooks/${hook.id}`, {
      method: 'PUT',
      token: ownerToken,
      body: { url: 'http://192.168.1.1/' },
    });
    expect(edit.status).toBe(422);
    const after = await app.request(`/projects/${project.id}/hooks/${hook.id}`, { token: ownerToken });
    expect(after.body.url).toBe(`${receiver.url}/hook`);
  });

  it('answers bad input with GitLab 4xx shapes', async () => {
    const { project } = await makeSampleProject(app, owner);
    const missing = await app.request(`/projects/${project.id}/hooks`, { method: 'POST', token: ownerToken, body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: 'url is missing' });
    const badId = await app.request(`/projects/${project.id}/hooks/abc`, { token: ownerToken });
    expect(badId.status).toBe(400);
    const unknown = await app.request(`/projects/${project.id}/hooks/999999`, { token: ownerToken });
    expect(unknown.status).toBe(404);
    const badFlag = await app.request(`/projects/${project.id}/hooks`, {
      method: 'POST',
      token: ownerToken,
      body: { url: 'http://example.com/', push_events: 'maybe' },
    });
    expect(badFlag.status).toBe(400);
    await allowLocal();
    const badRegex = await app.request(`/projects/${project.id}/hooks`, {
      method: 'POST',
      token: ownerToken,
      body: { url: `${receiver.url}/x`, branch_filter_strategy: 'regex', push_events_branch_filter: '(' },
    });
    expect(badRegex.status).toBe(422);
    expect(badRegex.body).toEqual({ message: 'Invalid branch filter given' });
    const list = await app.request(`/projects/${project.id}/hooks`, { token: ownerToken });
    expect(list.body).toEqual([]);
  });

  it('a project has at most 100 hooks', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    const now = new Date();
    await app.deps.db
      .insertInto('web_hooks')
      .values(
        Array.from({ length: 100 }, (_, n) => ({
          project_id: project.id,
          url: `${receiver.url}/many/${n}`,
          events: '{}',
          name: null,
          description: null,
          sealed_token: null,
          push_events_branch_filter: null,
          created_at: now,
          updated_at: now,
        })),
      )
      .execute();
    const res = await app.request(`/projects/${project.id}/hooks`, {
      method: 'POST',
      token: ownerToken,
      body: { url: `${receiver.url}/one-more` },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: { base: ['Maximum number of project hooks (100) exceeded'] } });
    const page = await app.request(`/projects/${project.id}/hooks`, {
      token: ownerToken,
      query: { per_page: 100, page: 2 },
    });
    expect(page.body).toEqual([]);
    expect(page.headers.get('x-total')).toBe('100');
  });

  it('is for maintainers, owners and administrators only', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner, { visibility: 'private' });
    const hook = await addHook(project, { url: `${receiver.url}/hook` });
    const personas = await makePersonas(app, { type: 'project', id: project.id });
    const expected: Record<string, number> = {
      anonymous: 401,
      'non-member': 404,
      guest: 403,
      reporter: 403,
      developer: 403,
      maintainer: 200,
      admin: 200,
    };
    for (const persona of personas) {
      const list = await app.request(`/projects/${project.id}/hooks`, { token: persona.token });
      expect(list.status, persona.name).toBe(expected[persona.name]);
      const create = await app.request(`/projects/${project.id}/hooks`, {
        method: 'POST',
        token: persona.token,
        body: { url: `${receiver.url}/${persona.name}` },
      });
      expect(create.status, persona.name).toBe(expected[persona.name] === 200 ? 201 : expected[persona.name]);
      const edit = await app.request(`/projects/${project.id}/hooks/${hook.id}`, {
        method: 'PUT',
        token: persona.token,
        body: { note_events: true },
      });
      expect(edit.status, persona.name).toBe(expected[persona.name]);
    }
    const rows = await app.deps.db.selectFrom('web_hooks').select('url').where('project_id', '=', project.id).execute();
    expect(rows.map((r) => r.url).sort()).toEqual(
      [`${receiver.url}/hook`, `${receiver.url}/admin`, `${receiver.url}/maintainer`].sort(),
    );
  });
});

describe('push hooks delivered', () => {
  it('a git push over HTTP calls the hook with GitLab headers and push payload', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    await addHook(project, { url: `${receiver.url}/push`, token: 'hook-token', tag_push_events: true });
    const dir = await workClone(project);
    const before = await git(['rev-parse', 'HEAD'], dir);
    const first = await commitFile(dir, 'docs/new.md', 'hello\n', 'Add docs\n\nWith a body');
    await fs.rm(path.join(dir, 'docs/new.md'));
    await fs.writeFile(path.join(dir, 'README.md'), 'changed\n');
    await git(['add', '-A'], dir);
    await git(['commit', '--quiet', '-m', 'Change readme, drop docs'], dir);
    const after = await git(['rev-parse', 'HEAD'], dir);
    const branch = await git(['rev-parse', '--abbrev-ref', 'HEAD'], dir);
    await git(['push', '--quiet', 'origin', 'HEAD'], dir);
    // Nothing is sent inside the push: deliveries wait for the worker.
    expect(receiver.requests).toEqual([]);
    await drainAll();

    expect(receiver.requests).toHaveLength(1);
    const call = receiver.requests[0]!;
    expect(call.method).toBe('POST');
    expect(call.path).toBe('/push');
    expect(call.headers['x-gitlab-event']).toBe('Push Hook');
    expect(call.headers['x-gitlab-token']).toBe('hook-token');
    expect(call.headers['content-type']).toBe('application/json');
    expect(call.headers['user-agent']).toMatch(/^GitLab\//);
    expect(call.headers['x-gitlab-event-uuid']).toMatch(/^[0-9a-f-]{36}$/);
    expect(call.headers['x-gitlab-instance']).toBe(app.baseUrl);
    const data = call.json;
    expect(data).toMatchObject({
      object_kind: 'push',
      event_name: 'push',
      before,
      after,
      ref: `refs/heads/${branch}`,
      checkout_sha: after,
      user_id: owner.id,
      user_name: 'Hook Owner',
      user_username: owner.username,
      user_email: '[REDACTED]',
      project_id: project.id,
      total_commits_count: 2,
      project: {
        id: project.id,
        name: project.name,
        web_url: `${app.baseUrl}/${project.full_path}`,
        git_http_url: `${app.baseUrl}/${project.full_path}.git`,
        path_with_namespace: project.full_path,
        visibility_level: 20,
      },
      repository: { name: project.name, homepage: `${app.baseUrl}/${project.full_path}` },
    });
    expect(data.commits).toHaveLength(2);
    expect(data.commits[0]).toMatchObject({
      id: first,
      message: 'Add docs\n\nWith a body\n',
      title: 'Add docs',
      url: `${app.baseUrl}/${project.full_path}/-/commit/${first}`,
      author: { name: 'T', email: 't@example.com' },
      added: ['docs/new.md'],
      modified: [],
      removed: [],
    });
    expect(data.commits[0].timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$/);
    expect(data.commits[1]).toMatchObject({ id: after, added: [], modified: ['README.md'], removed: ['docs/new.md'] });

    // The log holds the delivery, the token masked.
    const hooks = await app.request(`/projects/${project.id}/hooks`, { token: ownerToken });
    const events = await app.request(`/projects/${project.id}/hooks/${hooks.body[0].id}/events`, { token: ownerToken });
    expect(events.status).toBe(200);
    expect(events.body).toHaveLength(1);
    expect(events.body[0]).toMatchObject({
      trigger: 'push_hooks',
      response_status: '200',
      state: 'delivered',
      attempt: 1,
    });
    expect(events.body[0].request_headers['X-Gitlab-Token']).toBe('[REDACTED]');
  });

  it('a tag push is a Tag Push Hook; a hook without tag_push_events hears nothing of it', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    await addHook(project, { url: `${receiver.url}/tags`, tag_push_events: true, push_events: false });
    await addHook(project, { url: `${receiver.url}/pushes-only` });
    const dir = await workClone(project);
    const head = await git(['rev-parse', 'HEAD'], dir);
    await git(['tag', '-a', 'v9.0', '-m', 'Release nine'], dir);
    await git(['push', '--quiet', 'origin', 'v9.0'], dir);
    await drainAll();
    expect(receiver.requests.map((r) => r.path)).toEqual(['/tags']);
    const call = receiver.requests[0]!;
    expect(call.headers['x-gitlab-event']).toBe('Tag Push Hook');
    expect(call.json).toMatchObject({
      object_kind: 'tag_push',
      ref: 'refs/tags/v9.0',
      before: '0000000000000000000000000000000000000000',
      checkout_sha: head,
      message: 'Release nine\n',
      total_commits_count: 1,
    });
    expect(call.json.commits.map((c: { id: string }) => c.id)).toEqual([head]);
  });

  it('push_events_branch_filter chooses the branches a hook hears of', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    await addHook(project, { url: `${receiver.url}/release`, push_events_branch_filter: 'release/*' });
    await addHook(project, {
      url: `${receiver.url}/regex`,
      branch_filter_strategy: 'regex',
      push_events_branch_filter: '^feat-\\d+$',
    });
    const dir = await workClone(project);
    const branch = await git(['rev-parse', '--abbrev-ref', 'HEAD'], dir);
    await app.deps.db.updateTable('projects').set({ default_branch: branch }).where('id', '=', project.id).execute();
    const a = await commitFile(dir, 'a.txt', 'a\n', 'A');
    await git(['push', '--quiet', 'origin', 'HEAD:refs/heads/release/1.0'], dir);
    await git(['push', '--quiet', 'origin', 'HEAD:refs/heads/feat-12'], dir);
    await git(['push', '--quiet', 'origin', 'HEAD:refs/heads/other'], dir);
    await drainAll();
    const got = receiver.requests.map((r) => `${r.path} ${r.json.ref}`).sort();
    expect(got).toEqual(['/regex refs/heads/feat-12', '/release refs/heads/release/1.0']);
    // A new branch carries the commits the default branch does not have, as GitLab's.
    for (const request of receiver.requests) {
      expect(request.json.commits.map((c: { id: string }) => c.id)).toEqual([a]);
      expect(request.json.total_commits_count).toBe(1);
    }
  });

  it('a push of more than 3 branches runs no hooks for them, as GitLab; its tags still do', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    await addHook(project, { url: `${receiver.url}/bulk`, tag_push_events: true });
    const dir = await workClone(project);
    await commitFile(dir, 'bulk.txt', 'bulk\n', 'Bulk');
    await git(['tag', 'bulk-1'], dir);
    const refs = ['b1', 'b2', 'b3', 'b4'].map((b) => `HEAD:refs/heads/${b}`);
    await git(['push', '--quiet', 'origin', ...refs, 'refs/tags/bulk-1'], dir);
    await drainAll();
    expect(receiver.requests.map((r) => r.json.ref)).toEqual(['refs/tags/bulk-1']);
    await git(['push', '--quiet', 'origin', 'HEAD:refs/heads/b5', 'HEAD:refs/heads/b6', 'HEAD:refs/heads/b7'], dir);
    await drainAll();
    expect(receiver.requests.map((r) => r.json.ref).sort()).toEqual([
      'refs/heads/b5',
      'refs/heads/b6',
      'refs/heads/b7',
      'refs/tags/bulk-1',
    ]);
  });

  it('a failing receiver is retried with back-off, then the delivery is logged as failed', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    const hook = await addHook(project, { url: `${receiver.url}/failing` });
    receiver.status = 500;
    const dir = await workClone(project);
    await commitFile(dir, 'f.txt', 'f\n', 'F');
    await git(['push', '--quiet', 'origin', 'HEAD'], dir);

    // One round: the first try fails and waits for its retry.
    await worker.drain();
    expect(receiver.requests).toHaveLength(1);
    const waiting = await app.deps.db
      .selectFrom('jobs')
      .selectAll()
      .where('kind', '=', 'webhook_delivery')
      .where('state', '=', 'queued')
      .execute();
    expect(waiting).toHaveLength(1);
    expect(waiting[0]!.run_at.getTime()).toBeGreaterThan(Date.now());

    await drainAll();
    expect(receiver.requests).toHaveLength(4);
    const events = await app.request(`/projects/${project.id}/hooks/${hook.id}/events`, { token: ownerToken });
    expect(events.body.map((e: { attempt: number; state: string }) => `${e.attempt} ${e.state}`)).toEqual([
      '4 failed',
      '3 retrying',
      '2 retrying',
      '1 retrying',
    ]);
    expect(events.body[0]).toMatchObject({ response_status: '500', response_body: 'failed' });
    const filter = (status: string[]) =>
      app.request(`/projects/${project.id}/hooks/${hook.id}/events`, { token: ownerToken, query: { status } });
    expect((await filter(['server_failure'])).body).toHaveLength(4);
    expect((await filter(['500'])).body).toHaveLength(4);
    expect((await filter(['successful', 'client_failure'])).body).toHaveLength(0);
    expect((await filter(['teapot'])).status).toBe(400);

    // Resent by hand once the receiver is back: the same payload, logged as a new try.
    receiver.status = 200;
    const resend = await app.request(`/projects/${project.id}/hooks/${hook.id}/events/${events.body[0].id}/resend`, {
      method: 'POST',
      token: ownerToken,
    });
    expect(resend.status, resend.text).toBe(201);
    expect(resend.body).toEqual({ response_status: 200 });
    expect(receiver.requests).toHaveLength(5);
    expect(receiver.requests[4]!.json).toEqual(receiver.requests[0]!.json);
    expect(receiver.requests[4]!.headers['x-gitlab-event']).toBe('Push Hook');
    expect((await filter(['successful'])).body).toHaveLength(1);
    const unknown = await app.request(`/projects/${project.id}/hooks/${hook.id}/events/999999/resend`, {
      method: 'POST',
      token: ownerToken,
    });
    expect(unknown.status).toBe(404);
  });

  it.skipIf(lacks(OPENSSL))('enable_ssl_verification: an untrusted certificate fails unless it is off', async () => {
    const key = path.join(scratch, 'tls-key.pem');
    const cert = path.join(scratch, 'tls-cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
      ].concat(['-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1']),
      { stdio: 'ignore' },
    );
    const secure = await startReceiver({ key: await fs.readFile(key), cert: await fs.readFile(cert) });
    try {
      await allowLocal();
      const { project } = await makeSampleProject(app, owner);
      const checked = await addHook(project, { url: `${secure.url}/checked` });
      await addHook(project, { url: `${secure.url}/unchecked`, enable_ssl_verification: false });
      expect(checked.enable_ssl_verification).toBe(true);
      const dir = await workClone(project);
      await commitFile(dir, 'tls.txt', 'tls\n', 'TLS');
      await git(['push', '--quiet', 'origin', 'HEAD'], dir);
      await drainAll();
      expect(secure.requests.map((r) => r.path)).toEqual(['/unchecked']);
      const events = await app.request(`/projects/${project.id}/hooks/${checked.id}/events`, { token: ownerToken });
      expect(events.body[0]).toMatchObject({ state: 'failed', response_status: 'internal error' });
      expect(events.body[0].internal_error_message).toMatch(/certificate/i);
    } finally {
      await secure.close();
    }
  });

  it('a target refused at delivery time (settings changed since) is logged, never reached', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    const hook = await addHook(project, { url: `${receiver.url}/later-refused` });
    await resetSettings(app);
    const dir = await workClone(project);
    await commitFile(dir, 'g.txt', 'g\n', 'G');
    await git(['push', '--quiet', 'origin', 'HEAD'], dir);
    await drainAll();
    expect(receiver.requests).toEqual([]);
    const events = await app.request(`/projects/${project.id}/hooks/${hook.id}/events`, { token: ownerToken });
    expect(events.body[0]).toMatchObject({ state: 'failed', response_status: 'internal error' });
    expect(events.body[0].internal_error_message).toMatch(/not allowed/);
  });

  it('a project without hooks queues nothing for a push', async () => {
    const { project } = await makeSampleProject(app, owner);
    const dir = await workClone(project);
    await commitFile(dir, 'h.txt', 'h\n', 'H');
    const before = await app.deps.db.selectFrom('jobs').select('id').where('kind', 'like', 'project_%hooks').execute();
    await git(['push', '--quiet', 'origin', 'HEAD'], dir);
    const afterJobs = await app.deps.db
      .selectFrom('jobs')
      .select('id')
      .where('kind', 'like', 'project_%hooks')
      .execute();
    expect(afterJobs.length).toBe(before.length);
  });

  it('a commit through the API is a push too; each hook has its own stable X-Gitlab-Webhook-UUID', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    await addHook(project, { url: `${receiver.url}/one` });
    await addHook(project, { url: `${receiver.url}/two` });
    const branch = project.default_branch ?? 'main';
    for (const name of ['a.txt', 'b.txt']) {
      const res = await app.request(`/projects/${project.id}/repository/files/${name}`, {
        method: 'POST',
        token: ownerToken,
        body: { branch, content: name, commit_message: `Add ${name}` },
      });
      expect(res.status, res.text).toBe(201);
    }
    await drainAll();
    expect(receiver.requests).toHaveLength(4);
    const one = receiver.requests.filter((r) => r.path === '/one');
    const two = receiver.requests.filter((r) => r.path === '/two');
    expect(one.map((r) => r.json.commits[0].title)).toEqual(['Add a.txt', 'Add b.txt']);
    expect(one.map((r) => r.json.ref)).toEqual([`refs/heads/${branch}`, `refs/heads/${branch}`]);
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    expect(one[0]!.headers['x-gitlab-webhook-uuid']).toMatch(uuid);
    expect(one[1]!.headers['x-gitlab-webhook-uuid']).toBe(one[0]!.headers['x-gitlab-webhook-uuid']);
    expect(two[0]!.headers['x-gitlab-webhook-uuid']).not.toBe(one[0]!.headers['x-gitlab-webhook-uuid']);
    // One event, two hooks: the same event UUID, each delivery its own idempotency key.
    expect(two[0]!.headers['x-gitlab-event-uuid']).toBe(one[0]!.headers['x-gitlab-event-uuid']);
    expect(two[0]!.headers['idempotency-key']).not.toBe(one[0]!.headers['idempotency-key']);
  });

  it('the daily pruning drops deliveries older than 90 days from the log', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    const hook = await addHook(project, { url: `${receiver.url}/pruned` });
    const row = (days: number) => ({
      project_id: project.id,
      web_hook_id: hook.id,
      trigger: 'push_events',
      url: `${receiver.url}/pruned`,
      attempt: 1,
      state: 'delivered',
      request_headers: '{}',
      request_data: 'null',
      created_at: new Date(app.clock.now().getTime() - days * 86_400_000),
    });
    await app.deps.db
      .insertInto('hook_deliveries')
      .values([row(91), row(89)])
      .execute();
    await scheduleHookJobs(app.deps);
    await app.deps.db
      .updateTable('jobs')
      .set({ run_at: new Date(0) })
      .where('kind', '=', DELIVERY_LOG_PRUNE_SCHEDULE.kind)
      .execute();
    await worker.drain();
    const left = await app.deps.db
      .selectFrom('hook_deliveries')
      .select('created_at')
      .where('web_hook_id', '=', hook.id)
      .execute();
    expect(left).toHaveLength(1);
    expect(left[0]!.created_at.getTime()).toBeGreaterThan(app.clock.now().getTime() - 90 * 86_400_000);
    const next = await app.deps.db
      .selectFrom('jobs')
      .select('run_at')
      .where('kind', '=', DELIVERY_LOG_PRUNE_SCHEDULE.kind)
      .where('state', '=', 'queued')
      .execute();
    expect(next).toHaveLength(1);
  });

  it('queueProjectHooks delivers other modules events to the hooks that want them, in their transaction', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    await addHook(project, { url: `${receiver.url}/mr`, push_events: false, merge_requests_events: true });
    await addHook(project, { url: `${receiver.url}/pipes`, push_events: false, pipeline_events: true });
    const payload = { object_kind: 'merge_request', object_attributes: { iid: 3, action: 'open' } };
    // A rolled back change tells nobody.
    await app.deps.db
      .transaction()
      .execute(async (trx) => {
        await queueProjectHooks(trx, project.id, 'merge_requests_events', payload, { branch: 'main' });
        throw new Error('rolled back');
      })
      .catch(() => {});
    await drainAll();
    expect(receiver.requests).toEqual([]);
    await app.deps.db.transaction().execute(async (trx) => {
      await queueProjectHooks(trx, project.id, 'merge_requests_events', payload, { branch: 'main' });
      await queueProjectHooks(trx, project.id, 'pipeline_events', { object_kind: 'pipeline' });
    });
    await drainAll();
    expect(
      receiver.requests.map((r) => `${r.path} ${r.headers['x-gitlab-event']} ${r.json.object_kind}`).sort(),
    ).toEqual(['/mr Merge Request Hook merge_request', '/pipes Pipeline Hook pipeline']);
  });

  it('merge requests: opened and closed reach the hooks with GitLab merge request payload', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    await addHook(project, { url: `${receiver.url}/mr-hook`, push_events: false, merge_requests_events: true });
    const dir = await workClone(project);
    const target = await git(['rev-parse', '--abbrev-ref', 'HEAD'], dir);
    await git(['checkout', '--quiet', '-b', 'feature-hooks'], dir);
    const head = await commitFile(dir, 'feature.txt', 'feature\n', 'Add the feature');
    await git(['push', '--quiet', 'origin', 'feature-hooks'], dir);
    const opened = await app.request(`/projects/${project.id}/merge_requests`, {
      method: 'POST',
      token: ownerToken,
      body: { source_branch: 'feature-hooks', target_branch: target, title: 'Draft: the feature' },
    });
    expect(opened.status, opened.text).toBe(201);
    const closed = await app.request(`/projects/${project.id}/merge_requests/${opened.body.iid}`, {
      method: 'PUT',
      token: ownerToken,
      body: { state_event: 'close' },
    });
    expect(closed.status, closed.text).toBe(200);
    await drainAll();
    expect(receiver.requests).toHaveLength(2);
    for (const r of receiver.requests) expect(r.headers['x-gitlab-event']).toBe('Merge Request Hook');
    const [open, close] = receiver.requests.map((r) => r.json);
    expect(open).toMatchObject({
      object_kind: 'merge_request',
      event_type: 'merge_request',
      user: { id: owner.id, username: owner.username, name: 'Hook Owner' },
      project: { id: project.id, path_with_namespace: project.full_path },
      object_attributes: {
        iid: opened.body.iid,
        source_branch: 'feature-hooks',
        target_branch: target,
        title: 'Draft: the feature',
        draft: true,
        url: `${app.baseUrl}/${project.full_path}/-/merge_requests/${opened.body.iid}`,
        last_commit: { id: head, title: 'Add the feature' },
      },
      repository: { name: project.name },
    });
    // Each payload is built when its job runs: the action tells which event it was.
    expect([open.object_attributes.action, close.object_attributes.action]).toEqual(['open', 'close']);
  });

  it('POST /hooks/:hook_id/test/push_events sends a sample push now', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    const hook = await addHook(project, { url: `${receiver.url}/test`, token: 'tt' });
    const res = await app.request(`/projects/${project.id}/hooks/${hook.id}/test/push_events`, {
      method: 'POST',
      token: ownerToken,
    });
    expect(res.status, res.text).toBe(201);
    expect(receiver.requests).toHaveLength(1);
    expect(receiver.requests[0]!.headers['x-gitlab-event']).toBe('Push Hook');
    expect(receiver.requests[0]!.headers['x-gitlab-token']).toBe('tt');
    expect(receiver.requests[0]!.json).toMatchObject({ object_kind: 'push', project_id: project.id });
    receiver.status = 404;
    const failed = await app.request(`/projects/${project.id}/hooks/${hook.id}/test/push_events`, {
      method: 'POST',
      token: ownerToken,
    });
    expect(failed.status).toBe(422);
    const noMrs = await app.request(`/projects/${project.id}/hooks/${hook.id}/test/merge_requests_events`, {
      method: 'POST',
      token: ownerToken,
    });
    expect(noMrs.status).toBe(422);
    expect(noMrs.body).toEqual({ message: 'Ensure the project has merge requests.' });
    const bad = await app.request(`/projects/${project.id}/hooks/${hook.id}/test/nothing`, {
      method: 'POST',
      token: ownerToken,
    });
    expect(bad.status).toBe(400);
  });
});
