import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { isValidStorageName } from '../git/validate.js';

/**
 * The named storage roots and the on-disk layout inside them (DESIGN.md "Repositories on
 * disk"): `<root>/@hashed/<h[0:2]>/<h[2:4]>/<h>.git` with h = SHA-256 of the project id.
 */
export class Storages {
  /** Repository paths already built (one SHA-256 and a join each; every repository request asks). */
  private readonly paths = new Map<string, string>();

  constructor(private readonly roots: Record<string, string>) {
    for (const name of Object.keys(roots)) {
      if (!isValidStorageName(name)) throw new Error(`invalid storage name: ${name}`);
    }
  }

  names(): string[] {
    return Object.keys(this.roots);
  }

  has(name: string): boolean {
    return Object.hasOwn(this.roots, name);
  }

  /** The absolute root directory of a storage; throws for an unknown name. */
  root(name: string): string {
    if (!this.has(name)) throw new Error(`unknown storage: ${name}`);
    return this.roots[name] as string;
  }

  /** `@hashed/ab/cd/<hash>` for a project id, relative to the storage root, without `.git`. */
  static hashedPath(projectId: number): string {
    const hash = createHash('sha256').update(String(projectId)).digest('hex');
    return path.join('@hashed', hash.slice(0, 2), hash.slice(2, 4), hash);
  }

  /** Absolute path of a project's bare repository on a storage. */
  repositoryPath(storage: string, projectId: number): string {
    const key = `${storage}/${projectId}`;
    let found = this.paths.get(key);
    if (found === undefined) {
      found = path.join(this.root(storage), `${Storages.hashedPath(projectId)}.git`);
      if (this.paths.size >= 100_000) this.paths.clear();
      this.paths.set(key, found);
    }
    return found;
  }

  /** Absolute path of an LFS object on a storage. */
  lfsObjectPath(storage: string, oid: string): string {
    if (!/^[0-9a-f]{64}$/.test(oid)) throw new Error('invalid LFS oid');
    return path.join(this.root(storage), '@lfs', oid.slice(0, 2), oid.slice(2, 4), oid);
  }

  /** Creates every root directory that does not exist yet. */
  ensureRoots(): void {
    for (const root of Object.values(this.roots)) fs.mkdirSync(root, { recursive: true });
  }
}
