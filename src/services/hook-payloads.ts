import type { Namespace, Project, User } from '../db/schema.js';
import { readObject } from '../git/catfile.js';
import { changedPaths } from '../git/changed-paths.js';
import { gitText } from '../git/command.js';
import { type Commit, commitTitle, parseCommitObject } from '../git/commit.js';
import { countCommits, listCommits } from '../git/log.js';
import { avatarUrl } from '../presenters/user.js';
import { VISIBILITY_LEVELS } from './settings-catalog.js';

/** GitLab sends at most this many commits in a push payload (the newest ones). */
export const PUSH_PAYLOAD_MAX_COMMITS = 20;

export const ZERO_SHA = '0000000000000000000000000000000000000000';
const isZero = (id: string) => /^0+$/.test(id);

/** One ref change of a push, as the hooks see it. */
export interface PushChange {
  ref: string;
  before: string;
  after: string;
}

/** GitLab's `Project#hook_attrs`: the `project` object of every hook payload. */
export function projectHookAttrs(baseUrl: string, project: Project, namespace: Namespace) {
  const webUrl = `${baseUrl}/${project.full_path}`;
  const host = new URL(baseUrl).hostname;
  const ssh = `git@${host}:${project.full_path}.git`;
  const http = `${webUrl}.git`;
  return {
    id: project.id,
    name: project.name,
    description: project.description,
    web_url: webUrl,
    avatar_url: null,
    git_ssh_url: ssh,
    git_http_url: http,
    namespace: namespace.name,
    visibility_level: VISIBILITY_LEVELS[project.visibility],
    path_with_namespace: project.full_path,
    default_branch: project.default_branch,
    ci_config_path: null,
    homepage: webUrl,
    url: ssh,
    ssh_url: ssh,
    http_url: http,
  };
}

/** GitLab's `User#hook_attrs`: the `user` object of merge request, pipeline and other payloads. */
export function userHookAttrs(user: User) {
  return {
    id: user.id,
    name: user.name,
    username: user.username,
    avatar_url: avatarUrl(user.email),
    email: user.public_email || '[REDACTED]',
  };
}

/** Ruby's `Time#xmlschema` in the commit's own offset: `2013-05-13T18:18:08+02:00`. */
export function xmlSchemaTime(seconds: number, tzMinutes: number): string {
  const local = new Date((seconds + tzMinutes * 60) * 1000).toISOString().slice(0, 19);
  const sign = tzMinutes < 0 ? '-' : '+';
  const abs = Math.abs(tzMinutes);
  const offset = `${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
  return `${local}${sign}${offset}`;
}

/** GitLab's `Commit#hook_attrs` with the changed files. */
async function commitHookAttrs(gitDir: string, webUrl: string, commit: Commit) {
  const changes = await changedPaths(gitDir, commit.id, commit.parentIds[0]);
  return {
    id: commit.id,
    message: commit.message,
    title: commitTitle(commit.message),
    timestamp: xmlSchemaTime(commit.committer.time, commit.committer.tzMinutes),
    url: `${webUrl}/-/commit/${commit.id}`,
    author: { name: commit.author.name, email: commit.author.email },
    added: changes.added,
    modified: changes.modified,
    removed: changes.removed,
  };
}

/** The commit a tag or branch tip names, peeling annotated tags; null when gone or not a commit. */
async function peelToCommit(gitDir: string, id: string): Promise<Commit | null> {
  if (isZero(id)) return null;
  let current = id;
  for (let depth = 0; depth < 10; depth++) {
    const object = await readObject(gitDir, current).catch(() => null);
    if (!object) return null;
    if (object.type === 'commit') return parseCommitObject(current, object.data);
    if (object.type !== 'tag') return null;
    const target = /^object ([0-9a-f]{40,64})$/m.exec(object.data.toString('utf8'));
    if (!target?.[1]) return null;
    current = target[1];
  }
  return null;
}

/** The annotated tag's message, or null for a lightweight tag. */
async function tagMessage(gitDir: string, id: string): Promise<string | null> {
  const object = await readObject(gitDir, id).catch(() => null);
  if (object?.type !== 'tag') return null;
  const text = object.data.toString('utf8');
  const blank = text.indexOf('\n\n');
  return blank < 0 ? '' : text.slice(blank + 2).replace(/-----BEGIN PGP SIGNATURE-----[\s\S]*$/, '');
}

/**
 * What the pushed range excludes, as GitLab's BranchHooksService chooses the commits: the old tip
 * for an update; for a new branch the default branch (a new default branch excludes nothing).
 */
async function excludedTips(gitDir: string, change: PushChange, defaultBranch: string | null): Promise<string[]> {
  if (!isZero(change.before)) return [change.before];
  const defaultRef = defaultBranch ? `refs/heads/${defaultBranch}` : null;
  if (defaultRef === null || defaultRef === change.ref) return [];
  const tip = (
    await gitText({ gitDir, subcommand: 'for-each-ref', flags: ['--format=%(objectname)'], args: [defaultRef] })
  ).trim();
  return /^[0-9a-f]{40,64}$/.test(tip) ? [tip] : [];
}

/**
 * GitLab's push payload (Gitlab::DataBuilder::Push) for one ref change: `push` for branches,
 * `tag_push` for tags; the newest 20 commits oldest first, the total count beside them.
 */
export async function buildPushPayload(
  baseUrl: string,
  project: Project,
  namespace: Namespace,
  user: User,
  gitDir: string,
  change: PushChange,
  options: { refProtected?: boolean } = {},
): Promise<Record<string, unknown>> {
  const isTag = change.ref.startsWith('refs/tags/');
  const webUrl = `${baseUrl}/${project.full_path}`;
  let commits: Commit[] = [];
  let total = 0;
  let checkoutSha: string | null = null;
  let message: string | null = null;
  if (isTag) {
    const target = await peelToCommit(gitDir, change.after);
    commits = target ? [target] : [];
    total = commits.length;
    checkoutSha = target?.id ?? null;
    if (!isZero(change.after)) message = await tagMessage(gitDir, change.after);
  } else if (!isZero(change.after)) {
    checkoutSha = change.after;
    const exclude = await excludedTips(gitDir, change, project.default_branch);
    commits = await listCommits(gitDir, {
      include: [change.after],
      exclude,
      maxCount: PUSH_PAYLOAD_MAX_COMMITS,
      reverse: true,
    });
    total =
      commits.length < PUSH_PAYLOAD_MAX_COMMITS
        ? commits.length
        : await countCommits(gitDir, { include: [change.after], exclude });
  }
  const projectAttrs = projectHookAttrs(baseUrl, project, namespace);
  const kind = isTag ? 'tag_push' : 'push';
  const commitAttrs = [];
  for (const commit of commits) commitAttrs.push(await commitHookAttrs(gitDir, webUrl, commit));
  return {
    object_kind: kind,
    event_name: kind,
    before: change.before,
    after: change.after,
    ref: change.ref,
    ref_protected: options.refProtected ?? false,
    checkout_sha: checkoutSha,
    message,
    user_id: user.id,
    user_name: user.name,
    user_username: user.username,
    // GitLab's User#webhook_email: the public address, or [REDACTED].
    user_email: user.public_email || '[REDACTED]',
    user_avatar: avatarUrl(user.email),
    project_id: project.id,
    project: projectAttrs,
    commits: commitAttrs,
    total_commits_count: total,
    push_options: {},
    repository: {
      name: projectAttrs.name,
      url: projectAttrs.url,
      description: projectAttrs.description,
      homepage: projectAttrs.homepage,
      git_http_url: projectAttrs.git_http_url,
      git_ssh_url: projectAttrs.git_ssh_url,
      visibility_level: projectAttrs.visibility_level,
    },
  };
}
