import type { ApiRouter } from '../http/route.js';

/** Routes for branches (lib/api/branches.rb). */
export function registerBranchRoutes(_api: ApiRouter): void {}
