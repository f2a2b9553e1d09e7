/**
 * The changelog acceptance vectors (docs/changelog-vectors.json, restated from GitLab's specs),
 * typed loosely: each test file picks the kinds it covers and checks every vector of them.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface Vector {
  name: string;
  kind: string;
  source: string;
  provenance: string;
  input: any;
  expected: any;
  notes?: string;
}

const file = path.join(import.meta.dirname, 'changelog-vectors.json');
const all: { vectors: Vector[] } = JSON.parse(fs.readFileSync(file, 'utf8'));

export const VECTORS = all.vectors;

/** Every vector of the given kinds; throws if there is none, so a renamed kind cannot pass silently. */
export function vectorsOf(...kinds: string[]): Vector[] {
  const found = VECTORS.filter((v) => kinds.includes(v.kind));
  if (found.length === 0) throw new Error(`no vectors of kind ${kinds.join(', ')}`);
  return found;
}
