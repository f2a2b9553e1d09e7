import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Secrets Depot must read again (settings secrets, integration tokens, Pages keys) are sealed
 * with AES-256-GCM under one instance key: DEPOT_SECRET_KEY when given, else a random key
 * generated once into STORAGE_DIR/secret_key (mode 0600) and shared by every server process.
 * Tokens and passwords are not sealed: they stay hashed.
 */

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = 'v1';
export const SECRET_KEY_FILE = 'secret_key';

export class SecretKeyError extends Error {}

/** A key from its text form: 64 hex digits or 32 bytes of base64. */
export function parseSecretKey(text: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-f]{64}$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
  if (key.length !== KEY_BYTES) throw new SecretKeyError('the secret key must be 32 bytes, as 64 hex digits or base64');
  return key;
}

const keysByDir = new Map<string, Buffer>();

/**
 * The instance key: `given` (DEPOT_SECRET_KEY) or STORAGE_DIR/secret_key, created with mode 0600
 * on first use. Two processes creating it at once agree: the second reads the first's file.
 */
export function instanceKey(storageDir: string, given?: string): Buffer {
  if (given) return parseSecretKey(given);
  const known = keysByDir.get(storageDir);
  if (known) return known;
  const file = path.join(storageDir, SECRET_KEY_FILE);
  let key: Buffer;
  try {
    key = parseSecretKey(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    fs.mkdirSync(storageDir, { recursive: true });
    try {
      fs.writeFileSync(file, `${randomBytes(KEY_BYTES).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (written) {
      if ((written as NodeJS.ErrnoException).code !== 'EEXIST') throw written;
    }
    key = parseSecretKey(fs.readFileSync(file, 'utf8'));
  }
  keysByDir.set(storageDir, key);
  return key;
}

/** `v1.<iv>.<tag>.<ciphertext>` in base64url; a fresh IV each time. */
export function sealSecret(key: Buffer, plain: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return [VERSION, iv, cipher.getAuthTag(), data]
    .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
    .join('.');
}

/** The clear text of `sealSecret`'s output; throws when the key is wrong or the text altered. */
export function openSecret(key: Buffer, sealed: string): string {
  const [version, iv, tag, data] = sealed.split('.');
  if (version !== VERSION || iv === undefined || tag === undefined || data === undefined) {
    throw new SecretKeyError('not a sealed secret');
  }
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  const tagBytes = Buffer.from(tag, 'base64url');
  if (tagBytes.length !== TAG_BYTES) throw new SecretKeyError('not a sealed secret');
  decipher.setAuthTag(tagBytes);
  return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
}
