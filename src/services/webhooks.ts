import type { Kysely } from 'kysely';
import { RE2JS } from 're2js';
import type { DB, Project, User, WebHook } from '../db/schema.js';
import { unprocessable, validationError } from '../http/errors.js';
import { enqueueJob } from '../jobs/queue.js';
import { checkOutboundUrl, OutboundError } from '../lib/outbound/index.js';
import { instanceKey, openSecret, sealSecret } from '../lib/secret-box.js';
import type { Deps } from './deps.js';
import type { PushChange } from './hook-payloads.js';
import { outboundOptions } from './outbound.js';

/**
 * Project webhooks (GitLab's ProjectHook) and the one entry point every module uses to tell
 * webhooks and integrations that something happened: `queueProjectHooks`.
 */

/** Every event flag a project hook has, GitLab's names; `push_events` alone defaults to on. */
export const HOOK_EVENT_FLAGS = [
  'push_events',
  'tag_push_events',
  'merge_requests_events',
  'issues_events',
  'confidential_issues_events',
  'note_events',
  'confidential_note_events',
  'job_events',
  'pipeline_events',
  'wiki_page_events',
  'deployment_events',
  'feature_flag_events',
  'releases_events',
  'milestone_events',
  'emoji_events',
  'resource_access_token_events',
  'resource_deploy_token_events',
  'vulnerability_events',
  'repository_update_events',
] as const;
export type HookEventFlag = (typeof HOOK_EVENT_FLAGS)[number];

/** The triggers Depot raises, with the `X-Gitlab-Event` header GitLab sends for each. */
export const HOOK_TRIGGERS = {
  push_events: 'Push Hook',
  tag_push_events: 'Tag Push Hook',
  merge_requests_events: 'Merge Request Hook',
  pipeline_events: 'Pipeline Hook',
  job_events: 'Job Hook',
  issues_events: 'Issue Hook',
  note_events: 'Note Hook',
  deployment_events: 'Deployment Hook',
  releases_events: 'Release Hook',
  wiki_page_events: 'Wiki Page Hook',
} as const satisfies Partial<Record<HookEventFlag, string>>;
export type HookTrigger = keyof typeof HOOK_TRIGGERS;

/** The name the delivery log gives each trigger, GitLab's hook names (`push_hooks`). */
export const HOOK_LOG_NAMES: Record<HookTrigger, string> = {
  push_events: 'push_hooks',
  tag_push_events: 'tag_push_hooks',
  merge_requests_events: 'merge_request_hooks',
  pipeline_events: 'pipeline_hooks',
  job_events: 'job_hooks',
  issues_events: 'issue_hooks',
  note_events: 'note_hooks',
  deployment_events: 'deployment_hooks',
  releases_events: 'release_hooks',
  wiki_page_events: 'wiki_page_hooks',
};

/** The trigger a delivery log row names, or undefined for a name Depot does not know. */
export function triggerOfLogName(name: string): HookTrigger | undefined {
  return (Object.keys(HOOK_LOG_NAMES) as HookTrigger[]).find((t) => HOOK_LOG_NAMES[t] === name);
}

export const BRANCH_FILTER_STRATEGIES = ['wildcard', 'regex', 'all_branches'] as const;
export type BranchFilterStrategy = (typeof BRANCH_FILTER_STRATEGIES)[number];

/** GitLab's `project_hooks` plan limit: hooks one project may have. */
export const MAX_PROJECT_HOOKS = 100;

/** GitLab's `push_event_hooks_limit` default: a push changing more refs of one kind runs no hooks. */
export const PUSH_EVENT_HOOKS_LIMIT = 3;

export const PROJECT_HOOKS_JOB = 'project_hooks';
export const PUSH_HOOKS_JOB = 'project_push_hooks';

type Executor = Kysely<DB>;

export interface HookInput {
  url?: string | undefined;
  name?: string | undefined;
  description?: string | undefined;
  token?: string | undefined;
  enable_ssl_verification?: boolean | undefined;
  push_events_branch_filter?: string | undefined;
  branch_filter_strategy?: BranchFilterStrategy | undefined;
  events: Partial<Record<HookEventFlag, boolean | undefined>>;
}

const key = (deps: Deps) => instanceKey(deps.config.storageDir, deps.config.secretKey);

/** Seals a secret with the instance key. */
export function sealWith(deps: Deps, plain: string): string {
  return sealSecret(key(deps), plain);
}

/** Opens a sealed secret. */
export function openWith(deps: Deps, sealed: string): string {
  return openSecret(key(deps), sealed);
}

/**
 * Refuses a URL the outbound guard would refuse now (GitLab validates hook URLs on save):
 * 422 `Invalid url given`, GitLab's answer for any bad URL.
 */
export async function checkHookUrl(deps: Deps, url: string): Promise<void> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw unprocessable('Invalid url given');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw unprocessable('Invalid url given');
  try {
    await checkOutboundUrl(parsed.href, await outboundOptions(deps, 'web_hooks_and_services'));
  } catch (error) {
    if (error instanceof OutboundError) throw unprocessable('Invalid url given');
    throw error;
  }
}

function checkBranchFilter(strategy: BranchFilterStrategy, filter: string | null | undefined): void {
  if (strategy !== 'regex' || !filter) return;
  try {
    RE2JS.compile(filter);
  } catch {
    throw unprocessable('Invalid branch filter given');
  }
}

export function listHooks(deps: Deps, projectId: number): Promise<WebHook[]> {
  return deps.db.selectFrom('web_hooks').selectAll().where('project_id', '=', projectId).orderBy('id').execute();
}

export function findHook(deps: Deps, projectId: number, hookId: number): Promise<WebHook | undefined> {
  return deps.db
    .selectFrom('web_hooks')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('id', '=', hookId)
    .executeTakeFirst();
}

const definedFlags = (events: HookInput['events']) =>
  Object.fromEntries(Object.entries(events).filter(([, v]) => v !== undefined)) as Record<string, boolean>;

/** Adds a hook after checking its URL and branch filter. */
export async function createHook(deps: Deps, project: Project, input: HookInput & { url: string }): Promise<WebHook> {
  await checkHookUrl(deps, input.url);
  const { count } = await deps.db
    .selectFrom('web_hooks')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('project_id', '=', project.id)
    .executeTakeFirstOrThrow();
  if (Number(count) >= MAX_PROJECT_HOOKS) {
    throw validationError({ base: [`Maximum number of project hooks (${MAX_PROJECT_HOOKS}) exceeded`] });
  }
  const strategy = input.branch_filter_strategy ?? 'wildcard';
  checkBranchFilter(strategy, input.push_events_branch_filter);
  const now = deps.clock.now();
  const events = { push_events: true, ...definedFlags(input.events) };
  return deps.db
    .insertInto('web_hooks')
    .values({
      project_id: project.id,
      url: input.url,
      name: input.name ?? null,
      description: input.description ?? null,
      sealed_token: input.token ? sealWith(deps, input.token) : null,
      events: JSON.stringify(events),
      enable_ssl_verification: input.enable_ssl_verification ?? true,
      push_events_branch_filter: input.push_events_branch_filter ?? null,
      branch_filter_strategy: strategy,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Changes what was given; an omitted token keeps the stored one, an empty one clears it. */
export async function updateHook(deps: Deps, hook: WebHook, input: HookInput): Promise<WebHook> {
  if (input.url !== undefined && input.url !== hook.url) await checkHookUrl(deps, input.url);
  const strategy = input.branch_filter_strategy ?? (hook.branch_filter_strategy as BranchFilterStrategy);
  const filter =
    input.push_events_branch_filter !== undefined ? input.push_events_branch_filter : hook.push_events_branch_filter;
  checkBranchFilter(strategy, filter);
  return deps.db
    .updateTable('web_hooks')
    .set({
      ...(input.url !== undefined ? { url: input.url } : {}),
      ...(input.name !== undefined ? { name: input.name } : {}),
      ...(input.description !== undefined ? { description: input.description } : {}),
      ...(input.token !== undefined ? { sealed_token: input.token ? sealWith(deps, input.token) : null } : {}),
      ...(input.enable_ssl_verification !== undefined
        ? { enable_ssl_verification: input.enable_ssl_verification }
        : {}),
      push_events_branch_filter: filter,
      branch_filter_strategy: strategy,
      events: JSON.stringify({ ...hook.events, ...definedFlags(input.events) }),
      updated_at: deps.clock.now(),
    })
    .where('id', '=', hook.id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deleteHook(deps: Deps, hook: WebHook): Promise<void> {
  await deps.db.deleteFrom('web_hooks').where('id', '=', hook.id).execute();
}

/**
 * GitLab's wildcard filter: `*` matches any run of characters (`/` too), everything else itself.
 * The two-pointer glob match: linear-ish, no backtracking blow-up whatever the pattern.
 */
export function wildcardMatches(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let resume = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] !== '*' && pattern[p] === text[t]) {
      p += 1;
      t += 1;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p;
      resume = t;
      p += 1;
    } else if (star >= 0) {
      p = star + 1;
      resume += 1;
      t = resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p += 1;
  return p === pattern.length;
}

/**
 * GitLab's branch filter: `all_branches` or an empty filter matches all; `wildcard` is a
 * comma list of names or globs; `regex` is an RE2 pattern searched in the name.
 */
export function branchFilterMatches(strategy: string, filter: string | null, branch: string): boolean {
  if (strategy === 'all_branches' || !filter) return true;
  if (strategy === 'regex') {
    try {
      return RE2JS.compile(filter).matcher(branch).find();
    } catch {
      return false;
    }
  }
  return filter
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .some((pattern) => wildcardMatches(pattern, branch));
}

/** Whether the project has anything that listens: a webhook or an active integration. */
export async function hasListeners(db: Executor, projectId: number): Promise<boolean> {
  const hook = await db
    .selectFrom('web_hooks')
    .select('id')
    .where('project_id', '=', projectId)
    .limit(1)
    .executeTakeFirst();
  if (hook) return true;
  const integration = await db
    .selectFrom('integrations')
    .select('id')
    .where('project_id', '=', projectId)
    .where('active', '=', true)
    .limit(1)
    .executeTakeFirst();
  return integration !== undefined;
}

export interface QueueHooksOptions {
  /** The branch the event is about (push, merge request target, pipeline ref): filters apply to it. */
  branch?: string | null;
}

/**
 * Tells the project's webhooks and integrations that `trigger` happened, with GitLab's payload
 * for it (`object_kind` …). Call it inside the transaction of the change: it queues a durable
 * job (nothing when no hook or integration listens), and the deliveries run in the background
 * with retries. Merge requests call it with `merge_requests_events`, pipelines with
 * `pipeline_events`, and so on (HOOK_TRIGGERS).
 */
export async function queueProjectHooks(
  db: Executor,
  projectId: number,
  trigger: HookTrigger,
  payload: Record<string, unknown>,
  options: QueueHooksOptions = {},
): Promise<void> {
  if (!(await hasListeners(db, projectId))) return;
  await enqueueJob(db, PROJECT_HOOKS_JOB, {
    project_id: projectId,
    trigger,
    branch: options.branch ?? null,
    data: payload,
  });
}

/**
 * Queues the push and tag push hooks of a push (GitLab's post-receive): one job that builds the
 * payloads from the repository in the background. As GitLab does, a push that changes more than
 * PUSH_EVENT_HOOKS_LIMIT branches (or tags) runs no hooks for them.
 */
export async function queuePushHooks(db: Executor, project: Project, user: User, changes: PushChange[]): Promise<void> {
  const branches = changes.filter((c) => c.ref.startsWith('refs/heads/'));
  const tags = changes.filter((c) => c.ref.startsWith('refs/tags/'));
  const kept = [
    ...(branches.length <= PUSH_EVENT_HOOKS_LIMIT ? branches : []),
    ...(tags.length <= PUSH_EVENT_HOOKS_LIMIT ? tags : []),
  ];
  if (kept.length === 0 || !(await hasListeners(db, project.id))) return;
  await enqueueJob(db, PUSH_HOOKS_JOB, { project_id: project.id, user_id: user.id, changes: kept });
}
