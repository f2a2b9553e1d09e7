import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { instanceKey, openSecret, SECRET_KEY_FILE, sealSecret } from '../../src/lib/secret-box.js';

describe('the instance secret box', () => {
  it('generates the key once into STORAGE_DIR with mode 0600 and reads it back', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'depot-key-'));
    try {
      const key = instanceKey(dir);
      expect(key).toHaveLength(32);
      const file = path.join(dir, SECRET_KEY_FILE);
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(fs.readFileSync(file, 'utf8').trim()).toBe(key.toString('hex'));
      expect(instanceKey(dir).equals(key)).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('seals with a fresh IV each time and opens only with the right key, unaltered', () => {
    const key = instanceKey('/nonexistent', 'a'.repeat(64));
    const one = sealSecret(key, 'hunter2');
    const two = sealSecret(key, 'hunter2');
    expect(one).not.toBe(two);
    expect(one).not.toContain('hunter2');
    expect(openSecret(key, one)).toBe('hunter2');
    expect(() => openSecret(instanceKey('/nonexistent', 'b'.repeat(64)), one)).toThrow();
    const parts = one.split('.');
    parts[3] = Buffer.from('tampered').toString('base64url');
    expect(() => openSecret(key, parts.join('.'))).toThrow();
  });

  it('takes DEPOT_SECRET_KEY as 64 hex digits or base64 of 32 bytes, and refuses anything else', () => {
    expect(loadConfig({ DEPOT_SECRET_KEY: 'f'.repeat(64) }).secretKey).toBe('f'.repeat(64));
    const base64 = Buffer.alloc(32, 7).toString('base64');
    expect(instanceKey('/nonexistent', base64)).toEqual(Buffer.alloc(32, 7));
    expect(() => loadConfig({ DEPOT_SECRET_KEY: 'short' })).toThrow(ConfigError);
    expect(loadConfig({}).secretKey).toBeUndefined();
  });
});
