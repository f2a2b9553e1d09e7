import type { ApiRouter } from '../http/route.js';

/** Routes for repository files (lib/api/files.rb). */
export function registerFileRoutes(_api: ApiRouter): void {}
