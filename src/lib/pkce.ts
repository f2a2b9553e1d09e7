import { createHash } from 'node:crypto';

/** RFC 7636 §4.1: 43 to 128 characters from the unreserved set. */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
/** An S256 challenge is base64url (no padding) of a 32-byte digest: exactly 43 characters. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export const isValidCodeVerifier = (verifier: string) => VERIFIER.test(verifier);

export const isValidS256Challenge = (challenge: string) => S256_CHALLENGE.test(challenge);

/** BASE64URL-ENCODE(SHA256(ASCII(code_verifier))), RFC 7636 §4.2. */
export function s256CodeChallenge(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}
