import { isoTime } from '../lib/clock.js';
import type { ApplicationSettings } from '../services/application-settings.js';
import { DEPRECATED_NAMES, SETTINGS } from '../services/settings-catalog.js';

/**
 * GitLab's ApplicationSetting entity: every attribute but the secrets GitLab leaves out, each
 * also under the spec's neutral name where it has one, and the deprecated names GitLab still
 * answers with their successors' values.
 */
export function presentApplicationSettings(settings: ApplicationSettings) {
  const values = settings.values;
  const body: Record<string, unknown> = {
    id: 1,
    created_at: isoTime(settings.createdAt),
    updated_at: isoTime(settings.updatedAt),
  };
  for (const def of SETTINGS) {
    if (def.hidden) continue;
    body[def.name] = values[def.name];
    if (def.alias) body[def.alias] = values[def.name];
  }
  for (const [old, successor] of Object.entries(DEPRECATED_NAMES)) body[old] = values[successor];
  const weighted = values.repository_storages_weighted as Record<string, number>;
  body.repository_storages = Object.keys(weighted).filter((name) => (weighted[name] ?? 0) > 0);
  return body;
}
