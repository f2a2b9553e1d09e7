/**
 * Commit signatures read from the raw commit object: which kind (GitLab's `signature_type`) and
 * what can be known without the signer's stored key. Nothing is verified here.
 */

export type SignatureType = 'PGP' | 'SSH' | 'X509';

export interface CommitSignatureInfo {
  type: SignatureType;
  /** The armored signature as stored in the `gpgsig` header. */
  armored: string;
  /** PGP only: the issuer's 64-bit key id (16 upper-case hex digits), when the packet names it. */
  keyId: string | null;
}

/** The `gpgsig` (or `gpgsig-sha256`) header of a raw commit object, unfolded; null when unsigned. */
export function signatureHeader(raw: Buffer): string | null {
  const text = raw.toString('utf8');
  const end = text.indexOf('\n\n');
  const lines = (end >= 0 ? text.slice(0, end) : text).split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const match = /^gpgsig(?:-sha256)? (.*)$/.exec(line);
    if (!match) continue;
    const value = [match[1] as string];
    while (i + 1 < lines.length && (lines[i + 1] as string).startsWith(' '))
      value.push((lines[++i] as string).slice(1));
    return value.join('\n');
  }
  return null;
}

/** Gitaly's detection of the signature kind from the armor's first line. */
function signatureType(armored: string): SignatureType | null {
  const first = armored.trimStart().split('\n', 1)[0]?.trim() ?? '';
  if (first === '-----BEGIN PGP SIGNATURE-----') return 'PGP';
  if (first === '-----BEGIN SSH SIGNATURE-----') return 'SSH';
  if (first === '-----BEGIN SIGNED MESSAGE-----' || first === '-----BEGIN PKCS7-----') return 'X509';
  return null;
}

/** The binary body of an ASCII-armored block (headers and the `=` checksum line left out). */
function dearmor(armored: string): Buffer {
  const lines = armored.split('\n').map((l) => l.trim());
  const begin = lines.findIndex((l) => l.startsWith('-----BEGIN '));
  const end = lines.findIndex((l, i) => i > begin && l.startsWith('-----END '));
  let body = lines.slice(begin + 1, end < 0 ? undefined : end);
  const blank = body.indexOf('');
  // Armor headers (`Version: …`) end at a blank line; without headers there is none.
  if (blank >= 0 && body.slice(0, blank).every((l) => /^[A-Za-z-]+: /.test(l))) body = body.slice(blank + 1);
  return Buffer.from(body.filter((l) => l !== '' && !l.startsWith('=')).join(''), 'base64');
}

/** The body of the first OpenPGP packet if it is a signature packet (tag 2). */
function signaturePacket(data: Buffer): Buffer | null {
  const first = data[0];
  if (first === undefined || (first & 0x80) === 0) return null;
  let tag: number;
  let offset = 1;
  let length: number;
  if (first & 0x40) {
    tag = first & 0x3f;
    const b0 = data[offset] ?? 0;
    if (b0 < 192) {
      length = b0;
      offset += 1;
    } else if (b0 < 224) {
      length = ((b0 - 192) << 8) + (data[offset + 1] ?? 0) + 192;
      offset += 2;
    } else if (b0 === 255) {
      length = data.readUInt32BE(offset + 1);
      offset += 5;
    } else return null;
  } else {
    tag = (first >> 2) & 0x0f;
    const kind = first & 0x03;
    const size = kind === 0 ? 1 : kind === 1 ? 2 : kind === 2 ? 4 : 0;
    length = size === 0 ? data.length - offset : data.readUIntBE(offset, size);
    offset += size;
  }
  if (tag !== 2) return null;
  return data.subarray(offset, offset + length);
}

/** Issuer key id from a run of signature subpackets (issuer, or the issuer fingerprint's tail). */
function issuerIn(subpackets: Buffer): string | null {
  let i = 0;
  let fromFingerprint: string | null = null;
  while (i < subpackets.length) {
    const b0 = subpackets[i] as number;
    let length: number;
    if (b0 < 192) {
      length = b0;
      i += 1;
    } else if (b0 < 255) {
      length = ((b0 - 192) << 8) + (subpackets[i + 1] ?? 0) + 192;
      i += 2;
    } else {
      length = subpackets.readUInt32BE(i + 1);
      i += 5;
    }
    if (length < 1 || i + length > subpackets.length) return fromFingerprint;
    const type = (subpackets[i] as number) & 0x7f;
    const body = subpackets.subarray(i + 1, i + length);
    if (type === 16 && body.length === 8) return body.toString('hex').toUpperCase();
    if (type === 33 && body.length >= 21) {
      const fingerprint = body.subarray(1);
      // A v4 key id is the fingerprint's last 8 bytes; a v5/v6 key id its first 8.
      const id = body[0] === 4 ? fingerprint.subarray(fingerprint.length - 8) : fingerprint.subarray(0, 8);
      fromFingerprint = id.toString('hex').toUpperCase();
    }
    i += length;
  }
  return fromFingerprint;
}

/** The issuer key id of an armored OpenPGP signature, or null when it names none. */
export function pgpIssuerKeyId(armored: string): string | null {
  try {
    const packet = signaturePacket(dearmor(armored));
    if (!packet) return null;
    const version = packet[0];
    if (version === 3) return packet.length >= 15 ? packet.subarray(7, 15).toString('hex').toUpperCase() : null;
    if (version === 4 || version === 5) {
      const hashedLength = packet.readUInt16BE(4);
      const hashed = packet.subarray(6, 6 + hashedLength);
      const unhashedAt = 6 + hashedLength;
      const unhashed = packet.subarray(unhashedAt + 2, unhashedAt + 2 + packet.readUInt16BE(unhashedAt));
      return issuerIn(hashed) ?? issuerIn(unhashed);
    }
    if (version === 6) {
      const hashedLength = packet.readUInt32BE(4);
      const hashed = packet.subarray(8, 8 + hashedLength);
      const unhashedAt = 8 + hashedLength;
      const unhashed = packet.subarray(unhashedAt + 4, unhashedAt + 4 + packet.readUInt32BE(unhashedAt));
      return issuerIn(hashed) ?? issuerIn(unhashed);
    }
    return null;
  } catch {
    // A truncated or malformed packet names no key.
    return null;
  }
}

/** The signature of a raw commit object, or null when it carries none Gitaly would recognise. */
export function readCommitSignature(raw: Buffer): CommitSignatureInfo | null {
  const armored = signatureHeader(raw);
  if (armored === null) return null;
  const type = signatureType(armored);
  if (!type) return null;
  return { type, armored, keyId: type === 'PGP' ? pgpIssuerKeyId(armored) : null };
}
