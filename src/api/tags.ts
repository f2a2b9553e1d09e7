import type { ApiRouter } from '../http/route.js';

/** Routes for tags (lib/api/tags.rb). */
export function registerTagRoutes(_api: ApiRouter): void {}
