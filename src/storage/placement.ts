import type { Db } from '../db/database.js';
import type { Storages } from './storages.js';

export const STORAGE_WEIGHTS_SETTING = 'repository_storages_weighted';

/** Storage weights from the application settings: `{ name: weight }`; default is all on `default`. */
export async function storageWeights(db: Db, storages: Storages): Promise<Record<string, number>> {
  const row = await db
    .selectFrom('application_settings')
    .select('value')
    .where('key', '=', STORAGE_WEIGHTS_SETTING)
    .executeTakeFirst();
  return weightsFrom(row?.value, storages);
}

/** Every configured storage with its stored weight; nothing stored means all on `default`. */
export function weightsFrom(stored: unknown, storages: Pick<Storages, 'names'>): Record<string, number> {
  const given = (stored ?? null) as Record<string, number> | null;
  const weights: Record<string, number> = {};
  for (const name of storages.names()) weights[name] = given ? (given[name] ?? 0) : name === 'default' ? 100 : 0;
  return weights;
}

/**
 * Picks a storage for a new repository with probability proportional to its weight, as GitLab
 * does. Falls back to `default` when every weight is zero. `random` is injectable for tests.
 */
export async function pickStorage(db: Db, storages: Storages, random = Math.random): Promise<string> {
  const weights = await storageWeights(db, storages);
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
