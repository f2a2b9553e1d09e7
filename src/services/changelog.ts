/**
 * Changelog generation (app/services/repositories/changelog_service.rb): reads the config at the
 * default branch, finds the range, turns trailer-carrying commits into a release section, and
 * either returns it or commits it into the changelog file with a compare-and-swap retry.
 */

import {
  type ChangelogCommit,
  ChangelogCommitSelector,
  changelogTitle,
  MAX_CHANGELOG_COMMITS,
} from '../changelog/commits.js';
import { type ChangelogConfig, parseChangelogConfig } from '../changelog/config.js';
import { ChangelogError } from '../changelog/errors.js';
import { insertRelease } from '../changelog/generator.js';
import { type Release, type ReleaseEntry, releaseHeaderPattern } from '../changelog/release.js';
import { findPreviousTag } from '../changelog/tags.js';
import { projectMemberIds } from '../db/queries/access.js';
import { directMemberUserIds } from '../db/queries/members.js';
import { mergedMergeRequestAuthorIds, oldestMergedMergeRequestPerCommit } from '../db/queries/merge-requests.js';
import { findNamespaceByFullPath } from '../db/queries/namespaces.js';
import { findUsersByEmails } from '../db/queries/users.js';
import type { Namespace, Project, User } from '../db/schema.js';
import { readObject } from '../git/catfile.js';
import { streamCommits } from '../git/log.js';
import { listTags, resolveCommitId, type Tag } from '../git/refs.js';
import { readBranchTip } from '../git/repo-info.js';
import { isValidRepoPath } from '../git/validate.js';
import { ApiError } from '../http/errors.js';
import type { ZonedTime } from '../lib/strftime.js';
import { loadGroupPolicy } from '../policies/abilities.js';
import { commitWebUrl } from '../presenters/commit.js';
import { type Deps, today } from './deps.js';
import { assertWritable, createCommit } from './repository-commits.js';

/** How often the read-insert-commit cycle runs before giving up (GitLab's Retriable default). */
export const CHANGELOG_COMMIT_TRIES = 3;

const INVALID_RANGE = 'Invalid or not found commit value in the given range';
const NO_PREVIOUS_TAG = 'The commit start range is unspecified, and no previous tag could be found to use instead';

export interface ChangelogRequest {
  version: string;
  /** Excluded start of the range; default: the previous release tag. */
  from?: string | undefined;
  /** Included end of the range; default: `branch` (POST) or the default branch (GET). */
  to?: string | undefined;
  /** Default: now, in UTC. */
  date?: ZonedTime | undefined;
  trailer: string;
  configFile: string;
  /** Where the config file is read; default: the project's default branch. */
  configFileRef?: string | undefined;
}

export interface CommitChangelogRequest extends ChangelogRequest {
  branch: string;
  file: string;
  /** Default: `Add changelog for version <version>`, with the version as sent. */
  message?: string | undefined;
}

/** The project and repository a changelog is made for, and who asks. */
export interface ChangelogSubject {
  project: Project;
  namespace: Namespace;
  gitDir: string;
  user: User | null;
}

/** GitLab's `default_branch_or_main`. */
export const defaultBranchOf = (project: Project) => project.default_branch ?? 'main';

/** The blob at `ref:path` as text, or null when the ref, the path or the blob is missing. */
async function readFileAt(gitDir: string, commitId: string, path: string): Promise<string | null> {
  if (!isValidRepoPath(path)) return null;
  const object = await readObject(gitDir, `${commitId}:${path}`);
  return object?.type === 'blob' ? object.data.toString('utf8') : null;
}

async function loadConfig(subject: ChangelogSubject, request: ChangelogRequest): Promise<ChangelogConfig> {
  const ref = request.configFileRef ?? defaultBranchOf(subject.project);
  const commitId = await resolveCommitId(subject.gitDir, ref);
  const text = commitId ? await readFileAt(subject.gitDir, commitId, request.configFile) : null;
  return parseChangelogConfig(text, request.configFile);
}

async function startOfRange(request: ChangelogRequest, config: ChangelogConfig, tags: Promise<Tag[]> | null) {
  if (request.from !== undefined || !tags) return request.from as string;
  const tag = findPreviousTag(await tags, request.version, config.tagRegex);
  if (!tag) throw new ChangelogError(NO_PREVIOUS_TAG);
  return tag.commitId ?? tag.target;
}

/**
 * The oldest merged merge request of this project that introduced each commit (by merge,
 * squash or head SHA, else the lowest id among those that brought it).
 */
async function mergeRequestsOf(
  deps: Deps,
  project: Project,
  commitIds: string[],
): Promise<Map<string, { iid: number }>> {
  return oldestMergedMergeRequestPerCommit(deps.db, project.id, commitIds);
}

/** Which of these users authored a merged merge request into the project's default branch. */
async function mergedMergeRequestAuthors(deps: Deps, project: Project, userIds: number[]): Promise<Set<number>> {
  if (!project.default_branch) return new Set();
  return mergedMergeRequestAuthorIds(deps.db, project.id, project.default_branch, userIds);
}

/**
 * GitLab's contributors: authors who are not members of the project (Guest or above, inherited
 * memberships included) and have had a merge request merged into its default branch.
 */
async function contributorIds(deps: Deps, subject: ChangelogSubject, userIds: number[]): Promise<Set<number>> {
  const { project, namespace } = subject;
  const [members, merged] = await Promise.all([
    projectMemberIds(deps.db, userIds, project.id, namespace.traversal_ids, today(deps)),
    mergedMergeRequestAuthors(deps, project, userIds),
  ]);
  return new Set(userIds.filter((id) => !members.has(id) && merged.has(id)));
}

/** Users always credited: direct members of the include_groups the requesting user may read. */
async function alwaysCreditedUserIds(deps: Deps, config: ChangelogConfig, user: User | null): Promise<Set<number>> {
  const ids = new Set<number>();
  for (const path of config.includeGroups) {
    const group = await findNamespaceByFullPath(deps.db, path);
    if (group?.kind !== 'group') continue;
    const policy = await loadGroupPolicy(deps, user, group);
    if (!policy.can('read_group')) continue;
    for (const id of await directMemberUserIds(deps.db, 'group', group.id, today(deps))) ids.add(id);
  }
  return ids;
}

/** Entries for the selected commits: authors by e-mail, credit, references and links. */
async function entriesFor(
  deps: Deps,
  subject: ChangelogSubject,
  config: ChangelogConfig,
  selected: ChangelogCommit[],
): Promise<ReleaseEntry[]> {
  const { project } = subject;
  const users = await findUsersByEmails(
    deps.db,
    selected.map((s) => s.commit.author.email).filter((e) => e !== ''),
  );
  const byEmail = new Map(users.map((u) => [u.email.toLowerCase(), u]));
  const contributors = await contributorIds(
    deps,
    subject,
    users.map((u) => u.id),
  );
  const alwaysCredit = await alwaysCreditedUserIds(deps, config, subject.user);
  const mergeRequests = await mergeRequestsOf(
    deps,
    project,
    selected.map((s) => s.commit.id),
  );
  const pc = { baseUrl: deps.config.baseUrl };
  return selected.map(({ commit, trailers, category }) => {
    const entry: ReleaseEntry = {
      title: changelogTitle(commit.message),
      category,
      commit: {
        reference: `${project.full_path}@${commit.id}`,
        web_url: commitWebUrl(pc, project, commit.id),
        trailers,
      },
    };
    const author = byEmail.get(commit.author.email.toLowerCase());
    if (author) {
      const contributor = contributors.has(author.id);
      entry.author = {
        reference: `@${author.username}`,
        contributor,
        credit: contributor || alwaysCredit.has(author.id),
      };
    }
    const mergeRequest = mergeRequests.get(commit.id);
    if (mergeRequest) {
      entry.merge_request = {
        reference: `${project.full_path}!${mergeRequest.iid}`,
        web_url: `${deps.config.baseUrl}/${project.full_path}/-/merge_requests/${mergeRequest.iid}`,
      };
    }
    return entry;
  });
}

/**
 * The entries of `from..to`, walking it newest first and refusing a range over
 * MAX_CHANGELOG_COMMITS. GitLab counts the range before walking it; counting during the walk
 * gives the same answer (the walk has no effects) with one history traversal instead of two,
 * and git stops one commit past the limit however long the range is.
 */
async function selectInRange(gitDir: string, fromId: string, toId: string, trailer: string) {
  const selector = new ChangelogCommitSelector(trailer);
  const selected: ChangelogCommit[] = [];
  let seen = 0;
  const range = { include: [toId], exclude: [fromId], maxCount: MAX_CHANGELOG_COMMITS + 1 };
  for await (const commit of streamCommits(gitDir, range)) {
    seen += 1;
    if (seen > MAX_CHANGELOG_COMMITS) {
      throw new ChangelogError(`The commits range exceeds ${MAX_CHANGELOG_COMMITS} elements.`);
    }
    const entry = selector.select(commit);
    if (entry) selected.push(entry);
  }
  return selected;
}

/** Config, range and entries: everything but the file (GitLab's order of checks). */
async function buildRelease(
  deps: Deps,
  subject: ChangelogSubject,
  request: ChangelogRequest,
  to: string,
): Promise<Release> {
  // The tags are listed while the config is read: the lookup needs both.
  const tags = request.from === undefined ? listTags(subject.gitDir) : null;
  tags?.catch(() => {});
  const config = await loadConfig(subject, request);
  const from = await startOfRange(request, config, tags);
  const [fromId, toId] = await Promise.all([
    resolveCommitId(subject.gitDir, from),
    resolveCommitId(subject.gitDir, to),
  ]);
  if (!fromId || !toId) throw new ChangelogError(INVALID_RANGE);
  const selected = await selectInRange(subject.gitDir, fromId, toId, request.trailer);
  const now = deps.clock.now();
  return {
    version: request.version,
    date: request.date ?? { epochMs: now.getTime(), offsetMinutes: 0 },
    config,
    entries: await entriesFor(deps, subject, config, selected),
  };
}

/** The section as GET returns it: what would be written into an empty file. */
export async function generateChangelog(
  deps: Deps,
  subject: ChangelogSubject,
  request: ChangelogRequest,
): Promise<string> {
  const release = await buildRelease(deps, subject, request, request.to ?? defaultBranchOf(subject.project));
  return insertRelease('', release);
}

/**
 * Generates the section and commits it into `file` on `branch` as the caller. A version already
 * in the file commits nothing. The file is read with the commit that last touched it, which the
 * commit carries as its lock; a concurrent change makes the whole read-insert-commit cycle run
 * again, up to CHANGELOG_COMMIT_TRIES times, after which the refusal is a ChangelogError.
 * Returns the new commit id, or null when nothing was committed.
 */
export async function commitChangelog(
  deps: Deps,
  subject: ChangelogSubject,
  request: CommitChangelogRequest,
): Promise<string | null> {
  const { project, gitDir, user } = subject;
  if (!user) throw new ChangelogError('A changelog commit needs a user');
  assertWritable(project);
  const release = await buildRelease(deps, subject, request, request.to ?? request.branch);
  const message = request.message ?? `Add changelog for version ${request.version}`;
  let refusal = '';
  for (let attempt = 0; attempt < CHANGELOG_COMMIT_TRIES; attempt++) {
    const tip = await readBranchTip(gitDir, request.branch);
    const existing = tip ? await readFileAt(gitDir, tip, request.file) : null;
    if (existing !== null && releaseHeaderPattern(request.version).test(existing)) return null;
    const content = Buffer.from(insertRelease(existing ?? '', release));
    try {
      // Built on exactly `tip`: a commit that lands in between makes this one a conflict, and
      // the cycle runs again on the new content.
      return await createCommit(deps, project, user, gitDir, {
        branch: request.branch,
        message,
        actions: [{ action: existing === null ? 'create' : 'update', path: request.file, content }],
        expectedTip: tip ?? undefined,
        force: false,
      });
    } catch (error) {
      // The commit machinery answers every refusal (a moved branch, a changed file) with a
      // 400; like GitLab's committer, start over from a fresh read.
      if (!(error instanceof ApiError) || error.status !== 400) throw error;
      refusal = error.message;
    }
  }
  throw new ChangelogError(refusal);
}
