import type { BlameGroup } from '../git/blame.js';
import { formatGitTime } from '../git/commit.js';

/** GitLab's Entities::BlameRange (with BlameRangeCommit), field for field and in its order. */
export function presentBlameRange(group: BlameGroup) {
  const { commit } = group;
  return {
    commit: {
      id: commit.id,
      parent_ids: commit.parentIds,
      message: commit.message,
      authored_date: formatGitTime(commit.author),
      author_name: commit.author.name,
      author_email: commit.author.email,
      committed_date: formatGitTime(commit.committer),
      committer_name: commit.committer.name,
      committer_email: commit.committer.email,
    },
    lines: group.lines,
  };
}
