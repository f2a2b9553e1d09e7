import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Gitlab } from '@gitbeaker/rest';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Project, User } from '../../src/db/schema.js';
import { JOB_KINDS } from '../../src/jobs/kinds.js';
import { Worker } from '../../src/jobs/worker.js';
import { INTEGRATION_KINDS } from '../../src/services/integration-catalog.js';
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
import { type Receiver, startReceiver } from '../support/receiver.js';
import { type MailSink, startMailSink } from '../support/smtp.js';

let app: TestApp;
let worker: Worker;
let receiver: Receiver;
let sink: MailSink;
let scratch: string;
let owner: User;
let ownerToken: string;
let adminToken: string;
let counter = 0;

beforeAll(async () => {
  sink = await startMailSink();
  app = await startTestApp({ env: { SMTP_URL: sink.url, SMTP_FROM: 'gitlab@depot.test' } });
  worker = new Worker(app.deps, JOB_KINDS);
  receiver = await startReceiver();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'depot-integrations-'));
  owner = await makeUser(app, { name: 'Ivy Owner' });
  ownerToken = await makeToken(app, owner);
  adminToken = await makeToken(app, await makeUser(app, { admin: true }));
});
afterAll(async () => {
  await receiver?.close();
  await sink?.close();
  await app?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});
beforeEach(async () => {
  await resetSettings(app);
  receiver.requests = [];
  receiver.status = 200;
  sink.mails.length = 0;
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
  await fs.writeFile(path.join(dir, file), content);
  await git(['add', '-A'], dir);
  await git(['commit', '--quiet', '-m', message], dir);
  return git(['rev-parse', 'HEAD'], dir);
}

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

async function put(
  project: Project,
  slug: string,
  body: Record<string, unknown>,
  token = ownerToken,
  prefix = 'integrations',
) {
  return app.request(`/projects/${project.id}/${prefix}/${slug}`, { method: 'PUT', token, body });
}

/** A value that passes each field's checks, for the every-kind walk. */
function sampleValue(field: { name: string; type: string; values?: readonly string[]; emails?: boolean }) {
  if (field.type === 'boolean') return true;
  if (field.type === 'integer') return 1;
  if (field.values) return field.values[field.values.length - 1];
  if (field.emails) return 'a@example.com, b@example.com';
  return `${receiver.url}/${field.name}`;
}

describe('integration settings', () => {
  it('every kind: PUT checks required fields, GET hides secrets, DELETE forgets, at both paths', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    for (const kind of INTEGRATION_KINDS.values()) {
      const required = kind.fields.filter((f) => f.required);
      const prefix = kind.slug.length % 2 === 0 ? 'integrations' : 'services';
      if (required.length > 0) {
        const missing = await put(project, kind.slug, {}, ownerToken, prefix);
        expect(missing.status, kind.slug).toBe(400);
        expect(missing.body.error, kind.slug).toBe(required.map((f) => `${f.name} is missing`).join(', '));
      }
      const body = Object.fromEntries(kind.fields.map((f) => [f.name, sampleValue(f)]));
      const saved = await put(project, kind.slug, body, ownerToken, prefix);
      expect(saved.status, `${kind.slug} ${saved.text}`).toBe(200);
      expect(saved.body).toMatchObject({ slug: kind.slug, title: kind.title, active: true });
      for (const field of kind.fields) {
        if (field.secret) {
          expect(saved.body.properties, `${kind.slug}.${field.name}`).not.toHaveProperty(field.name);
          expect(saved.text, `${kind.slug}.${field.name}`).not.toContain(`/${field.name}"`);
        } else {
          expect(saved.body.properties[field.name], `${kind.slug}.${field.name}`).toEqual(body[field.name]);
        }
      }
      const shown = await app.request(`/projects/${project.id}/integrations/${kind.slug}`, { token: ownerToken });
      expect(shown.status).toBe(200);
      expect(shown.body.properties).toEqual(saved.body.properties);
    }
    const list = await app.request(`/projects/${project.id}/services`, { token: ownerToken });
    expect(list.body.map((i: { slug: string }) => i.slug).sort()).toEqual([...INTEGRATION_KINDS.keys()].sort());
    expect(list.body[0]).not.toHaveProperty('properties');

    for (const slug of INTEGRATION_KINDS.keys()) {
      const gone = await app.request(`/projects/${project.id}/integrations/${slug}`, {
        method: 'DELETE',
        token: ownerToken,
      });
      expect(gone.status, slug).toBe(204);
    }
    const after = await app.request(`/projects/${project.id}/integrations`, { token: ownerToken });
    expect(after.body).toEqual([]);
    const disabled = await app.request(`/projects/${project.id}/integrations/jira`, { token: ownerToken });
    expect(disabled.body).toMatchObject({ active: false, properties: { url: null, api_url: null, username: null } });
    const rows = await app.deps.db.selectFrom('integrations').select('sealed_secrets').execute();
    expect(rows.every((r) => Object.keys(r.sealed_secrets).length === 0)).toBe(true);
  });

  it('Slack through @gitbeaker/rest: the webhook is secret, kept when a PUT omits it, events default as GitLab', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    const api = new Gitlab({ host: app.baseUrl, token: ownerToken });
    const saved = await api.Integrations.edit(project.id, 'slack', {
      webhook: `${receiver.url}/slack-secret-path`,
      username: 'depot-bot',
      channel: '#general',
    } as never);
    expect(saved).toMatchObject({
      slug: 'slack',
      active: true,
      push_events: true,
      tag_push_events: true,
      merge_requests_events: true,
      pipeline_events: true,
      job_events: false,
      properties: {
        username: 'depot-bot',
        channel: '#general',
        notify_only_broken_pipelines: true,
        branches_to_be_notified: 'default',
      },
    });
    expect(JSON.stringify(saved)).not.toContain('slack-secret-path');
    const row = await app.deps.db
      .selectFrom('integrations')
      .selectAll()
      .where('id', '=', saved.id as number)
      .executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain('slack-secret-path');

    const edited = await api.Integrations.edit(project.id, 'slack', { channel: '#dev', pushEvents: false } as never);
    expect(edited).toMatchObject({ push_events: false, properties: { channel: '#dev', username: 'depot-bot' } });
    const kept = await app.deps.db
      .selectFrom('integrations')
      .selectAll()
      .where('id', '=', saved.id as number)
      .executeTakeFirstOrThrow();
    expect(kept.sealed_secrets.webhook).toBe(row.sealed_secrets.webhook);

    const shown = await api.Integrations.show(project.id, 'slack');
    expect(shown.properties).not.toHaveProperty('webhook');
    const all = await api.Integrations.all(project.id);
    expect(all.map((i) => i.slug)).toEqual(['slack']);
    await api.Integrations.disable(project.id, 'slack');
    expect(await api.Integrations.all(project.id)).toEqual([]);
  });

  it('checks types, enums, URLs, e-mail lists and the outbound guard; a refusal changes nothing', async () => {
    const { project } = await makeSampleProject(app, owner);
    const cases: [string, Record<string, unknown>, number][] = [
      ['slack', { webhook: 'https://hooks.example.com/x', branches_to_be_notified: 'some' }, 400],
      ['slack', { webhook: 'https://hooks.example.com/x', push_events: 'perhaps' }, 400],
      ['slack', { webhook: 'not a url' }, 400],
      ['slack', { webhook: `${receiver.url}/local` }, 422],
      ['microsoft-teams', { webhook: 'http://10.1.2.3/hook' }, 422],
      ['emails-on-push', { recipients: 'ok@example.com, not-an-address' }, 400],
      ['jenkins', { jenkins_url: 'http://192.168.0.2:8080', project_name: 'x' }, 422],
      ['irker', { recipients: 'x', server_port: 'many' }, 400],
    ];
    for (const [slug, body, status] of cases) {
      const res = await put(project, slug, body);
      expect(res.status, `${slug} ${JSON.stringify(body)} ${res.text}`).toBe(status);
    }
    const refused = await put(project, 'slack', { webhook: `${receiver.url}/local` });
    expect(refused.body).toEqual({
      message: { webhook: [expect.stringMatching(/^is blocked: Requests to localhost are not allowed/)] },
    });
    // The spec's issue tracker states: saved inactive with active=false, activated by a PUT with active=true.
    await allowLocal();
    const tracker = {
      project_url: `${receiver.url}/p`,
      issues_url: `${receiver.url}/i/:id`,
      new_issue_url: `${receiver.url}/new`,
      title: 'Tracker',
    };
    const inactive = await put(project, 'custom-issue-tracker', { ...tracker, active: false }, ownerToken, 'services');
    expect(inactive.body).toMatchObject({ active: false, push_events: true, properties: { title: 'Tracker' } });
    expect((await app.request(`/projects/${project.id}/services`, { token: ownerToken })).body).toEqual([]);
    const activated = await put(project, 'custom-issue-tracker', { active: true }, ownerToken, 'services');
    expect(activated.body).toMatchObject({ active: true, properties: { project_url: `${receiver.url}/p` } });
    const deleted = await app.request(`/projects/${project.id}/services/custom-issue-tracker`, {
      method: 'DELETE',
      token: ownerToken,
    });
    expect(deleted.status).toBe(204);
    const cleared = await app.request(`/projects/${project.id}/services/custom-issue-tracker`, { token: ownerToken });
    expect(cleared.body).toMatchObject({
      active: false,
      properties: { project_url: null, issues_url: null, title: null },
    });

    // A stored required setting cannot be emptied.
    await allowLocal();
    expect((await put(project, 'drone-ci', { drone_url: `${receiver.url}/drone`, token: 't' })).status).toBe(200);
    const emptied = await put(project, 'drone-ci', { drone_url: '' });
    expect(emptied.status).toBe(400);
    expect(emptied.body).toEqual({ error: 'drone_url is missing' });
    const keptSecret = await put(project, 'drone-ci', { token: '' });
    expect(keptSecret.status).toBe(200);
    expect(keptSecret.body.properties.drone_url).toBe(`${receiver.url}/drone`);
    await app.deps.db.deleteFrom('integrations').where('project_id', '=', project.id).execute();
    const unknown = await app.request(`/projects/${project.id}/integrations/no-such-thing`, { token: ownerToken });
    expect(unknown.status).toBe(400);
    const never = await app.request(`/projects/${project.id}/integrations/asana`, { token: ownerToken });
    expect(never.status).toBe(404);
    expect(never.body).toEqual({ message: '404 Integration Not Found' });
    const rows = await app.deps.db
      .selectFrom('integrations')
      .select('id')
      .where('project_id', '=', project.id)
      .execute();
    expect(rows).toEqual([]);
  });

  it('is for maintainers, owners and administrators only', async () => {
    const { project } = await makeSampleProject(app, owner, { visibility: 'private' });
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
      const list = await app.request(`/projects/${project.id}/integrations`, { token: persona.token });
      expect(list.status, persona.name).toBe(expected[persona.name]);
      const res = await put(project, 'asana', { api_key: `key-${persona.name}` }, persona.token ?? '');
      expect(res.status, persona.name).toBe(expected[persona.name]);
      const del = await app.request(`/projects/${project.id}/services/asana`, {
        method: 'DELETE',
        token: persona.token,
      });
      expect(del.status, persona.name).toBe(expected[persona.name] === 200 ? 204 : expected[persona.name]);
    }
  });
});

describe('integration delivery', () => {
  it('a git push produces the chat messages, the push e-mail and the build triggers', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    const dir = await workClone(project);
    const branch = await git(['rev-parse', '--abbrev-ref', 'HEAD'], dir);
    await app.deps.db.updateTable('projects').set({ default_branch: branch }).where('id', '=', project.id).execute();
    expect(
      (await put(project, 'slack', { webhook: `${receiver.url}/slack`, channel: '#general', push_channel: '#pushes' }))
        .status,
    ).toBe(200);
    expect(
      (await put(project, 'mattermost', { webhook: `${receiver.url}/mattermost`, branches_to_be_notified: 'all' }))
        .status,
    ).toBe(200);
    expect((await put(project, 'microsoft-teams', { webhook: `${receiver.url}/teams` })).status).toBe(200);
    expect((await put(project, 'hangouts-chat', { webhook: `${receiver.url}/gchat` })).status).toBe(200);
    expect((await put(project, 'discord', { webhook: `${receiver.url}/discord` })).status).toBe(200);
    expect((await put(project, 'emails-on-push', { recipients: 'dev@example.com ops@example.com' })).status).toBe(200);
    expect(
      (
        await put(project, 'jenkins', {
          jenkins_url: `${receiver.url}/jenkins`,
          project_name: 'my job',
          username: 'ci',
          password: 'pw',
        })
      ).status,
    ).toBe(200);
    expect((await put(project, 'drone-ci', { drone_url: `${receiver.url}/drone`, token: 'drone-token' })).status).toBe(
      200,
    );
    expect(
      (
        await put(project, 'bamboo', {
          bamboo_url: `${receiver.url}/bamboo`,
          build_key: 'PLAN-1,PLAN-2',
          username: 'b',
          password: 'p',
        })
      ).status,
    ).toBe(200);
    expect(
      (await put(project, 'packagist', { username: 'pk', token: 'pk-token', server: `${receiver.url}/packagist` }))
        .status,
    ).toBe(200);

    expect(
      (
        await put(project, 'telegram', {
          hostname: `${receiver.url}/telegram`,
          token: '123:tele-token',
          room: '@depot',
          thread: '7',
        })
      ).status,
    ).toBe(200);

    const before = await git(['rev-parse', 'HEAD'], dir);
    const sha = await commitFile(dir, 'notes.txt', 'line one\nline = two\n', 'Add notes\n\nLonger body.');
    await git(['push', '--quiet', 'origin', 'HEAD'], dir);
    await drainAll();

    const byPath = (prefix: string) => receiver.requests.filter((r) => r.path.startsWith(prefix));
    const slack = byPath('/slack')[0]!;
    expect(slack.json.channel).toBe('#pushes');
    expect(slack.json.text).toBe(
      `Ivy Owner pushed to branch <${app.baseUrl}/${project.full_path}/-/commits/${branch}|${branch}> of <${app.baseUrl}/${project.full_path}|${project.full_path}> (<${app.baseUrl}/${project.full_path}/-/compare/${before.slice(0, 8)}...${sha.slice(0, 8)}|Compare changes>)`,
    );
    expect(slack.json.attachments[0].text).toBe(
      `<${app.baseUrl}/${project.full_path}/-/commit/${sha}|${sha.slice(0, 8)}>: Add notes - T`,
    );
    expect(byPath('/mattermost')[0]!.json.text).toContain('pushed to branch');
    const teams = byPath('/teams')[0]!.json;
    expect(teams).toMatchObject({ '@type': 'MessageCard', '@context': 'https://schema.org/extensions' });
    expect(teams.sections[0].activityTitle).toContain(
      `[${branch}](${app.baseUrl}/${project.full_path}/-/commits/${branch})`,
    );
    expect(byPath('/gchat')[0]!.json.text).toContain(`|${sha.slice(0, 8)}>: Add notes - T`);
    expect(byPath('/discord')[0]!.json.embeds[0]).toMatchObject({ author: { name: 'Ivy Owner' } });

    const jenkins = byPath('/jenkins')[0]!;
    expect(jenkins.path).toBe('/jenkins/project/my%20job');
    expect(jenkins.headers['x-gitlab-event']).toBe('Push Hook');
    expect(jenkins.headers.authorization).toBe(`Basic ${Buffer.from('ci:pw').toString('base64')}`);
    expect(jenkins.json).toMatchObject({ object_kind: 'push', after: sha });
    const drone = byPath('/drone')[0]!;
    const droneUrl = new URL(drone.path, receiver.url);
    expect(droneUrl.pathname).toBe('/drone/hook');
    expect(Object.fromEntries(droneUrl.searchParams)).toEqual({
      owner: project.full_path.split('/')[0],
      name: project.path,
      access_token: 'drone-token',
    });
    expect(byPath('/bamboo').map((r) => new URL(r.path, receiver.url).searchParams.get('buildKey'))).toEqual([
      'PLAN-1',
      'PLAN-2',
    ]);
    const packagist = byPath('/packagist')[0]!;
    expect(new URL(packagist.path, receiver.url).searchParams.get('apiToken')).toBe('pk-token');
    expect(packagist.json).toEqual({ repository: { url: `${app.baseUrl}/${project.full_path}` } });

    expect(sink.mails).toHaveLength(1);
    const mail = sink.mails[0]!;
    expect(mail.to.sort()).toEqual(['dev@example.com', 'ops@example.com']);
    expect(mail.from).toBe('gitlab@depot.test');
    expect(mail.headers.subject).toBe(`[Git][${project.full_path}][${branch}] Add notes`);
    expect(mail.headers.from).toContain('Ivy Owner');
    expect(mail.text).toContain(`${app.baseUrl}/${project.full_path}/-/commit/${sha}`);
    expect(mail.text).toContain('+line = two');

    const telegram = byPath('/telegram')[0]!;
    expect(telegram.path).toBe(`/telegram/bot${encodeURIComponent('123:tele-token')}/sendMessage`);
    expect(telegram.json).toMatchObject({ chat_id: '@depot', message_thread_id: 7, parse_mode: 'markdown' });
    expect(telegram.json.text).toContain(`Ivy Owner pushed to branch [${branch}]`);

    // Secrets never reach the log in clear.
    const logs = await app.deps.db
      .selectFrom('hook_deliveries')
      .selectAll()
      .where('project_id', '=', project.id)
      .execute();
    expect(logs.length).toBeGreaterThanOrEqual(11);
    const logged = JSON.stringify(logs.map((l) => [l.url, l.request_headers]));
    expect(logged).toContain('access_token=[REDACTED]');
    for (const secret of [Buffer.from('ci:pw').toString('base64'), 'drone-token', 'pk-token', 'tele-token']) {
      expect(logged).not.toContain(secret);
    }
  });

  it('honours event flags, branches_to_be_notified, disable_diffs and tag pushes for e-mail', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    const dir = await workClone(project);
    const branch = await git(['rev-parse', '--abbrev-ref', 'HEAD'], dir);
    await app.deps.db.updateTable('projects').set({ default_branch: branch }).where('id', '=', project.id).execute();
    await put(project, 'slack', { webhook: `${receiver.url}/slack` });
    await put(project, 'microsoft-teams', { webhook: `${receiver.url}/teams`, push_events: false });
    await put(project, 'emails-on-push', {
      recipients: 'dev@example.com',
      disable_diffs: true,
      branches_to_be_notified: 'default',
    });
    await commitFile(dir, 'side.txt', 'side\n', 'Side work');
    await git(['push', '--quiet', 'origin', 'HEAD:refs/heads/side'], dir);
    await drainAll();
    // Slack and e-mail follow the default branch only; Teams has push events off.
    expect(receiver.requests).toEqual([]);
    expect(sink.mails).toEqual([]);

    await git(['tag', 'v1.0'], dir);
    await git(['push', '--quiet', 'origin', 'v1.0'], dir);
    await git(['push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`], dir);
    await drainAll();
    expect(receiver.requests.map((r) => r.path).sort()).toEqual(['/slack', '/slack', '/teams']);
    const subjects = sink.mails.map((m) => m.headers.subject).sort();
    expect(subjects).toEqual([
      `[Git][${project.full_path}] Pushed new tag v1.0`,
      `[Git][${project.full_path}][${branch}] Side work`,
    ]);
    expect(sink.mails.every((m) => !m.text.includes('+side'))).toBe(true);

    // `protected`: a branch a protected branch rule matches (and not the default branch unless protected).
    receiver.requests = [];
    await put(project, 'slack', { branches_to_be_notified: 'protected' });
    const protectedRes = await app.request(`/projects/${project.id}/protected_branches`, {
      method: 'POST',
      token: ownerToken,
      body: { name: 'rel-*' },
    });
    expect(protectedRes.status, protectedRes.text).toBe(201);
    await commitFile(dir, 'rel.txt', 'rel\n', 'Release work');
    await git(['push', '--quiet', 'origin', 'HEAD:refs/heads/rel-1', 'HEAD:refs/heads/other-1'], dir);
    await drainAll();
    expect(receiver.requests.filter((r) => r.path === '/slack').map((r) => r.json.text)).toEqual([
      expect.stringContaining('pushed new branch'),
    ]);
    expect(receiver.requests.find((r) => r.path === '/slack')!.json.text).toContain('rel-1');
  });

  it('pipelines: notify_only_broken_pipelines for chat, pipelines-email through queueProjectHooks', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    await app.deps.db.updateTable('projects').set({ default_branch: 'main' }).where('id', '=', project.id).execute();
    await put(project, 'slack', { webhook: `${receiver.url}/slack` });
    await put(project, 'pipelines-email', { recipients: 'ci@example.com' });
    const pipeline = (status: string) => ({
      object_kind: 'pipeline',
      object_attributes: { id: 7, ref: 'main', tag: false, sha: 'a'.repeat(40), status, duration: 12 },
      user: { name: 'Ivy Owner', username: owner.username, email: owner.email },
      project: {
        id: project.id,
        name: project.name,
        web_url: `${app.baseUrl}/${project.full_path}`,
        path_with_namespace: project.full_path,
      },
    });
    await queueProjectHooks(app.deps.db, project.id, 'pipeline_events', pipeline('success'), { branch: 'main' });
    await drainAll();
    expect(receiver.requests).toEqual([]);
    expect(sink.mails).toEqual([]);
    await queueProjectHooks(app.deps.db, project.id, 'pipeline_events', pipeline('failed'), { branch: 'main' });
    await drainAll();
    expect(receiver.requests).toHaveLength(1);
    expect(receiver.requests[0]!.json.text).toContain('Pipeline #7');
    expect(receiver.requests[0]!.json.text).toContain('failed');
    expect(sink.mails).toHaveLength(1);
    expect(sink.mails[0]!.headers.subject).toBe(`Failed pipeline for main | ${project.name} | aaaaaaaa`);
  });

  it('a failing chat webhook is retried, then logged as failed', async () => {
    await allowLocal();
    const { project } = await makeSampleProject(app, owner);
    await put(project, 'mattermost', { webhook: `${receiver.url}/down`, branches_to_be_notified: 'all' });
    receiver.status = 503;
    const dir = await workClone(project);
    await commitFile(dir, 'x.txt', 'x\n', 'X');
    await git(['push', '--quiet', 'origin', 'HEAD'], dir);
    await drainAll();
    expect(receiver.requests).toHaveLength(4);
    const logs = await app.deps.db
      .selectFrom('hook_deliveries')
      .select(['attempt', 'state', 'response_status'])
      .where('project_id', '=', project.id)
      .orderBy('id')
      .execute();
    expect(logs.map((l) => `${l.attempt} ${l.state} ${l.response_status}`)).toEqual([
      '1 retrying 503',
      '2 retrying 503',
      '3 retrying 503',
      '4 failed 503',
    ]);
  });
});
