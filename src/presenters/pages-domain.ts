import type { X509Certificate } from 'node:crypto';
import type { PagesDomain } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';
import { isExpired, parseChain, subjectLine } from '../services/pages-certificates.js';

const url = (domain: PagesDomain) => `${domain.certificate ? 'https' : 'http'}://${domain.domain}`;

const common = (domain: PagesDomain) => ({
  domain: domain.domain,
  url: url(domain),
});

const verification = (domain: PagesDomain) => ({
  verified: domain.verified_at !== null,
  verification_code: domain.verification_code,
  enabled_until: isoTime(domain.enabled_until),
  auto_ssl_enabled: domain.auto_ssl_enabled,
});

const expired = (domain: PagesDomain, now: Date) =>
  isExpired(domain.certificate_valid_not_before, domain.certificate_valid_not_after, now);

/** GitLab's PagesDomain entity (project routes): `certificate` only when one is attached. */
export function presentPagesDomain(domain: PagesDomain, now: Date) {
  const leaf: X509Certificate | undefined = domain.certificate ? parseChain(domain.certificate)?.[0] : undefined;
  return {
    ...common(domain),
    ...verification(domain),
    ...(domain.certificate
      ? {
          certificate: {
            subject: leaf ? subjectLine(leaf) : null,
            expired: expired(domain, now),
            certificate: domain.certificate,
            certificate_text: domain.certificate_text,
          },
        }
      : {}),
  };
}

/** GitLab's PagesDomainBasic entity (the administrators' list). */
export function presentPagesDomainBasic(domain: PagesDomain, now: Date) {
  return {
    ...common(domain),
    project_id: domain.project_id,
    ...verification(domain),
    ...(domain.certificate
      ? {
          certificate_expiration: {
            expired: expired(domain, now),
            expiration: isoTime(domain.certificate_valid_not_after),
          },
        }
      : {}),
  };
}
