import { insertEvent } from '../db/queries/events.js';
import { updateProject } from '../db/queries/projects.js';
import type { Project, User } from '../db/schema.js';
import { readObject } from '../git/catfile.js';
import { gitText } from '../git/command.js';
import { type Commit, parseCommitObject } from '../git/commit.js';
import type { RefUpdate } from '../git/smart-http.js';
import { readTreeEntry } from '../git/tree.js';
import { enqueueJob } from '../jobs/queue.js';
import { wakeWorkers } from '../jobs/worker.js';
import { ciConfigPath } from './ci/pipelines.js';
import type { Deps } from './deps.js';
import { refreshMergeRequestsForPush } from './merge-request-refresh.js';
import { scheduleRepositoryMaintenance } from './repository-maintenance.js';
import { queuePushHooks } from './webhooks.js';

/** Above this many refs of one kind and action, GitLab records one bulk event with `ref_count`. */
const BULK_PUSH_THRESHOLD = 3;
const TITLE_CHARS = 70;

/** The job kind that makes a pushed ref's pipeline (src/jobs/ci.ts). */
const CREATE_PIPELINE_JOB = 'ci_create_pipeline';

const isZero = (id: string) => /^0+$/.test(id);

type PushAction = 'created' | 'removed' | 'pushed';

function describe(update: RefUpdate): { action: PushAction; refType: 'branch' | 'tag'; name: string } | null {
  const action: PushAction = isZero(update.oldId) ? 'created' : isZero(update.newId) ? 'removed' : 'pushed';
  if (update.ref.startsWith('refs/heads/')) return { action, refType: 'branch', name: update.ref.slice(11) };
  if (update.ref.startsWith('refs/tags/')) return { action, refType: 'tag', name: update.ref.slice(10) };
  return null;
}

/**
 * How many commits a branch update brought, as GitLab's BranchHooksService counts them: a new
 * default branch counts every commit it holds; another new branch the commits the default branch
 * does not reach; an update old..new; a deletion none.
 */
async function newCommits(gitDir: string, update: RefUpdate, tip: Commit | null, defaultRef: string | null) {
  if (isZero(update.newId)) return 0;
  // One commit on top of the old tip (every API commit): no need to ask rev-list.
  if (tip?.parentIds.length === 1 && tip.parentIds[0] === update.oldId) return 1;
  try {
    let exclude: string[] = [];
    if (!isZero(update.oldId)) exclude = [`^${update.oldId}`];
    else if (defaultRef !== null && defaultRef !== update.ref) {
      const base = await gitText({
        gitDir,
        subcommand: 'for-each-ref',
        flags: ['--format=%(objectname)'],
        args: [defaultRef],
      });
      if (base.trim() !== '') exclude = [`^${base.trim()}`];
    }
    const out = await gitText({
      gitDir,
      subcommand: 'rev-list',
      flags: ['--count', '--stdin'],
      input: `${[update.newId, ...exclude].join('\n')}\n`,
    });
    return Number(out.trim()) || 0;
  } catch {
    return 0;
  }
}

/** The commit a ref now points at (an annotated tag peeled), or null (deleted, or no commit). */
async function tipCommit(gitDir: string, id: string): Promise<Commit | null> {
  if (isZero(id)) return null;
  const object = await readObject(gitDir, `${id}^{commit}`).catch(() => null);
  return object?.type === 'commit' ? parseCommitObject(object.oid, object.data) : null;
}

/**
 * GitLab's PushEventPayloadService#commit_title: the first line of the newest pushed commit,
 * stripped, cut to 70 characters with Ruby's `truncate` (67 and "...").
 */
export function pushCommitTitle(message: string): string {
  const newline = message.indexOf('\n');
  const line = (newline >= 0 ? message.slice(0, newline + 1) : message).trim();
  const chars = Array.from(line);
  return chars.length > TITLE_CHARS ? `${chars.slice(0, TITLE_CHARS - 3).join('')}...` : line;
}

/**
 * The `push_data` of a new branch whose every commit is new (a repository's first branch, as
 * `initialize_with_readme` makes it): for callers that create the branch inside their own
 * transaction.
 */
export function firstBranchPushData(branch: string, commitId: string, commitCount: number, message: string) {
  return JSON.stringify({
    commit_count: commitCount,
    action: 'created',
    ref_type: 'branch',
    commit_from: null,
    commit_to: commitId,
    ref: branch,
    commit_title: pushCommitTitle(message),
    ref_count: null,
  });
}

/** Records GitLab's `pushed` events for the refs a push changed (one per ref, or bulk). */
async function recordPushEvents(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  updates: RefUpdate[],
): Promise<void> {
  const groups = new Map<
    string,
    { update: RefUpdate; action: PushAction; refType: 'branch' | 'tag'; name: string }[]
  >();
  for (const update of updates) {
    const d = describe(update);
    if (!d) continue;
    const key = `${d.refType}:${d.action}`;
    groups.set(key, [...(groups.get(key) ?? []), { update, ...d }]);
  }
  const now = deps.clock.now();
  const defaultRef = project.default_branch ? `refs/heads/${project.default_branch}` : null;
  const base = { action: 'pushed', author_id: user.id, project_id: project.id, created_at: now };
  for (const items of groups.values()) {
    if (items.length > BULK_PUSH_THRESHOLD) {
      const first = items[0] as (typeof items)[number];
      await insertEvent(deps.db, {
        ...base,
        push_data: JSON.stringify({
          commit_count: 0,
          action: first.action,
          ref_type: first.refType,
          commit_from: null,
          commit_to: null,
          ref: null,
          commit_title: null,
          ref_count: items.length,
        }),
      });
      continue;
    }
    for (const item of items) {
      const { update } = item;
      const tip = await tipCommit(gitDir, update.newId);
      // A tag push carries the one commit the tag points at (GitLab's TagHooksService).
      const count =
        item.refType === 'branch' ? await newCommits(gitDir, update, tip, defaultRef) : tip === null ? 0 : 1;
      await insertEvent(deps.db, {
        ...base,
        push_data: JSON.stringify({
          commit_count: count,
          action: item.action,
          ref_type: item.refType,
          commit_from: isZero(update.oldId) ? null : update.oldId,
          commit_to: isZero(update.newId) ? null : update.newId,
          ref: item.name,
          // The newest of the pushed commits: none pushed (a branch made at an existing commit,
          // a deletion) leaves it null.
          commit_title: count > 0 && tip ? pushCommitTitle(tip.message) : null,
          ref_count: null,
        }),
      });
    }
  }
}

/**
 * What GitLab's post-receive does for every ref change, whether from `git push` or from an API
 * write (GitLab writes those through Gitaly with the same hooks): `pushed` events, the push
 * hooks of webhooks and integrations and the jobs that make the pushed refs' pipelines (queued in
 * one transaction), the project's last activity, merge requests from and into the pushed
 * branches, and upkeep of its repository.
 */
export async function recordRefChanges(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  updates: RefUpdate[],
): Promise<void> {
  await recordRefChangesWith(deps, project, user, gitDir, updates, async () => undefined);
}

/**
 * recordRefChanges with the caller's own database change (`change`, given the transaction) in
 * the same transaction as the events, hooks and pipeline jobs: a merge records its merge request
 * as merged and the push to the target branch at once, so a crash leaves both or neither.
 */
export async function recordRefChangesWith<T>(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  updates: RefUpdate[],
  change: (trx: Deps['db']) => Promise<T>,
): Promise<T> {
  // Read before the transaction: it holds one connection and uses no other.
  const pipelines = updates.length > 0 ? await pushPipelineJobs(deps, project, user, gitDir, updates) : [];
  const result = await deps.db.transaction().execute(async (trx) => {
    const own = await change(trx);
    if (updates.length === 0) return own;
    const inTransaction = { ...deps, db: trx };
    await recordPushEvents(inTransaction, project, user, gitDir, updates);
    await queuePushHooks(
      trx,
      project,
      user,
      updates.map((u) => ({ ref: u.ref, before: u.oldId, after: u.newId })),
    );
    for (const payload of pipelines) await enqueueJob(trx, CREATE_PIPELINE_JOB, payload);
    return own;
  });
  if (updates.length === 0) return result;
  // The pipeline should exist within moments of the push, not at the next poll.
  if (pipelines.length > 0) wakeWorkers();
  await updateProject(deps.db, project.id, { last_activity_at: deps.clock.now() });
  await refreshMergeRequestsForPush(deps, project, gitDir, updates);
  // Deleting refs adds no commits to the graph.
  if (updates.some((u) => !isZero(u.newId))) await scheduleRepositoryMaintenance(deps, project.id);
  return result;
}

/**
 * The payloads of the durable jobs, one per pushed branch or tag (not deletions), that make
 * their pipelines from the CI file: the push itself does no CI work.
 */
async function pushPipelineJobs(
  deps: Deps,
  project: Project,
  user: User,
  gitDir: string,
  updates: RefUpdate[],
): Promise<Record<string, unknown>[]> {
  const configPath = await ciConfigPath(deps, project);
  const payloads: Record<string, unknown>[] = [];
  for (const update of updates) {
    if (isZero(update.newId) || !describe(update)) continue;
    // No CI file at the new commit, no pipeline (and no job to find that out).
    const entry = await readTreeEntry(gitDir, update.newId, configPath).catch(() => null);
    if (entry?.type !== 'blob') continue;
    payloads.push({
      project_id: project.id,
      user_id: user.id,
      ref: update.ref,
      before: update.oldId,
      after: update.newId,
    });
  }
  return payloads;
}
