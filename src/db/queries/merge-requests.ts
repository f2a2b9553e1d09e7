import { type Insertable, sql, type Updateable } from 'kysely';
import type { Db } from '../database.js';
import type { MergeRequest, MergeRequestState, MergeRequestsTable } from '../schema.js';
import { countUpTo } from './count.js';

/** A merge request of a project by its iid. */
export function findMergeRequestByIid(db: Db, projectId: number, iid: number): Promise<MergeRequest | undefined> {
  return db
    .selectFrom('merge_requests')
    .selectAll()
    .where('target_project_id', '=', projectId)
    .where('iid', '=', iid)
    .executeTakeFirst();
}

/**
 * Inserts a merge request with the next iid of its target project. The advisory lock serialises
 * iid allocation per project for the length of the caller's transaction.
 */
export async function insertMergeRequest(
  db: Db,
  row: Omit<Insertable<MergeRequestsTable>, 'iid'>,
): Promise<MergeRequest> {
  await sql`SELECT pg_advisory_xact_lock(hashtext('merge_request_iid'), ${row.target_project_id}::int)`.execute(db);
  const next = await db
    .selectFrom('merge_requests')
    .select(sql<number>`coalesce(max(iid), 0) + 1`.as('iid'))
    .where('target_project_id', '=', row.target_project_id)
    .executeTakeFirstOrThrow();
  return db
    .insertInto('merge_requests')
    .values({ ...row, iid: Number(next.iid) })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function updateMergeRequest(
  db: Db,
  id: number,
  changes: Updateable<MergeRequestsTable>,
): Promise<MergeRequest | undefined> {
  return db.updateTable('merge_requests').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

/** The open merge request from a source branch into a target branch, if any. */
export function findOpenMergeRequest(
  db: Db,
  projectId: number,
  sourceBranch: string,
  targetBranch: string,
): Promise<MergeRequest | undefined> {
  return db
    .selectFrom('merge_requests')
    .selectAll()
    .where('target_project_id', '=', projectId)
    .where('source_project_id', '=', projectId)
    .where('source_branch', '=', sourceBranch)
    .where('target_branch', '=', targetBranch)
    .where('state', '=', 'opened')
    .executeTakeFirst();
}

/** Open merge requests whose source is one of `branches` of the project. */
export function openMergeRequestsFrom(db: Db, projectId: number, branches: string[]): Promise<MergeRequest[]> {
  if (branches.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('merge_requests')
    .selectAll()
    .where('source_project_id', '=', projectId)
    .where('source_branch', 'in', branches)
    .where('state', '=', 'opened')
    .orderBy('id')
    .execute();
}

/** Open merge requests into `branches` of the project get their mergeability checked again. */
export async function markTargetsUnchecked(db: Db, projectId: number, branches: string[]): Promise<void> {
  if (branches.length === 0) return;
  await db
    .updateTable('merge_requests')
    .set({ merge_status: 'unchecked' })
    .where('target_project_id', '=', projectId)
    .where('target_branch', 'in', branches)
    .where('state', '=', 'opened')
    .execute();
}

export interface MergeRequestFilter {
  projectId: number;
  state?: MergeRequestState | 'all' | undefined;
  authorId?: number | undefined;
  assigneeId?: number | undefined;
  reviewerId?: number | undefined;
  sourceBranch?: string | undefined;
  targetBranch?: string | undefined;
  search?: string | undefined;
  iids?: number[] | undefined;
  orderBy: 'created_at' | 'updated_at' | 'title' | 'merged_at';
  sort: 'asc' | 'desc';
}

function filtered(db: Db, f: MergeRequestFilter) {
  let q = db.selectFrom('merge_requests').where('target_project_id', '=', f.projectId);
  if (f.state && f.state !== 'all') q = q.where('state', '=', f.state);
  if (f.authorId !== undefined) q = q.where('author_id', '=', f.authorId);
  if (f.assigneeId !== undefined) q = q.where(sql<boolean>`${f.assigneeId} = ANY(assignee_ids)`);
  if (f.reviewerId !== undefined) q = q.where(sql<boolean>`${f.reviewerId} = ANY(reviewer_ids)`);
  if (f.sourceBranch !== undefined) q = q.where('source_branch', '=', f.sourceBranch);
  if (f.targetBranch !== undefined) q = q.where('target_branch', '=', f.targetBranch);
  if (f.iids && f.iids.length > 0) q = q.where('iid', 'in', f.iids);
  if (f.search) {
    const pattern = `%${f.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    q = q.where((eb) => eb.or([eb('title', 'ilike', pattern), eb('description', 'ilike', pattern)]));
  }
  return q;
}

export function listMergeRequests(
  db: Db,
  f: MergeRequestFilter,
  window: { limit: number; offset: number },
): Promise<MergeRequest[]> {
  return filtered(db, f)
    .selectAll()
    .orderBy(f.orderBy, (ob) => (f.sort === 'asc' ? ob.asc().nullsFirst() : ob.desc().nullsLast()))
    .orderBy('id', f.sort)
    .limit(window.limit)
    .offset(window.offset)
    .execute();
}

export async function countMergeRequests(db: Db, f: MergeRequestFilter, cap: number): Promise<number> {
  return countUpTo(db, filtered(db, f).select('id'), cap);
}

/** Merged merge requests of a project whose merge or squash commit is one of `shas`. */
export function mergeRequestsByMergeCommits(db: Db, projectId: number, shas: string[]): Promise<MergeRequest[]> {
  if (shas.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('merge_requests')
    .selectAll()
    .where('target_project_id', '=', projectId)
    .where('state', '=', 'merged')
    .where((eb) =>
      eb.or([eb('merge_commit_sha', 'in', shas), eb('sha', 'in', shas), eb('squash_commit_sha', 'in', shas)]),
    )
    .execute();
}

/** Records the commits a merge request brought (once, when it is merged). */
export async function insertMergeRequestCommits(
  db: Db,
  mr: Pick<MergeRequest, 'id' | 'target_project_id'>,
  shas: string[],
): Promise<void> {
  const BATCH = 1000;
  for (let i = 0; i < shas.length; i += BATCH) {
    await db
      .insertInto('merge_request_commits')
      .values(
        shas.slice(i, i + BATCH).map((sha) => ({ merge_request_id: mr.id, project_id: mr.target_project_id, sha })),
      )
      .onConflict((oc) => oc.doNothing())
      .execute();
  }
}

/**
 * GitLab's MergeRequests::OldestPerCommitFinder: for each commit, the merged merge request whose
 * merge, squash or head commit it is, else the oldest merged merge request that brought it.
 */
export async function oldestMergedMergeRequestPerCommit(
  db: Db,
  projectId: number,
  shas: string[],
): Promise<Map<string, MergeRequest>> {
  const found = new Map<string, MergeRequest>();
  if (shas.length === 0) return found;
  const direct = await mergeRequestsByMergeCommits(db, projectId, shas);
  for (const mr of direct.sort((a, b) => a.id - b.id)) {
    for (const sha of [mr.merge_commit_sha, mr.squash_commit_sha, mr.sha]) {
      if (sha && shas.includes(sha) && !found.has(sha)) found.set(sha, mr);
    }
  }
  const rest = shas.filter((sha) => !found.has(sha));
  if (rest.length === 0) return found;
  const rows = await db
    .selectFrom('merge_request_commits as c')
    .innerJoin('merge_requests as m', 'm.id', 'c.merge_request_id')
    .selectAll('m')
    .select('c.sha as commit_sha')
    .where('c.project_id', '=', projectId)
    .where('c.sha', 'in', rest)
    .where('m.state', '=', 'merged')
    .orderBy('m.id')
    .execute();
  for (const row of rows) {
    const { commit_sha, ...mr } = row;
    if (!found.has(commit_sha)) found.set(commit_sha, mr as MergeRequest);
  }
  return found;
}

/** Which of the users authored a merged merge request into the branch. */
export async function mergedMergeRequestAuthorIds(
  db: Db,
  projectId: number,
  branch: string,
  userIds: number[],
): Promise<Set<number>> {
  if (userIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('merge_requests')
    .select('author_id')
    .distinct()
    .where('target_project_id', '=', projectId)
    .where('target_branch', '=', branch)
    .where('state', '=', 'merged')
    .where('author_id', 'in', userIds)
    .execute();
  return new Set(rows.flatMap((r) => (r.author_id === null ? [] : [r.author_id])));
}
