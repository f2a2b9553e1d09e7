/**
 * What every authenticated request looks up (its token, the token's user, the project and its
 * namespace, the caller's access level), kept in process so that a request that changes nothing
 * asks the database nothing.
 *
 * Complete by construction: a trigger notifies `depot_row_change` (payload: the table) after
 * every statement that changes a table behind these lookups (migrations 0008, 0009, 0012), and every
 * process LISTENs (src/db/row-change-listener.ts): a change made by any writer reaches every
 * process within milliseconds. The process that made it forgets at once, when its own statement
 * or transaction commits (src/db/database.ts), before the notice arrives.
 *
 * A reader whose query ran before a change but finishes after it could store the old row:
 * `generation` tells, and that result is returned but not kept. While the listener is down the
 * cache stores nothing (a notice could be missed), and it is emptied when it is back.
 * Entries are frozen, so no caller can change the shared copy.
 */

/** The kinds of lookup, each with the tables whose changes make its entries stale. */
export const LOOKUP_TABLES = {
  personalAccessToken: ['personal_access_tokens'],
  oauthAccessToken: ['oauth_access_tokens'],
  user: ['users'],
  project: ['projects', 'namespaces'],
  namespace: ['namespaces'],
  projectLevel: ['members', 'projects', 'namespaces'],
  memberships: ['members'],
  groupLevel: ['members', 'namespaces'],
  applicationSettings: ['application_settings'],
  planLimits: ['plan_limits'],
  /** Whether any CI job waits for a runner: idle runner polls then skip the claim (issue 19). */
  ciPendingBuilds: ['ci_builds'],
} as const satisfies Record<string, readonly string[]>;

export type LookupKind = keyof typeof LOOKUP_TABLES;

/** Every table whose changes are announced on `depot_row_change`. */
export const WATCHED_TABLES: readonly string[] = [...new Set(Object.values(LOOKUP_TABLES).flat())];

/** Entries kept per kind at most; the least recently used go first. */
const MAX_ENTRIES = 10_000;

class Shelf {
  generation = 0;
  readonly entries = new Map<string, unknown>();
}

export class LookupCache {
  private readonly shelves = new Map<LookupKind, Shelf>();
  private readonly byTable = new Map<string, Shelf[]>();
  /** False while notices may be missed (the listener is down): nothing is stored. */
  private live = true;
  hits = 0;
  misses = 0;

  constructor() {
    for (const [kind, tables] of Object.entries(LOOKUP_TABLES) as [LookupKind, readonly string[]][]) {
      const shelf = new Shelf();
      this.shelves.set(kind, shelf);
      for (const table of tables) this.byTable.set(table, [...(this.byTable.get(table) ?? []), shelf]);
    }
  }

  /** Forgets what depends on `table` (or everything, for `*` or a table it does not know). */
  invalidate(table = '*'): void {
    for (const shelf of this.byTable.get(table) ?? this.shelves.values()) {
      shelf.generation += 1;
      shelf.entries.clear();
    }
  }

  /** Notices can be missed (false) or are flowing again (true); either way, forget everything. */
  setLive(live: boolean): void {
    this.live = live;
    this.invalidate();
  }

  /**
   * The cached value for `key`, or what `load` finds; kept unless a change came in between.
   * `undefined` (not found) is never kept: unknown tokens must not fill the memory.
   */
  async lookup<T>(kind: LookupKind, key: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    const shelf = this.shelves.get(kind) as Shelf;
    const cached = shelf.entries.get(key);
    if (cached !== undefined) {
      this.hits += 1;
      // Re-inserted, so the map's order is least recently used first.
      shelf.entries.delete(key);
      shelf.entries.set(key, cached);
      return cached as T;
    }
    this.misses += 1;
    const generation = shelf.generation;
    const found = await load();
    if (found === undefined || !this.live || generation !== shelf.generation) return found;
    return this.store(shelf, key, found);
  }

  /**
   * Like `lookup` for several keys: the cached ones, and the others from one `loadMissing` call
   * (a batched query) that answers those it finds.
   */
  async lookupMany<T>(
    kind: LookupKind,
    keys: readonly string[],
    loadMissing: (keys: string[]) => Promise<Map<string, T>>,
  ): Promise<Map<string, T>> {
    const shelf = this.shelves.get(kind) as Shelf;
    const found = new Map<string, T>();
    const missing: string[] = [];
    for (const key of new Set(keys)) {
      const cached = shelf.entries.get(key);
      if (cached === undefined) missing.push(key);
      else found.set(key, cached as T);
    }
    this.hits += found.size;
    this.misses += missing.length;
    if (missing.length === 0) return found;
    const generation = shelf.generation;
    const loaded = await loadMissing(missing);
    const keep = this.live && generation === shelf.generation;
    for (const [key, value] of loaded) found.set(key, keep ? this.store(shelf, key, value) : value);
    return found;
  }

  private store<T>(shelf: Shelf, key: string, found: T): T {
    const value = deepFreeze(found);
    shelf.entries.set(key, value);
    if (shelf.entries.size > MAX_ENTRIES) shelf.entries.delete(shelf.entries.keys().next().value as string);
    return value;
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/**
 * The watched tables a statement writes (INSERT INTO, UPDATE, DELETE FROM, TRUNCATE), read
 * off its SQL as Kysely and our raw queries write it. Conservative: a name after one of those
 * words counts, even where it is not the statement's target.
 */
export function writtenTables(sqlText: string): string[] {
  const found: string[] = [];
  for (const match of sqlText.matchAll(
    /\b(?:insert\s+into|update|delete\s+from|truncate(?:\s+table)?)\s+"?(\w+)"?/gi,
  )) {
    const table = (match[1] as string).toLowerCase();
    if (WATCHED_TABLES.includes(table) && !found.includes(table)) found.push(table);
  }
  return found;
}
