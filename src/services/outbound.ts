import { type OutboundOptions, type OutboundPurpose, outboundOptionsFromSettings } from '../lib/outbound/index.js';
import { getApplicationSettings } from './application-settings.js';
import type { Deps } from './deps.js';

/**
 * The outbound guard's options as the application settings say now, for one purpose: what every
 * module passes to `outboundRequest`. Depot's own BASE_URL stays reachable although local, as
 * GitLab allows its own host. Read per request: a settings change takes effect at once.
 */
export async function outboundOptions(
  deps: Deps,
  purpose: OutboundPurpose,
  overrides: Partial<OutboundOptions> = {},
): Promise<OutboundOptions> {
  const { values } = await getApplicationSettings(deps);
  return outboundOptionsFromSettings(values, purpose, { internalUrls: [deps.config.baseUrl], ...overrides });
}
