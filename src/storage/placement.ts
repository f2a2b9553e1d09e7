import { getApplicationSettings } from '../services/application-settings.js';
import type { Deps } from '../services/deps.js';

/**
 * Storage weights from the application settings (read through the per-process settings cache):
 * `{ name: weight }` for every configured storage; by default everything goes to `default`.
 */
export async function storageWeights(deps: Deps): Promise<Record<string, number>> {
  return (await getApplicationSettings(deps)).values.repository_storages_weighted as Record<string, number>;
}

/**
 * Picks a storage for a new repository with probability proportional to its weight, as GitLab
 * does. Falls back to `default` when every weight is zero. `random` is injectable for tests.
 */
export async function pickStorage(deps: Deps, random = Math.random): Promise<string> {
  const weights = await storageWeights(deps);
  const entries = Object.entries(weights).filter(([, w]) => w > 0);
  const total = entries.reduce((sum, [, w]) => sum + w, 0);
  if (total === 0) return 'default';
  let point = random() * total;
  for (const [name, weight] of entries) {
    point -= weight;
    if (point < 0) return name;
  }
  return (entries[entries.length - 1] as [string, number])[0];
}
