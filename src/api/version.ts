import type { ApiRouter } from '../http/route.js';
import { presentVersion } from '../presenters/version.js';

export function registerVersionRoutes(api: ApiRouter): void {
  api.get(
    '/version',
    { summary: 'Version of the service', auth: 'required', scopes: [{ scope: 'read_user', readOnly: true }] },
    (ctx) => {
      ctx.body = presentVersion();
    },
  );
  api.get(
    '/metadata',
    { summary: 'Instance metadata', auth: 'required', scopes: [{ scope: 'read_user', readOnly: true }] },
    (ctx) => {
      ctx.body = presentVersion();
    },
  );
}
