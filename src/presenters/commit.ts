import type { Project } from '../db/schema.js';
import { type Commit, formatGitTime, fullTitle, parseTrailers } from '../git/commit.js';
import type { PresentContext } from './user.js';

export interface CommitPresentOptions {
  /** Fill `trailers`/`extended_trailers` (GitLab does only when the list asks `trailers=true`). */
  trailers?: boolean;
}

/** `<base>/<full path>/-/commit/<sha>`. */
export function commitWebUrl(pc: PresentContext, project: Pick<Project, 'full_path'>, sha: string): string {
  return `${pc.baseUrl}/${project.full_path}/-/commit/${sha}`;
}

/** GitLab's `Entities::Commit`, field for field and in its order. */
export function presentCommit(
  commit: Commit,
  project: Pick<Project, 'full_path'>,
  pc: PresentContext,
  options: CommitPresentOptions = {},
) {
  const trailers: Record<string, string> = {};
  const extended: Record<string, string[]> = {};
  if (options.trailers) {
    for (const [key, value] of parseTrailers(commit.message)) {
      trailers[key] = value;
      extended[key] = [...(extended[key] ?? []), value];
    }
  }
  const committedDate = formatGitTime(commit.committer);
  return {
    id: commit.id,
    short_id: commit.id.slice(0, 8),
    created_at: committedDate,
    parent_ids: commit.parentIds,
    title: commit.message.trim() === '' ? 'No commit message' : fullTitle(commit.message),
    message: commit.message,
    author_name: commit.author.name,
    author_email: commit.author.email,
    authored_date: formatGitTime(commit.author),
    committer_name: commit.committer.name,
    committer_email: commit.committer.email,
    committed_date: committedDate,
    trailers,
    extended_trailers: extended,
    web_url: commitWebUrl(pc, project, commit.id),
  };
}

export type PresentedCommit = ReturnType<typeof presentCommit>;

export interface CommitStats {
  additions: number;
  deletions: number;
  total: number;
}

/** GitLab's CommitDetail: the commit, `stats` when asked, and no pipeline (Depot runs none). */
export function presentCommitDetail(
  commit: Commit,
  project: Pick<Project, 'full_path' | 'id'>,
  pc: PresentContext,
  stats?: CommitStats,
) {
  return {
    ...presentCommit(commit, project, pc),
    ...(stats ? { stats } : {}),
    status: null,
    project_id: project.id,
    last_pipeline: null,
  };
}
