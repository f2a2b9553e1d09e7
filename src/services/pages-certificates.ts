import { spawn } from 'node:child_process';
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import tls from 'node:tls';

/**
 * Certificate checks for Pages domains, with GitLab's messages (app/models/pages_domain.rb and
 * its validators), done with node:crypto; the human-readable text comes from `openssl`.
 */

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** Every certificate of a PEM chain in order, or null when the first one does not parse. */
export function parseChain(pem: string): X509Certificate[] | null {
  const blocks = pem.match(PEM_CERTIFICATE) ?? [];
  const chain: X509Certificate[] = [];
  for (const block of blocks) {
    try {
      chain.push(new X509Certificate(block));
    } catch {
      if (chain.length === 0) return null;
      break;
    }
  }
  return chain.length > 0 ? chain : null;
}

/** A private key (of any type), or null when the text is not one. */
export function parsePrivateKey(pem: string): KeyObject | null {
  try {
    const key = createPrivateKey({ key: pem, format: 'pem' });
    return key.type === 'private' ? key : null;
  } catch {
    return null;
  }
}

const signedBy = (subject: X509Certificate, issuer: X509Certificate): boolean =>
  subject.checkIssued(issuer) && subject.verify(issuer.publicKey);

let roots: X509Certificate[] | null = null;
/** The trusted roots node ships (Mozilla's store), parsed once. */
function trustedRoots(): X509Certificate[] {
  roots ??= tls.rootCertificates.map((pem) => new X509Certificate(pem));
  return roots;
}

/**
 * Whether the chain is complete and in order: a self-signed leaf stands alone; otherwise each
 * certificate is signed by the next, and the last is self-signed or signed by a trusted root.
 */
export function hasIntermediates(chain: X509Certificate[]): boolean {
  for (let i = 0; i < chain.length; i++) {
    const cert = chain[i] as X509Certificate;
    if (signedBy(cert, cert)) return true;
    const next = chain[i + 1];
    if (next) {
      if (!signedBy(cert, next)) return false;
      continue;
    }
    return trustedRoots().some((root) => signedBy(cert, root));
  }
  return false;
}

/** The subject as Ruby's `X509::Name#to_s` writes it: `/CN=example.com/O=Example`. */
export function subjectLine(cert: X509Certificate): string {
  return cert.subject
    .split('\n')
    .filter(Boolean)
    .map((part) => `/${part}`)
    .join('');
}

export const validFrom = (cert: X509Certificate) => new Date(cert.validFrom);
export const validTo = (cert: X509Certificate) => new Date(cert.validTo);

/** Expired (or not yet valid) at `now`, as GitLab's `expired?`. */
export function isExpired(notBefore: Date | null, notAfter: Date | null, now: Date): boolean {
  if (!notBefore || !notAfter) return false;
  return now < notBefore || notAfter < now;
}

/** `openssl x509 -noout -text` of the leaf; null when openssl is missing or refuses it. */
export function certificateText(pem: string): Promise<string | null> {
  return new Promise((resolve) => {
    const child = spawn('openssl', ['x509', '-noout', '-text'], { stdio: ['pipe', 'pipe', 'ignore'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.on('error', () => resolve(null));
    child.on('close', (code) => resolve(code === 0 ? Buffer.concat(chunks).toString('utf8') : null));
    child.stdin.on('error', () => {});
    child.stdin.end(pem);
  });
}
