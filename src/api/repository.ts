import type { ApiRouter } from '../http/route.js';

/** Routes for tree, blobs and raw blobs (lib/api/repositories.rb). */
export function registerRepositoryRoutes(_api: ApiRouter): void {}
