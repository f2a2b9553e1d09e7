import type { Project } from '../db/schema.js';
import type { Commit } from '../git/commit.js';
import type { Tag } from '../git/refs.js';
import { presentCommit } from './commit.js';
import type { PresentContext } from './user.js';

/**
 * GitLab's Tag entity: `target` is the tag object for annotated tags, `created_at` its tagger
 * date. Gitaly trims the message's trailing newlines (splitRawTag), so `git tag -m x` reads `x`.
 */
export function presentTag(tag: Tag, commit: Commit | null, project: Pick<Project, 'full_path'>, pc: PresentContext) {
  return {
    name: tag.name,
    message: (tag.message ?? '').replace(/\n+$/, ''),
    target: tag.target,
    commit: commit ? presentCommit(commit, project, pc) : null,
    release: null,
    protected: false,
    created_at: tag.tagger ? new Date(tag.tagger.time * 1000).toISOString() : null,
  };
}
