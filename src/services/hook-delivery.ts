import { createHash, randomUUID } from 'node:crypto';
import { findProjectWithNamespace } from '../db/queries/projects.js';
import { findUserById } from '../db/queries/users.js';
import type { WebHook } from '../db/schema.js';
import { enqueueJob } from '../jobs/queue.js';
import { OutboundError, outboundRequest } from '../lib/outbound/index.js';
import { GITLAB_COMPATIBLE_VERSION } from '../version.js';
import type { Deps } from './deps.js';
import { buildPushPayload, type PushChange } from './hook-payloads.js';
import { INTEGRATION_KINDS } from './integration-catalog.js';
import { eventEnabled } from './integrations.js';
import { outboundOptions } from './outbound.js';
import { protectedBranchRules } from './protected-branches.js';
import { branchFilterMatches, HOOK_LOG_NAMES, HOOK_TRIGGERS, type HookTrigger, openWith } from './webhooks.js';

export const WEBHOOK_DELIVERY_JOB = 'webhook_delivery';
export const INTEGRATION_DELIVERY_JOB = 'integration_delivery';
/** Tries of one delivery: the first and three retries (the job queue's back-off between them). */
export const DELIVERY_MAX_ATTEMPTS = 4;
/** Response bytes kept in the delivery log. */
const LOGGED_RESPONSE_CHARS = 8 * 1024;

/** A delivery that did not succeed: the job queue retries it. */
export class DeliveryFailed extends Error {}

const branchOf = (ref: string) => (ref.startsWith('refs/heads/') ? ref.slice(11) : null);

/** One event to fan out: what happened, GitLab's payload for it, and the branch it concerns. */
export interface HookEvent {
  trigger: HookTrigger;
  data: Record<string, unknown>;
  branch: string | null;
}

/**
 * Queues, in one transaction, one delivery per webhook that wants each event (and whose branch
 * filter takes the branch, for pushes) and one per active integration with the event on: a
 * retried fan-out queues nothing twice. Runs in the background job `queueProjectHooks` queued.
 */
export async function fanOutHooks(deps: Deps, projectId: number, events: HookEvent[]): Promise<number> {
  return deps.db.transaction().execute(async (trx) => {
    let queued = 0;
    const hooks = await trx
      .selectFrom('web_hooks')
      .selectAll()
      .where('project_id', '=', projectId)
      .orderBy('id')
      .execute();
    const integrations = await trx
      .selectFrom('integrations')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('active', '=', true)
      .orderBy('id')
      .execute();
    for (const { trigger, data, branch } of events) {
      const eventId = randomUUID();
      for (const hook of hooks) {
        if (hook.events[trigger] !== true) continue;
        if (trigger === 'push_events' && branch !== null) {
          if (!branchFilterMatches(hook.branch_filter_strategy, hook.push_events_branch_filter, branch)) continue;
        }
        await enqueueJob(
          trx,
          WEBHOOK_DELIVERY_JOB,
          { hook_id: hook.id, trigger, event_id: eventId, idempotency_key: randomUUID(), data },
          { maxAttempts: DELIVERY_MAX_ATTEMPTS },
        );
        queued += 1;
      }
      for (const integration of integrations) {
        const kind = INTEGRATION_KINDS.get(integration.slug);
        // Kinds that only keep settings get no delivery job.
        if (!kind || kind.delivery === 'none' || !eventEnabled(kind, integration, trigger)) continue;
        await enqueueJob(
          trx,
          INTEGRATION_DELIVERY_JOB,
          { integration_id: integration.id, trigger, branch, data },
          { maxAttempts: DELIVERY_MAX_ATTEMPTS },
        );
        queued += 1;
      }
    }
    return queued;
  });
}

/** Builds the payloads of a push from the repository, then fans them out together (the push hooks job). */
export async function runPushHooks(
  deps: Deps,
  projectId: number,
  userId: number,
  changes: PushChange[],
): Promise<void> {
  const found = await findProjectWithNamespace(deps.db, { id: projectId });
  const user = await findUserById(deps.db, userId);
  if (!found || !user) return;
  const { project, namespace } = found;
  const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
  const events: HookEvent[] = [];
  for (const change of changes) {
    const branch = branchOf(change.ref);
    const refProtected = branch !== null && (await protectedBranchRules(deps, project.id, branch)) !== null;
    const data = await buildPushPayload(deps.config.baseUrl, project, namespace, user, gitDir, change, {
      refProtected,
    });
    const isTag = change.ref.startsWith('refs/tags/');
    events.push({ trigger: isTag ? 'tag_push_events' : 'push_events', data, branch: branchOf(change.ref) });
  }
  await fanOutHooks(deps, project.id, events);
}

export interface DeliveryRecord {
  projectId: number;
  webHookId?: number;
  integrationId?: number;
  trigger: string;
  url: string;
  attempt: number;
  maxAttempts: number;
  requestHeaders: Record<string, string>;
  requestData: unknown;
}

/** Records one try in the delivery log. */
async function logDelivery(
  deps: Deps,
  record: DeliveryRecord,
  outcome: { ok: boolean; status: string | null; body: string | null; error: string | null; seconds: number },
): Promise<void> {
  const state = outcome.ok ? 'delivered' : record.attempt >= record.maxAttempts ? 'failed' : 'retrying';
  await deps.db
    .insertInto('hook_deliveries')
    .values({
      project_id: record.projectId,
      web_hook_id: record.webHookId ?? null,
      integration_id: record.integrationId ?? null,
      trigger: HOOK_LOG_NAMES[record.trigger as HookTrigger] ?? record.trigger,
      url: record.url,
      attempt: record.attempt,
      state,
      request_headers: JSON.stringify(record.requestHeaders),
      request_data: JSON.stringify(record.requestData ?? null),
      response_status: outcome.status,
      response_body: outcome.body,
      internal_error_message: outcome.error,
      execution_duration: outcome.seconds,
      created_at: deps.clock.now(),
    })
    .execute();
}

/** Headers as the log shows them: secrets masked as GitLab masks the token. */
const SECRET_HEADERS = ['x-gitlab-token', 'authorization'];
function loggedHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).map(([k, v]) => [k, SECRET_HEADERS.includes(k.toLowerCase()) ? '[REDACTED]' : v]),
  );
}

/**
 * Sends one request to a user-given URL through the outbound guard and logs the try. A 2xx
 * answer succeeds; anything else (other statuses, a refused or unreachable target) is logged
 * and throws DeliveryFailed so the job is retried, and logged `failed` on the last try.
 */
export async function sendLogged(
  deps: Deps,
  record: Omit<DeliveryRecord, 'requestHeaders'>,
  request: { method?: string; headers: Record<string, string>; body?: string; verifyTls?: boolean },
  /** Where to send when it differs from the logged URL (a URL holding a secret is logged masked). */
  targetUrl?: string,
): Promise<number> {
  const started = process.hrtime.bigint();
  const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
  const full = { ...record, requestHeaders: loggedHeaders(request.headers) };
  let response: Awaited<ReturnType<typeof outboundRequest>>;
  try {
    response = await outboundRequest(
      targetUrl ?? record.url,
      {
        method: request.method ?? 'POST',
        headers: request.headers,
        ...(request.body !== undefined ? { body: request.body } : {}),
      },
      await outboundOptions(deps, 'web_hooks_and_services', { verifyTls: request.verifyTls !== false }),
    );
  } catch (error) {
    if (!(error instanceof OutboundError)) throw error;
    await logDelivery(deps, full, {
      ok: false,
      status: 'internal error',
      body: null,
      error: error.message,
      seconds: seconds(),
    });
    throw new DeliveryFailed(error.message);
  }
  const ok = response.status >= 200 && response.status < 300;
  await logDelivery(deps, full, {
    ok,
    status: String(response.status),
    body: response.body.toString('utf8').slice(0, LOGGED_RESPONSE_CHARS),
    error: null,
    seconds: seconds(),
  });
  if (!ok) throw new DeliveryFailed(`${record.url} answered ${response.status}`);
  return response.status;
}

/** A hook's own UUID, the same in every delivery (derived from the instance and the hook id). */
function webhookUuid(deps: Deps, hook: WebHook): string {
  const hex = createHash('sha256').update(`${deps.config.baseUrl}\0web_hook\0${hook.id}`).digest('hex');
  // Shaped as a version 8 (custom) UUID, RFC 9562.
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${((Number.parseInt(hex[16] as string, 16) & 3) | 8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** GitLab's webhook headers for one delivery. */
export function webhookHeaders(
  deps: Deps,
  hook: WebHook,
  trigger: HookTrigger,
  ids: { eventId: string; idempotencyKey: string },
): Record<string, string> {
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': `GitLab/${GITLAB_COMPATIBLE_VERSION}`,
    'X-Gitlab-Event': HOOK_TRIGGERS[trigger],
    'X-Gitlab-Webhook-UUID': webhookUuid(deps, hook),
    'X-Gitlab-Event-UUID': ids.eventId,
    'X-Gitlab-Instance': deps.config.baseUrl,
    'Idempotency-Key': ids.idempotencyKey,
  };
  if (hook.sealed_token) headers['X-Gitlab-Token'] = openWith(deps, hook.sealed_token);
  return headers;
}

/** Delivers one payload to one webhook (the webhook delivery job); a deleted hook is skipped. */
export async function deliverWebhook(
  deps: Deps,
  job: { hookId: number; trigger: HookTrigger; eventId: string; idempotencyKey: string; data: unknown },
  attempt: number,
  maxAttempts: number,
): Promise<void> {
  const hook = await deps.db.selectFrom('web_hooks').selectAll().where('id', '=', job.hookId).executeTakeFirst();
  if (!hook) return;
  const headers = webhookHeaders(deps, hook, job.trigger, job);
  await sendLogged(
    deps,
    {
      projectId: hook.project_id,
      webHookId: hook.id,
      trigger: job.trigger,
      url: hook.url,
      attempt,
      maxAttempts,
      requestData: job.data,
    },
    { headers, body: JSON.stringify(job.data), verifyTls: hook.enable_ssl_verification },
  );
}

/** How long the delivery log keeps a try (GitLab prunes web hook logs after 90 days). */
export const DELIVERY_LOG_RETENTION_DAYS = 90;
const PRUNE_BATCH_ROWS = 1000;

/** Deletes delivery log rows older than the retention, in batches. Returns how many went. */
export async function pruneDeliveryLog(deps: Deps, signal?: AbortSignal): Promise<number> {
  const before = new Date(deps.clock.now().getTime() - DELIVERY_LOG_RETENTION_DAYS * 24 * 60 * 60 * 1000);
  let deleted = 0;
  for (;;) {
    if (signal?.aborted) return deleted;
    const batch = deps.db
      .selectFrom('hook_deliveries')
      .select('id')
      .where('created_at', '<', before)
      .limit(PRUNE_BATCH_ROWS);
    const result = await deps.db.deleteFrom('hook_deliveries').where('id', 'in', batch).executeTakeFirst();
    const count = Number(result.numDeletedRows);
    deleted += count;
    if (count < PRUNE_BATCH_ROWS) return deleted;
  }
}
