import type { ApiRouter } from '../http/route.js';

/** Routes for commits and commit diffs (lib/api/commits.rb). */
export function registerCommitRoutes(_api: ApiRouter): void {}
