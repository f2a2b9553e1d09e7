import type { ApiRouter } from '../http/route.js';

/** Routes for compare, contributors and merge base (lib/api/repositories.rb). */
export function registerCompareRoutes(_api: ApiRouter): void {}
