import nodemailer from 'nodemailer';
import { findProjectWithNamespace } from '../db/queries/projects.js';
import type { Integration, Namespace, Project } from '../db/schema.js';
import { gitText } from '../git/command.js';
import { resolveCommit } from '../git/refs.js';
import { chatMessageFor, chatPayload } from './chat-messages.js';
import type { Deps } from './deps.js';
import { sendLogged } from './hook-delivery.js';
import { INTEGRATION_KINDS, type IntegrationKind } from './integration-catalog.js';
import { eventEnabled, settingsForDelivery, splitEmails } from './integrations.js';
import { protectedBranchRules } from './protected-branches.js';
import { HOOK_LOG_NAMES, HOOK_TRIGGERS, type HookTrigger } from './webhooks.js';

/** One event for one integration, as the delivery job carries it. */
export interface IntegrationEvent {
  integrationId: number;
  trigger: HookTrigger;
  branch: string | null;
  data: Record<string, unknown>;
}

/** Characters of diff a push e-mail carries at most; the rest is cut with a note. */
const EMAIL_DIFF_MAX_CHARS = 200_000;
const ZERO = /^0+$/;

type Settings = Record<string, unknown>;
type Payload = Record<string, any>;

interface Context {
  deps: Deps;
  kind: IntegrationKind;
  integration: Integration;
  project: Project;
  namespace: Namespace;
  settings: Settings;
  event: IntegrationEvent;
  attempt: number;
  maxAttempts: number;
}

/**
 * GitLab's `branches_to_be_notified`: `all`; `default` (the default branch); `protected` (a
 * branch a protected branch rule matches); `default_and_protected` (either). Tags and events
 * without a branch always pass.
 */
export async function branchNotified(
  deps: Deps,
  project: Project,
  setting: unknown,
  branch: string | null,
): Promise<boolean> {
  if (branch === null || setting === 'all') return true;
  const isDefault = branch === (project.default_branch ?? 'main');
  if (setting === 'default' || setting === undefined || setting === null) return isDefault;
  const isProtected = (await protectedBranchRules(deps, project.id, branch)) !== null;
  if (setting === 'protected') return isProtected;
  return isDefault || isProtected;
}

/** The branch of a pipeline payload, or null for a tag pipeline. */
function pipelineBranch(data: Payload): string | null {
  const attrs = data.object_attributes ?? {};
  return attrs.tag ? null : typeof attrs.ref === 'string' ? attrs.ref : null;
}

/** GitLab's pipeline notification rule: finished pipelines only, failures always, successes unless broken-only. */
function pipelineNotified(settings: Settings, data: Payload): boolean {
  const status = data.object_attributes?.status;
  if (status === 'failed') return true;
  if (status === 'success') return settings.notify_only_broken_pipelines !== true;
  return false;
}

/** Delivers an event to an integration: a chat message, an e-mail or a build trigger. */
export async function deliverIntegration(
  deps: Deps,
  event: IntegrationEvent,
  attempt: number,
  maxAttempts: number,
): Promise<void> {
  const integration = await deps.db
    .selectFrom('integrations')
    .selectAll()
    .where('id', '=', event.integrationId)
    .executeTakeFirst();
  if (!integration?.active) return;
  const kind = INTEGRATION_KINDS.get(integration.slug);
  if (!kind || !eventEnabled(kind, integration, event.trigger)) return;
  const found = await findProjectWithNamespace(deps.db, { id: integration.project_id });
  if (!found) return;
  const ctx: Context = {
    deps,
    kind,
    integration,
    ...found,
    settings: settingsForDelivery(deps, kind, integration),
    event,
    attempt,
    maxAttempts,
  };
  const branch = event.trigger === 'pipeline_events' ? pipelineBranch(event.data) : event.branch;
  switch (kind.delivery) {
    case 'chat': {
      const scope = ctx.settings.notify_only_default_branch === true ? 'default' : ctx.settings.branches_to_be_notified;
      if (!(await branchNotified(deps, found.project, scope, branch))) return;
      if (event.trigger === 'pipeline_events' && !pipelineNotified(ctx.settings, event.data)) return;
      return deliverChat(ctx);
    }
    case 'email_push':
      if (!(await branchNotified(deps, found.project, ctx.settings.branches_to_be_notified ?? 'all', branch))) return;
      return sendPushEmail(ctx);
    case 'email_pipeline':
      if (!(await branchNotified(deps, found.project, ctx.settings.branches_to_be_notified, branch))) return;
      if (!pipelineNotified(ctx.settings, event.data)) return;
      return sendPipelineEmail(ctx);
    case 'build':
      return triggerBuild(ctx);
    default:
      return;
  }
}

const record = (ctx: Context, url: string) => ({
  projectId: ctx.project.id,
  integrationId: ctx.integration.id,
  trigger: ctx.event.trigger,
  url,
  attempt: ctx.attempt,
  maxAttempts: ctx.maxAttempts,
  requestData: ctx.event.data,
});

/** Posts the chat message the kind's service expects to its incoming webhook. */
async function deliverChat(ctx: Context): Promise<void> {
  const message = chatMessageFor(ctx.event.data);
  if (ctx.kind.chat === 'telegram') return deliverTelegram(ctx, message);
  const url = String(ctx.settings.webhook ?? '');
  if (!url) return;
  const channelField = `${ctx.event.trigger.replace(/s?_events$/, '').replace(/^issues$/, 'issue')}_channel`;
  const channel = (ctx.settings[channelField] as string | null) || (ctx.settings.channel as string | null) || null;
  const body = chatPayload(ctx.kind.chat ?? 'plain_text', message, {
    channel,
    username: (ctx.settings.username as string | null) ?? null,
  });
  await sendLogged(
    ctx.deps,
    { ...record(ctx, url), requestData: body },
    { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) },
  );
}

/** Telegram's Bot API: `sendMessage` to the room (and topic thread) with the bot token in the path. */
async function deliverTelegram(ctx: Context, message: ReturnType<typeof chatMessageFor>): Promise<void> {
  const { settings } = ctx;
  const base = trimSlash(String(settings.hostname || 'https://api.telegram.org'));
  const url = `${base}/bot${encodeURIComponent(String(settings.token ?? ''))}/sendMessage`;
  const body = {
    chat_id: settings.room,
    ...chatPayload('telegram', message),
    ...(settings.thread ? { message_thread_id: Number(settings.thread) || settings.thread } : {}),
  };
  // The log shows the API's address without the token in it.
  await sendLogged(
    ctx.deps,
    { ...record(ctx, `${base}/bot[REDACTED]/sendMessage`), requestData: body },
    { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) },
    url,
  );
}

const basicAuth = (username: unknown, password: unknown): Record<string, string> =>
  username ? { Authorization: `Basic ${Buffer.from(`${username}:${password ?? ''}`).toString('base64')}` } : {};

const trimSlash = (url: string) => url.replace(/\/+$/, '');

/** The build trigger request each build server expects, on push (and tag push, merge request where it listens). */
async function triggerBuild(ctx: Context): Promise<void> {
  const { settings, event, project, namespace } = ctx;
  const json = JSON.stringify(event.data);
  const hookHeaders = { 'Content-Type': 'application/json', 'X-Gitlab-Event': HOOK_TRIGGERS[event.trigger] };
  // `enable_ssl_verification` of the build servers that have it (Buildkite's is always on).
  const verifyTls = ctx.kind.slug === 'buildkite' || settings.enable_ssl_verification !== false;
  switch (ctx.kind.slug) {
    case 'jenkins': {
      const url = `${trimSlash(String(settings.jenkins_url))}/project/${encodeURIComponent(String(settings.project_name))}`;
      await sendLogged(ctx.deps, record(ctx, url), {
        headers: { ...hookHeaders, ...basicAuth(settings.username, settings.password) },
        body: json,
        verifyTls,
      });
      return;
    }
    case 'drone-ci': {
      const url = new URL(`${trimSlash(String(settings.drone_url))}/hook`);
      url.searchParams.set('owner', namespace.full_path);
      url.searchParams.set('name', project.path);
      const logged = url.href;
      url.searchParams.set('access_token', String(settings.token ?? ''));
      await sendLogged(
        ctx.deps,
        record(ctx, `${logged}&access_token=[REDACTED]`),
        { headers: hookHeaders, body: json, verifyTls },
        url.href,
      );
      return;
    }
    case 'bamboo': {
      // Bamboo builds branches: a tag push or a merge request event queues nothing there.
      if (event.trigger !== 'push_events' || ZERO.test(String(event.data.after))) return;
      for (const key of String(settings.build_key ?? '')
        .split(',')
        .map((k) => k.trim())
        .filter(Boolean)) {
        const url = new URL(`${trimSlash(String(settings.bamboo_url))}/updateAndBuild.action`);
        url.searchParams.set('buildKey', key);
        if (settings.username) url.searchParams.set('os_authType', 'basic');
        await sendLogged(ctx.deps, record(ctx, url.href), {
          method: 'GET',
          headers: basicAuth(settings.username, settings.password),
          verifyTls,
        });
      }
      return;
    }
    case 'packagist': {
      const url = new URL(`${trimSlash(String(settings.server || 'https://packagist.org'))}/api/update-package`);
      url.searchParams.set('username', String(settings.username ?? ''));
      const logged = url.href;
      url.searchParams.set('apiToken', String(settings.token ?? ''));
      const body = JSON.stringify({ repository: { url: `${ctx.deps.config.baseUrl}/${project.full_path}` } });
      await sendLogged(
        ctx.deps,
        record(ctx, `${logged}&apiToken=[REDACTED]`),
        { headers: { 'Content-Type': 'application/json' }, body },
        url.href,
      );
      return;
    }
    case 'teamcity': {
      if (event.trigger !== 'push_events' || ZERO.test(String(event.data.after))) return;
      const url = `${trimSlash(String(settings.teamcity_url))}/httpAuth/app/rest/buildQueue`;
      const branch = String(event.data.ref).replace(/[<>&"]/g, '');
      const buildType = String(settings.build_type).replace(/[<>&"]/g, '');
      await sendLogged(ctx.deps, record(ctx, url), {
        headers: { 'Content-Type': 'application/xml', ...basicAuth(settings.username, settings.password) },
        body: `<build branchName="${branch}"><buildType id="${buildType}"/></build>`,
        verifyTls,
      });
      return;
    }
    case 'buildkite': {
      const [webhookToken] = String(settings.token ?? '').split(':');
      const url = `https://webhook.buildkite.com/deliver/${encodeURIComponent(webhookToken ?? '')}`;
      await sendLogged(ctx.deps, record(ctx, url), { headers: hookHeaders, body: json });
      return;
    }
    default:
      return;
  }
}

/** A transport for SMTP_URL, or null when mail is not configured. */
function mailer(deps: Deps) {
  return deps.config.smtpUrl ? nodemailer.createTransport(deps.config.smtpUrl) : null;
}

/** Records one e-mail try in the delivery log; a failure is retried by the queue. */
async function sendMail(
  ctx: Context,
  mail: { from: string; to: string[]; subject: string; text: string; headers?: Record<string, string> },
): Promise<void> {
  const transport = mailer(ctx.deps);
  const started = process.hrtime.bigint();
  const log = async (state: 'delivered' | 'failed' | 'retrying', error: string | null) => {
    await ctx.deps.db
      .insertInto('hook_deliveries')
      .values({
        project_id: ctx.project.id,
        integration_id: ctx.integration.id,
        trigger: HOOK_LOG_NAMES[ctx.event.trigger] ?? ctx.event.trigger,
        url: `mailto:${mail.to.join(',')}`,
        attempt: ctx.attempt,
        state,
        request_headers: JSON.stringify({ From: mail.from, Subject: mail.subject }),
        request_data: JSON.stringify(null),
        response_status: error ? 'internal error' : '250',
        response_body: null,
        internal_error_message: error,
        execution_duration: Number(process.hrtime.bigint() - started) / 1e9,
        created_at: ctx.deps.clock.now(),
      })
      .execute();
  };
  if (!transport) {
    await log('failed', 'SMTP_URL is not configured');
    return;
  }
  try {
    await transport.sendMail({ ...mail, to: mail.to.join(', ') });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    await log(ctx.attempt >= ctx.maxAttempts ? 'failed' : 'retrying', message);
    throw error;
  } finally {
    transport.close();
  }
  await log('delivered', null);
}

/** The sender: Depot's address under the pusher's name, or the committer's when allowed and in Depot's domain. */
function pushSender(ctx: Context, data: Payload): string {
  const from = ctx.deps.config.emailFrom;
  const name = String(data.user_name ?? 'Depot').replace(/["<>\r\n]/g, '');
  if (ctx.settings.send_from_committer_email === true) {
    const commits = (data.commits ?? []) as Payload[];
    const committer = commits[commits.length - 1]?.author?.email as string | undefined;
    const domain = from.split('@')[1];
    if (committer && domain && committer.toLowerCase().endsWith(`@${domain.toLowerCase()}`)) {
      return `"${name}" <${committer}>`;
    }
  }
  return `"${name}" <${from}>`;
}

/** The diff of a push for its e-mail, cut at EMAIL_DIFF_MAX_CHARS; empty when there is none to show. */
async function pushDiff(ctx: Context, data: Payload): Promise<string> {
  const gitDir = ctx.deps.storages.repositoryPath(ctx.project.repository_storage, ctx.project.id);
  const after = String(data.after);
  if (ZERO.test(after) || !/^[0-9a-f]{40,64}$/.test(after)) return '';
  let base = String(data.before);
  if (ZERO.test(base)) {
    const first = ((data.commits ?? []) as Payload[])[0];
    const commit = first ? await resolveCommit(gitDir, String(first.id)) : null;
    if (!commit?.parentIds[0]) return '';
    base = commit.parentIds[0];
  }
  if (!/^[0-9a-f]{40,64}$/.test(base)) return '';
  const diff = await gitText({
    gitDir,
    subcommand: 'diff',
    flags: ['--no-color', '--no-ext-diff', '--stat', '--patch'],
    args: [base, after],
  }).catch(() => '');
  return diff.length > EMAIL_DIFF_MAX_CHARS
    ? `${diff.slice(0, EMAIL_DIFF_MAX_CHARS)}\n\n[diff cut: too large]\n`
    : diff;
}

/** GitLab's repository push e-mail: subject `[Git][path][branch] …`, the commits, and the diff unless disabled. */
async function sendPushEmail(ctx: Context): Promise<void> {
  const data = ctx.event.data as Payload;
  const recipients = splitEmails(String(ctx.settings.recipients ?? ''));
  if (recipients.length === 0) return;
  const isTag = data.object_kind === 'tag_push';
  const name = String(data.ref).replace(/^refs\/(heads|tags)\//, '');
  const refKind = isTag ? 'tag' : 'branch';
  const commits = (data.commits ?? []) as Payload[];
  let subject = `[Git][${ctx.project.full_path}]`;
  let action: string;
  if (ZERO.test(String(data.before))) {
    action = `Pushed new ${refKind} ${name}`;
    subject += ` ${action}`;
  } else if (ZERO.test(String(data.after))) {
    action = `Deleted ${refKind} ${name}`;
    subject += ` ${action}`;
  } else {
    action = `Pushed to ${refKind} ${name}`;
    subject += `[${name}] `;
    const last = commits[commits.length - 1];
    subject +=
      commits.length > 1
        ? `${data.total_commits_count ?? commits.length} commits: ${last?.title}`
        : String(last?.title ?? 'No commits');
  }
  const webUrl = `${ctx.deps.config.baseUrl}/${ctx.project.full_path}`;
  const lines = [
    `${data.user_name} ${action.charAt(0).toLowerCase()}${action.slice(1)} at ${ctx.project.full_path}`,
    '',
    ...(ZERO.test(String(data.before)) || ZERO.test(String(data.after))
      ? []
      : [`Compare: ${webUrl}/-/compare/${String(data.before).slice(0, 8)}...${String(data.after).slice(0, 8)}`, '']),
    ...(commits.length > 0 ? ['Commits:', ''] : []),
    ...commits.flatMap((c) => [
      `${c.url}`,
      `Author: ${c.author?.name} <${c.author?.email}>`,
      `Date:   ${c.timestamp}`,
      '',
      ...String(c.message ?? '')
        .trimEnd()
        .split('\n')
        .map((l: string) => `    ${l}`),
      '',
    ]),
  ];
  if (ctx.settings.disable_diffs !== true) {
    const diff = await pushDiff(ctx, data);
    if (diff) lines.push('Changes:', '', diff);
  }
  lines.push('---', `View it on Depot: ${webUrl}`);
  await sendMail(ctx, {
    from: pushSender(ctx, data),
    to: recipients,
    subject,
    text: lines.join('\n'),
    headers: { 'X-GitLab-Project': ctx.project.full_path, 'X-GitLab-Author': String(data.user_username ?? '') },
  });
}

/** GitLab's pipeline status e-mail: `[path] Pipeline #id has failed for branch | sha`. */
async function sendPipelineEmail(ctx: Context): Promise<void> {
  const data = ctx.event.data as Payload;
  const attrs = data.object_attributes ?? {};
  const recipients = splitEmails(String(ctx.settings.recipients ?? ''));
  if (ctx.settings.add_pusher === true && typeof data.user?.email === 'string') recipients.push(data.user.email);
  if (recipients.length === 0) return;
  if (ctx.settings.notify_only_default_branch === true && attrs.ref !== (ctx.project.default_branch ?? 'main')) return;
  const status = attrs.status === 'success' ? 'Successful' : 'Failed';
  const subject = `${status} pipeline for ${attrs.ref} | ${ctx.project.name} | ${String(attrs.sha ?? '').slice(0, 8)}`;
  const url = `${ctx.deps.config.baseUrl}/${ctx.project.full_path}/-/pipelines/${attrs.id}`;
  await sendMail(ctx, {
    from: `"Depot" <${ctx.deps.config.emailFrom}>`,
    to: [...new Set(recipients)],
    subject,
    text: `Pipeline #${attrs.id} ${attrs.status === 'success' ? 'passed' : 'failed'} for ${attrs.ref} (${attrs.sha}).\n\n${url}\n`,
  });
}
