import type { Namespace, Project } from './schema.js';

export interface ProjectWithNamespace {
  readonly project: Project;
  readonly namespace: Namespace;
}

/** The map key of a lookup: ids and paths (case-insensitive, as GitLab finds them) apart. */
const nameOf = (key: { id: number } | { fullPath: string }) =>
  'id' in key ? `#${key.id}` : key.fullPath.toLowerCase();

/** Entries kept at most; the least recently used go first. */
const MAX_ENTRIES = 10_000;

/**
 * Project rows with their namespace, kept in process for the embedded database, where every
 * query runs on the server's event loop (the lookup that starts each project request cost 1.2 ms
 * of it). Complete by construction: a trigger notifies `depot_row_change` after every statement
 * that changes `projects` or `namespaces` (migration 0008), and each notice empties the cache.
 *
 * PGlite runs one session and delivers the notice before the writer's query resolves, so a
 * writer's next read sees its write. A reader whose query ran before a change but finishes after
 * it could store the old row: `generation` tells, and that result is returned but not kept.
 * Entries are frozen, so no caller can change the shared copy.
 */
export class ProjectCache {
  private generation = 0;
  private readonly byKey = new Map<string, ProjectWithNamespace>();

  /** Forgets everything (a row changed). */
  invalidate(): void {
    this.generation += 1;
    this.byKey.clear();
  }

  /** The cached entry for `key`, or what `load` finds (kept unless a change came in between). */
  async lookup(
    key: { id: number } | { fullPath: string },
    load: () => Promise<ProjectWithNamespace | undefined>,
  ): Promise<ProjectWithNamespace | undefined> {
    const name = nameOf(key);
    const cached = this.byKey.get(name);
    if (cached) {
      // Re-inserted, so the map's order is least recently used first.
      this.byKey.delete(name);
      this.byKey.set(name, cached);
      return cached;
    }
    const generation = this.generation;
    const found = await load();
    if (!found || generation !== this.generation) return found;
    const entry = { project: freeze(found.project), namespace: freeze(found.namespace) };
    this.byKey.set(nameOf({ id: entry.project.id }), entry);
    this.byKey.set(nameOf({ fullPath: entry.project.full_path }), entry);
    while (this.byKey.size > MAX_ENTRIES) this.byKey.delete(this.byKey.keys().next().value as string);
    return entry;
  }
}

function freeze<T extends object>(row: T): T {
  for (const value of Object.values(row)) if (value !== null && typeof value === 'object') Object.freeze(value);
  return Object.freeze(row);
}
