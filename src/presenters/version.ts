import { DEPOT_VERSION, GITLAB_COMPATIBLE_VERSION } from '../version.js';

/** GitLab's Version/Metadata entity; `revision` carries Depot's own version. */
export function presentVersion() {
  return {
    version: GITLAB_COMPATIBLE_VERSION,
    revision: `depot-${DEPOT_VERSION}`,
    kas: { enabled: false, externalUrl: null, externalK8sProxyUrl: null, version: null },
    enterprise: false,
  };
}
