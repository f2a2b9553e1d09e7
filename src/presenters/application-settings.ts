import { isoTime } from '../lib/clock.js';
import type { ApplicationSettings } from '../services/application-settings.js';

/** GitLab's ApplicationSetting entity, for the settings Depot has so far. */
export function presentApplicationSettings(settings: ApplicationSettings) {
  const weighted = settings.repositoryStoragesWeighted;
  return {
    id: 1,
    created_at: isoTime(settings.createdAt),
    updated_at: isoTime(settings.updatedAt),
    repository_storages_weighted: weighted,
    repository_storages: Object.keys(weighted).filter((name) => (weighted[name] ?? 0) > 0),
    oauth_password_grant_enabled: settings.oauthPasswordGrantEnabled,
  };
}
