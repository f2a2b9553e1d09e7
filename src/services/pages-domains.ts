import { randomBytes } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import type { Db } from '../db/database.js';
import type { PagesDomain } from '../db/schema.js';
import { enqueueJob } from '../jobs/queue.js';
import { instanceKey, openSecret, sealSecret } from '../lib/secret-box.js';
import { getApplicationSettings } from './application-settings.js';
import type { Deps } from './deps.js';
import { Validation } from './errors.js';
import {
  certificateText,
  hasIntermediates,
  parseChain,
  parsePrivateKey,
  validFrom,
  validTo,
} from './pages-certificates.js';

/** The job that verifies one new domain. */
export const PAGES_DOMAIN_VERIFY_JOB = 'pages_domain_verify';

/** GitLab's TXT record prefix and name for domain verification (PagesDomain::VERIFICATION_KEY). */
export const VERIFICATION_KEY = 'gitlab-pages-verification-code';
/** How long a successful verification keeps a domain enabled (VerifyPagesDomainService). */
const VERIFICATION_PERIOD_MS = 7 * 24 * 3600 * 1000;
/** How long a disabled domain stays before it is removed. */
const REMOVAL_DELAY_MS = 7 * 24 * 3600 * 1000;
/** Domains whose enablement ends within this are verified again (PagesDomain::VERIFICATION_THRESHOLD). */
const VERIFICATION_THRESHOLD_MS = 3 * 24 * 3600 * 1000;
const DNS_TIMEOUT_MS = 5000;

/**
 * The messages of the hostname validator GitLab uses (validates_hostname, numeric labels
 * allowed), in its order; empty when `domain` is a valid host name.
 */
export function hostnameErrors(domain: string): string[] {
  const errors: string[] = [];
  const add = (message: string) => {
    if (!errors.includes(message)) errors.push(message);
  };
  if (domain.length < 1 || domain.length > 255) add('must be between 1 and 255 characters long');
  for (const label of domain.split('.')) {
    if (label.length < 1 || label.length > 63) add('must be between 1 and 63 characters long');
    if (label.startsWith('-') || label.endsWith('-')) add('begins or ends with hyphen');
    if (!/^[a-z0-9-]+$/i.test(label)) add('contains invalid characters (valid characters: [a-z0-9\\-])');
  }
  if (domain.includes('..')) add('must not contain consecutive dots');
  if (domain.endsWith('.')) add('must not end with a dot');
  return errors;
}

export interface CertificateChange {
  /** undefined: unchanged; '' or null: removed. */
  certificate?: string | null;
  key?: string | null;
}

interface Material {
  certificate: string | null;
  key: string | null;
}

const blankToNull = (value: string | null | undefined) =>
  value === undefined || value === null || value.trim() === '' ? null : value;

/** Checks a certificate and key as GitLab's model does; `certificateChanged` decides the chain check. */
function checkMaterial(material: Material, certificateChanged: boolean, errors: Validation): void {
  const chain = material.certificate === null ? null : parseChain(material.certificate);
  if (material.certificate !== null && !chain) errors.add('certificate', 'must be a valid PEM certificate');
  const key = material.key === null ? null : parsePrivateKey(material.key);
  if (material.key !== null && !key) errors.add('key', 'must be a valid PEM private key');
  if (material.certificate !== null || material.key !== null) {
    const leaf = chain?.[0];
    if (!leaf || !key || !leaf.checkPrivateKey(key)) errors.add('key', "doesn't match the certificate");
  }
  if (chain && certificateChanged && !hasIntermediates(chain)) errors.add('certificate', 'misses intermediates');
}

function checkDomain(deps: Deps, domain: string, errors: Validation): void {
  for (const message of hostnameErrors(domain)) errors.add('domain', message);
  const host = deps.config.pagesHost;
  if (host && domain.toLowerCase().endsWith(host)) errors.add('domain', `*.${host} is restricted`);
}

async function domainTaken(db: Db, domain: string, exceptId?: number): Promise<boolean> {
  let query = db
    .selectFrom('pages_domains')
    .select('id')
    .where((eb) => eb(eb.fn('lower', ['domain']), '=', domain.toLowerCase()));
  if (exceptId !== undefined) query = query.where('id', '<>', exceptId);
  return (await query.executeTakeFirst()) !== undefined;
}

/** The columns a certificate brings: its validity window and its text. */
async function certificateColumns(deps: Deps, material: Material) {
  const leaf = material.certificate === null ? null : parseChain(material.certificate)?.[0];
  const key = () => instanceKey(deps.config.storageDir, deps.config.secretKey);
  return {
    certificate: material.certificate,
    certificate_text: material.certificate === null ? null : await certificateText(material.certificate),
    certificate_valid_not_before: leaf ? validFrom(leaf) : null,
    certificate_valid_not_after: leaf ? validTo(leaf) : null,
    key_sealed: material.key === null ? null : sealSecret(key(), material.key),
  };
}

/** The stored private key in clear (null when none or unreadable). */
export function openDomainKey(deps: Deps, domain: PagesDomain): string | null {
  if (!domain.key_sealed) return null;
  try {
    return openSecret(instanceKey(deps.config.storageDir, deps.config.secretKey), domain.key_sealed);
  } catch {
    return null;
  }
}

export interface CreateDomainInput extends CertificateChange {
  domain: string;
  auto_ssl_enabled: boolean;
}

/** Adds a domain to a project (400 with GitLab's messages when anything is wrong). */
export async function createPagesDomain(deps: Deps, projectId: number, input: CreateDomainInput): Promise<PagesDomain> {
  const errors = new Validation();
  checkDomain(deps, input.domain, errors);
  if (await domainTaken(deps.db, input.domain)) errors.add('domain', 'has already been taken');
  const material = { certificate: blankToNull(input.certificate), key: blankToNull(input.key) };
  checkMaterial(material, true, errors);
  errors.throwIfAny();
  const now = deps.clock.now();
  const columns = await certificateColumns(deps, material);
  const inserted = await deps.db.transaction().execute(async (tx) => {
    const row = await tx
      .insertInto('pages_domains')
      .values({
        project_id: projectId,
        domain: input.domain,
        auto_ssl_enabled: input.auto_ssl_enabled,
        verification_code: randomBytes(16).toString('hex'),
        created_at: now,
        updated_at: now,
        ...columns,
      })
      .onConflict((oc) => oc.doNothing())
      .returningAll()
      .executeTakeFirst();
    // GitLab verifies a new domain straight away, in the background.
    if (row) await enqueueJob(tx, PAGES_DOMAIN_VERIFY_JOB, { pages_domain_id: row.id }, { maxAttempts: 1 });
    return row;
  });
  // A concurrent request took the name between the check and the insert.
  if (!inserted) new Validation().add('domain', 'has already been taken').throwIfAny();
  return inserted as PagesDomain;
}

export interface UpdateDomainInput extends CertificateChange {
  auto_ssl_enabled?: boolean;
}

/** Changes a domain's certificate, key or automatic certificates. */
export async function updatePagesDomain(
  deps: Deps,
  domain: PagesDomain,
  input: UpdateDomainInput,
): Promise<PagesDomain> {
  const stored: Material = { certificate: domain.certificate, key: openDomainKey(deps, domain) };
  const material: Material = {
    certificate: input.certificate === undefined ? stored.certificate : blankToNull(input.certificate),
    // A new certificate without a key keeps the stored key (GitLab drops the empty key parameter).
    key: input.key === undefined ? stored.key : blankToNull(input.key),
  };
  const certificateChanged = input.certificate !== undefined && material.certificate !== stored.certificate;
  const errors = new Validation();
  checkMaterial(material, certificateChanged, errors);
  errors.throwIfAny();
  const changed = input.certificate !== undefined || input.key !== undefined;
  const updated = await deps.db
    .updateTable('pages_domains')
    .set({
      ...(changed ? { ...(await certificateColumns(deps, material)), certificate_source: 'user_provided' } : {}),
      ...(input.auto_ssl_enabled === undefined ? {} : { auto_ssl_enabled: input.auto_ssl_enabled }),
      updated_at: deps.clock.now(),
    })
    .where('id', '=', domain.id)
    .returningAll()
    .executeTakeFirst();
  return updated ?? domain;
}

export async function deletePagesDomain(db: Db, domain: PagesDomain): Promise<void> {
  await db.deleteFrom('pages_domains').where('id', '=', domain.id).execute();
}

export async function findPagesDomain(db: Db, projectId: number, name: string): Promise<PagesDomain | undefined> {
  return db
    .selectFrom('pages_domains')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('domain', '=', name)
    .executeTakeFirst();
}

export async function findPagesDomainById(db: Db, id: number): Promise<PagesDomain | undefined> {
  return db.selectFrom('pages_domains').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The instance's domain of that name, whatever its case (the administrators' `domain` filter). */
export async function findPagesDomainByName(db: Db, name: string): Promise<PagesDomain | undefined> {
  return db
    .selectFrom('pages_domains')
    .selectAll()
    .where((eb) => eb(eb.fn('lower', ['domain']), '=', name.toLowerCase()))
    .executeTakeFirst();
}

export interface Window {
  limit: number;
  offset: number;
}

/** One project's domains (by name), or with no project every domain of the instance (by id). */
function domainsOf(db: Db, projectId: number | undefined) {
  const all = db.selectFrom('pages_domains');
  return projectId === undefined ? all : all.where('project_id', '=', projectId);
}

export async function listPagesDomains(db: Db, projectId: number | undefined, window: Window): Promise<PagesDomain[]> {
  return domainsOf(db, projectId)
    .selectAll()
    .orderBy(projectId === undefined ? 'id' : 'domain')
    .limit(window.limit)
    .offset(window.offset)
    .execute();
}

export async function countPagesDomains(db: Db, projectId: number | undefined, limit: number): Promise<number> {
  return (await domainsOf(db, projectId).select('id').limit(limit).execute()).length;
}

async function verificationEnabled(deps: Deps): Promise<boolean> {
  return (await getApplicationSettings(deps)).values.pages_domain_verification_enabled !== false;
}

/** Whether a domain is served: verification off, or verified within its grace period. */
export async function pagesDomainEnabled(deps: Deps, domain: PagesDomain): Promise<boolean> {
  return !(await verificationEnabled(deps)) || domain.enabled_until !== null;
}

function resolver(deps: Deps): Resolver {
  const dns = new Resolver({ timeout: DNS_TIMEOUT_MS, tries: 1 });
  if (deps.config.dnsServers.length > 0) dns.setServers(deps.config.dnsServers);
  return dns;
}

/** Whether a TXT record of `name` carries the domain's code (bare or keyed), words split as GitLab does. */
async function txtHasCode(dns: Resolver, name: string, code: string): Promise<boolean> {
  try {
    const records = await dns.resolveTxt(`${name}.`);
    return records
      .flatMap((strings) => strings.flatMap((text) => text.split(/\s+/)))
      .some((word) => word === code || word === `${VERIFICATION_KEY}=${code}`);
  } catch {
    return false;
  }
}

export interface VerificationResult {
  verified: boolean;
  /** GitLab's message when not verified. */
  message?: string;
}

/**
 * GitLab's VerifyPagesDomainService: a TXT record on the domain or on
 * `_gitlab-pages-verification-code.<domain>` (or verification turned off) verifies it for seven
 * days more; a domain past its grace period is disabled and removed a week later.
 */
export async function verifyPagesDomain(deps: Deps, domain: PagesDomain): Promise<VerificationResult> {
  const now = deps.clock.now();
  const enabled = !(await verificationEnabled(deps));
  const dns = resolver(deps);
  const found =
    enabled ||
    (await txtHasCode(dns, domain.domain, domain.verification_code)) ||
    (await txtHasCode(dns, `_${VERIFICATION_KEY}.${domain.domain}`, domain.verification_code));
  if (found) {
    const renewed = new Date(now.getTime() + VERIFICATION_PERIOD_MS);
    const enabledUntil = domain.enabled_until && domain.enabled_until > renewed ? domain.enabled_until : renewed;
    await deps.db
      .updateTable('pages_domains')
      .set({ verified_at: now, enabled_until: enabledUntil, remove_at: null })
      .where('id', '=', domain.id)
      .execute();
    return { verified: true };
  }
  const removeAt = domain.remove_at ?? new Date(now.getTime() + REMOVAL_DELAY_MS);
  if (domain.enabled_until && domain.enabled_until < now) {
    await deps.db
      .updateTable('pages_domains')
      .set({ verified_at: null, enabled_until: null, remove_at: removeAt })
      .where('id', '=', domain.id)
      .execute();
    return { verified: false, message: `Couldn't verify ${domain.domain}. It is now disabled.` };
  }
  await deps.db
    .updateTable('pages_domains')
    .set({ verified_at: null, remove_at: domain.enabled_until ? domain.remove_at : removeAt })
    .where('id', '=', domain.id)
    .execute();
  return { verified: false, message: `Couldn't verify ${domain.domain}` };
}

const BATCH = 100;

/**
 * One pass of the verification job: every domain that needs it (never verified, or enabled for
 * less than three more days) is checked, then domains past `remove_at` are removed.
 */
export async function verifyPagesDomains(deps: Deps): Promise<{ checked: number; removed: number }> {
  const now = deps.clock.now();
  const threshold = new Date(now.getTime() + VERIFICATION_THRESHOLD_MS);
  let checked = 0;
  let after = 0;
  for (;;) {
    const batch = await deps.db
      .selectFrom('pages_domains')
      .selectAll()
      .where('id', '>', after)
      .where((eb) =>
        eb.or([eb('verified_at', 'is', null), eb('enabled_until', 'is', null), eb('enabled_until', '<', threshold)]),
      )
      .orderBy('id')
      .limit(BATCH)
      .execute();
    for (const domain of batch) {
      await verifyPagesDomain(deps, domain);
      checked++;
    }
    if (batch.length < BATCH) break;
    after = (batch.at(-1) as PagesDomain).id;
  }
  const removed = await deps.db.deleteFrom('pages_domains').where('remove_at', '<', now).executeTakeFirst();
  return { checked, removed: Number(removed.numDeletedRows) };
}
