import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { LookupCache, LookupKind } from '../db/lookup-cache.js';
import type { Clock } from '../lib/clock.js';
import { utcDate } from '../lib/clock.js';
import type { Storages } from '../storage/storages.js';

/** What services need from the outside world; built once in main.ts (or by the test harness). */
export interface Deps {
  config: Config;
  db: Db;
  clock: Clock;
  logger: Logger;
  storages: Storages;
  /** Tokens, users, projects, namespaces and access levels kept in process (src/db/lookup-cache.ts). */
  lookups?: LookupCache | undefined;
}

/**
 * Rows by id through the lookup cache (`#<id>` keys, shared with single lookups), the misses in
 * one batched query.
 */
export async function cachedRowsById<T extends { id: number }>(
  deps: Pick<Deps, 'lookups'>,
  kind: LookupKind,
  ids: readonly number[],
  load: (ids: number[]) => Promise<T[]>,
): Promise<Map<number, T>> {
  const loadMissing = async (keys: string[]) =>
    new Map((await load(keys.map((key) => Number(key.slice(1))))).map((row) => [`#${row.id}`, row] as const));
  const keys = ids.map((id) => `#${id}`);
  const found = deps.lookups
    ? await deps.lookups.lookupMany(kind, keys, loadMissing)
    : await loadMissing([...new Set(keys)]);
  return new Map([...found.values()].map((row) => [row.id, row]));
}

/** `load()`, through the in-process lookup cache when there is one. */
export function cachedLookup<T>(
  deps: Pick<Deps, 'lookups'>,
  kind: LookupKind,
  key: string,
  load: () => Promise<T | undefined>,
): Promise<T | undefined> {
  return deps.lookups ? deps.lookups.lookup(kind, key, load) : load();
}

/** Today's date in UTC by the injected clock. */
export const today = (deps: Pick<Deps, 'clock'>) => utcDate(deps.clock.now());
