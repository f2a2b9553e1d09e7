import { randomUUID } from 'node:crypto';
import { findProjectWithNamespace } from '../db/queries/projects.js';
import type { HookDelivery, Project, User, WebHook } from '../db/schema.js';
import { listCommits } from '../git/log.js';
import { headBranch, resolveCommit } from '../git/refs.js';
import { unprocessable } from '../http/errors.js';
import type { Deps } from './deps.js';
import { DeliveryFailed, sendLogged, webhookHeaders } from './hook-delivery.js';
import { buildPushPayload } from './hook-payloads.js';
import type { HookTrigger } from './webhooks.js';

/** Commits of the default branch a test push carries, as GitLab's sample push. */
const SAMPLE_COMMITS = 3;

/** A page of one hook's or integration's delivery log, newest first. */
export function listHookDeliveries(
  deps: Deps,
  owner: { webHookId: number } | { integrationId: number },
  window: { limit: number; offset: number },
): Promise<HookDelivery[]> {
  let query = deps.db.selectFrom('hook_deliveries').selectAll();
  query =
    'webHookId' in owner
      ? query.where('web_hook_id', '=', owner.webHookId)
      : query.where('integration_id', '=', owner.integrationId);
  return query.orderBy('id', 'desc').limit(window.limit).offset(window.offset).execute();
}

/** How many tries one hook's or integration's log holds, up to `cap`. */
export async function countHookDeliveries(
  deps: Deps,
  owner: { webHookId: number } | { integrationId: number },
  cap: number,
): Promise<number> {
  let query = deps.db.selectFrom('hook_deliveries').select('id');
  query =
    'webHookId' in owner
      ? query.where('web_hook_id', '=', owner.webHookId)
      : query.where('integration_id', '=', owner.integrationId);
  const row = await deps.db
    .selectFrom(query.limit(cap).as('page'))
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
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

/**
 * Sends a sample event to a hook now and answers with how it went (GitLab's
 * `POST /projects/:id/hooks/:hook_id/test/:trigger`): a non-2xx answer is a 422.
 */
export async function testHook(
  deps: Deps,
  project: Project,
  user: User,
  hook: WebHook,
  trigger: HookTrigger,
): Promise<void> {
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
      { headers, body: JSON.stringify(data) },
    );
  } catch (error) {
    if (error instanceof DeliveryFailed) throw unprocessable(`Hook execution failed: ${error.message}`);
    throw error;
  }
}
