import { randomUUID } from 'node:crypto';
import { countUpTo } from '../db/queries/count.js';
import { findProjectWithNamespace } from '../db/queries/projects.js';
import type { HookDelivery, Project, User, WebHook } from '../db/schema.js';
import { listCommits } from '../git/log.js';
import { headBranch, resolveCommit } from '../git/refs.js';
import { unprocessable } from '../http/errors.js';
import type { Deps } from './deps.js';
import { DeliveryFailed, sendLogged, webhookHeaders } from './hook-delivery.js';
import { buildPushPayload } from './hook-payloads.js';
import { type HookTrigger, triggerOfLogName } from './webhooks.js';

/** Commits of the default branch a test push carries, as GitLab's sample push. */
const SAMPLE_COMMITS = 3;

/** How far back the events API looks, as GitLab's (older tries stay until the daily pruning). */
export const HOOK_EVENTS_WINDOW_DAYS = 7;

/** GitLab's `status` filter of the events API: a status code, or a class of them. */
export const HOOK_EVENT_STATUS_CLASSES = ['successful', 'client_failure', 'server_failure'] as const;

export interface DeliveryFilter {
  owner: { webHookId: number } | { integrationId: number };
  /** Codes (`200`) or classes (`successful`, `client_failure`, `server_failure`); empty: all. */
  status?: string[] | undefined;
  since?: Date | undefined;
}

function filtered(deps: Deps, filter: DeliveryFilter) {
  let query = deps.db.selectFrom('hook_deliveries');
  query =
    'webHookId' in filter.owner
      ? query.where('web_hook_id', '=', filter.owner.webHookId)
      : query.where('integration_id', '=', filter.owner.integrationId);
  if (filter.since) query = query.where('created_at', '>=', filter.since);
  const status = filter.status ?? [];
  if (status.length > 0) {
    query = query.where((eb) =>
      eb.or(
        status.map((s) => {
          if (s === 'successful') return eb('response_status', 'like', '2%');
          if (s === 'client_failure') return eb('response_status', 'like', '4%');
          if (s === 'server_failure') {
            return eb.or([eb('response_status', 'like', '5%'), eb('response_status', '=', 'internal error')]);
          }
          return eb('response_status', '=', s);
        }),
      ),
    );
  }
  return query;
}

/** A page of one hook's or integration's delivery log, newest first. */
export function listHookDeliveries(
  deps: Deps,
  filter: DeliveryFilter,
  window: { limit: number; offset: number },
): Promise<HookDelivery[]> {
  return filtered(deps, filter).selectAll().orderBy('id', 'desc').limit(window.limit).offset(window.offset).execute();
}

/** How many tries match, up to `cap`. */
export async function countHookDeliveries(deps: Deps, filter: DeliveryFilter, cap: number): Promise<number> {
  return countUpTo(deps.db, filtered(deps, filter).select('id'), cap);
}

/**
 * Sends a logged delivery again, now, to the hook as it is (GitLab's resend): its status code,
 * or 422 when the receiver did not answer 2xx. The new try is logged too.
 */
export async function resendDelivery(deps: Deps, hook: WebHook, delivery: HookDelivery): Promise<number> {
  const trigger = triggerOfLogName(delivery.trigger);
  if (!trigger) throw unprocessable('This event cannot be resent');
  const headers = webhookHeaders(deps, hook, trigger, { eventId: randomUUID(), idempotencyKey: randomUUID() });
  try {
    return await sendLogged(
      deps,
      {
        projectId: hook.project_id,
        webHookId: hook.id,
        trigger,
        url: hook.url,
        attempt: 1,
        maxAttempts: 1,
        requestData: delivery.request_data,
      },
      { headers, body: JSON.stringify(delivery.request_data), verifyTls: hook.enable_ssl_verification },
    );
  } catch (error) {
    if (error instanceof DeliveryFailed) throw unprocessable(`Hook execution failed: ${error.message}`);
    throw error;
  }
}

/**
 * A sample push built from the default branch's newest commits (GitLab's TestHooks service).
 * 422 when the repository has no commit.
 */
export async function samplePushPayload(deps: Deps, project: Project, user: User): Promise<Record<string, unknown>> {
  const found = await findProjectWithNamespace(deps.db, { id: project.id });
  if (!found) throw unprocessable('Ensure the project has at least one commit.');
  const gitDir = deps.storages.repositoryPath(project.repository_storage, project.id);
  const branch = project.default_branch ?? (await headBranch(gitDir)) ?? 'main';
  const tip = await resolveCommit(gitDir, `refs/heads/${branch}`);
  if (!tip) throw unprocessable('Ensure the project has at least one commit.');
  const recent = await listCommits(gitDir, { include: [tip.id], maxCount: SAMPLE_COMMITS });
  const oldest = recent[recent.length - 1] ?? tip;
  return buildPushPayload(deps.config.baseUrl, found.project, found.namespace, user, gitDir, {
    ref: `refs/heads/${branch}`,
    before: oldest.id,
    after: tip.id,
  });
}

/** The triggers GitLab's hook test takes; Depot has sample data for pushes and tag pushes. */
export const TEST_TRIGGERS = [
  'push_events',
  'tag_push_events',
  'note_events',
  'issues_events',
  'confidential_issues_events',
  'merge_requests_events',
  'job_events',
  'pipeline_events',
  'wiki_page_events',
  'releases_events',
  'emoji_events',
  'resource_access_token_events',
] as const;
export type TestTrigger = (typeof TEST_TRIGGERS)[number];

/** GitLab's answer when a project has nothing to build a sample of. */
const NO_SAMPLE: Partial<Record<TestTrigger, string>> = {
  note_events: 'Ensure the project has notes.',
  issues_events: 'Ensure the project has issues.',
  confidential_issues_events: 'Ensure the project has issues.',
  merge_requests_events: 'Ensure the project has merge requests.',
  job_events: 'Ensure the project has CI jobs.',
  pipeline_events: 'Ensure the project has CI pipelines.',
  wiki_page_events: 'Ensure the wiki is enabled and has pages.',
  releases_events: 'Ensure the project has releases.',
  emoji_events: 'Ensure the project has notes.',
  resource_access_token_events: 'Ensure the project has access tokens.',
};

/**
 * Sends a sample event to a hook now and answers with how it went (GitLab's
 * `POST /projects/:id/hooks/:hook_id/test/:trigger`): a non-2xx answer is a 422.
 */
export async function testHook(
  deps: Deps,
  project: Project,
  user: User,
  hook: WebHook,
  requested: TestTrigger,
): Promise<void> {
  if (requested !== 'push_events' && requested !== 'tag_push_events') {
    throw unprocessable(NO_SAMPLE[requested] ?? 'Testing not available for this hook');
  }
  const trigger: HookTrigger = requested;
  const data = await samplePushPayload(deps, project, user);
  const headers = webhookHeaders(deps, hook, trigger, { eventId: randomUUID(), idempotencyKey: randomUUID() });
  try {
    await sendLogged(
      deps,
      {
        projectId: project.id,
        webHookId: hook.id,
        trigger,
        url: hook.url,
        attempt: 1,
        maxAttempts: 1,
        requestData: data,
      },
      { headers, body: JSON.stringify(data), verifyTls: hook.enable_ssl_verification },
    );
  } catch (error) {
    if (error instanceof DeliveryFailed) throw unprocessable(`Hook execution failed: ${error.message}`);
    throw error;
  }
}

/** One try of one hook's log, or undefined. */
export function findHookDelivery(deps: Deps, hookId: number, id: number): Promise<HookDelivery | undefined> {
  return deps.db
    .selectFrom('hook_deliveries')
    .selectAll()
    .where('web_hook_id', '=', hookId)
    .where('id', '=', id)
    .executeTakeFirst();
}
