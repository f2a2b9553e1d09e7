import { describe, expect, it } from 'vitest';
import { digestToken, generateToken, hashPassword, safeEqual, verifyPassword } from '../../src/lib/crypto.js';
import { isExpired } from '../../src/services/auth.js';

describe('tokens and passwords', () => {
  it('generates prefixed tokens with at least 128 bits of entropy', () => {
    const a = generateToken('glpat-');
    const b = generateToken('glpat-');
    expect(a).toMatch(/^glpat-[A-Za-z0-9_-]{27,}$/);
    expect(a).not.toBe(b);
    expect(Buffer.from(a.slice(6), 'base64url').length * 8).toBeGreaterThanOrEqual(128);
  });

  it('stores tokens as SHA-256 digests', () => {
    expect(digestToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('compares in constant time and handles different lengths', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
    expect(safeEqual('abc', 'abcd')).toBe(false);
  });

  it('hashes passwords with scrypt and verifies them', async () => {
    const stored = await hashPassword('correct horse');
    expect(stored.startsWith('scrypt$')).toBe(true);
    expect(stored).not.toContain('correct horse');
    expect(await verifyPassword('correct horse', stored)).toBe(true);
    expect(await verifyPassword('wrong horse', stored)).toBe(false);
    expect(await verifyPassword('x', null)).toBe(false);
    expect(await verifyPassword('x', 'garbage')).toBe(false);
  });

  it('expires a token at 00:00 UTC of its expiry date', () => {
    expect(isExpired('2026-05-02', '2026-05-01')).toBe(false);
    expect(isExpired('2026-05-02', '2026-05-02')).toBe(true);
    expect(isExpired(null, '2099-01-01')).toBe(false);
  });
});
