import { describe, expect, it } from 'vitest';
import { ownBytes, ownString } from '../../src/lib/own.js';

describe('copies for long-lived caches', () => {
  it('copies a string exactly, lone surrogates and NUL included', () => {
    const listing = `main ${'a'.repeat(40)} 1\nside ${'b'.repeat(40)} 2\u{d800}\0`;
    for (const cut of [listing.slice(5, 45), listing.slice(48), listing.split('\n')[1] as string]) {
      expect(ownString(cut)).toBe(cut);
    }
  });

  it('gives a slice of the shared pool a buffer of its own and leaves an owned buffer as it is', () => {
    const pooled = Buffer.from('a small object');
    expect(pooled.buffer.byteLength).toBeGreaterThan(pooled.length); // a slice of the 8 KiB pool
    const owned = ownBytes(pooled);
    expect(owned.equals(pooled)).toBe(true);
    expect(owned.byteOffset).toBe(0);
    expect(owned.buffer.byteLength).toBe(pooled.length);
    expect(ownBytes(owned)).toBe(owned);
  });
});
