import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isValidBranchName } from '../git/validate.js';
import { instanceKey, openSecret, sealSecret } from '../lib/secret-box.js';
import { type AuditActor, type AuditChange, recordAuditEvents } from './audit-events.js';
import { cachedLookup, type Deps } from './deps.js';
import { Validation } from './errors.js';
import {
  ALIASES,
  DEPRECATED_NAMES,
  IMPORT_SOURCES,
  SETTINGS,
  SETTINGS_BY_NAME,
  type SettingDefinition,
  VISIBILITY_LEVELS,
} from './settings-catalog.js';

/**
 * Instance-wide application settings: one row per changed attribute in `application_settings`
 * (key = GitLab's name, value = JSON; secrets sealed with the instance key), every other
 * attribute at GitLab's default. Every module reads them through `getApplicationSettings`, kept
 * per process and dropped on any change by any process (LISTEN/NOTIFY, migration 0012).
 */
export interface ApplicationSettings {
  createdAt: Date;
  updatedAt: Date;
  /** Every attribute of the catalog by GitLab's name, secrets in clear. */
  values: Readonly<Record<string, unknown>>;
}

/** Depot's own setting key (not GitLab's): the instance switch of the OAuth password grant. */
export const PASSWORD_GRANT_SETTING = 'oauth_password_grant_enabled';

/** The key of the row that records when the instance's settings came to be (migration 0003). */
const INSTANCE_ROW = 'instance';
const MAX_STORAGE_WEIGHT = 100;

/** Every configured storage with its stored weight; nothing stored means all on `default`. */
function weightsFrom(stored: unknown, storages: Deps['storages']): Record<string, number> {
  const given = (stored ?? null) as Record<string, number> | null;
  const weights: Record<string, number> = {};
  for (const name of storages.names()) {
    weights[name] = given ? (given[name] ?? 0) : name === 'default' ? MAX_STORAGE_WEIGHT : 0;
  }
  return weights;
}
/** How masked secrets read in the audit trail. */
export const MASKED = '********';

interface SealedValue {
  sealed: string;
}

const isSealed = (value: unknown): value is SealedValue =>
  value !== null && typeof value === 'object' && typeof (value as SealedValue).sealed === 'string';

/** The settings as every module reads them: cached in process, fresh after any change. */
export async function getApplicationSettings(deps: Deps): Promise<ApplicationSettings> {
  return (await cachedLookup(deps, 'applicationSettings', 'current', () =>
    loadSettings(deps, deps.db),
  )) as ApplicationSettings;
}

/** Kept for callers of the first settings module: the same as `getApplicationSettings`. */
export const readApplicationSettings = getApplicationSettings;

/** The password grant's switch (on unless an administrator turned it off). */
export async function passwordGrantEnabled(deps: Deps): Promise<boolean> {
  return (await getApplicationSettings(deps)).values[PASSWORD_GRANT_SETTING] !== false;
}

/**
 * A sealed setting in clear; one the instance key cannot open (DEPOT_SECRET_KEY changed, the
 * key file lost) reads as unset and is logged, so that one lost secret does not fail every
 * request that reads the settings.
 */
function openSetting(deps: Deps, name: string, key: Buffer, value: SealedValue): string | null {
  try {
    return openSecret(key, value.sealed);
  } catch {
    deps.logger.error({ setting: name }, 'a sealed application setting cannot be opened with the instance key');
    return null;
  }
}

async function loadSettings(deps: Deps, db: Db): Promise<ApplicationSettings> {
  const rows = await db.selectFrom('application_settings').select(['key', 'value', 'updated_at']).execute();
  const stored = new Map(rows.map((r) => [r.key, r.value]));
  const key = () => instanceKey(deps.config.storageDir, deps.config.secretKey);
  const values: Record<string, unknown> = {};
  for (const def of SETTINGS) {
    const raw = stored.get(def.name);
    if (def.kind === 'weights') values[def.name] = weightsFrom(raw, deps.storages);
    else if (raw === undefined) values[def.name] = structuredClone(def.default);
    else if (isSealed(raw)) values[def.name] = openSetting(deps, def.name, key(), raw);
    else values[def.name] = raw;
  }
  const instance = rows.find((r) => r.key === INSTANCE_ROW);
  const createdText = (instance?.value as { created_at?: string } | undefined)?.created_at;
  const createdAt = createdText ? new Date(createdText) : (instance?.updated_at ?? deps.clock.now());
  let updatedAt = createdAt;
  for (const row of rows) if (row.updated_at > updatedAt) updatedAt = row.updated_at;
  return { createdAt, updatedAt, values };
}

/**
 * Validates and stores a change as GitLab's model does (400 `{"message": {...}}`, nothing
 * stored on any error), recording each changed attribute in the audit trail in the same
 * transaction. `change` holds declared parameters by any accepted name.
 */
export async function updateApplicationSettings(
  deps: Deps,
  actor: AuditActor,
  change: Record<string, unknown>,
): Promise<void> {
  const given = canonicalChange(change);
  await deps.db.transaction().execute(async (trx) => {
    // One change at a time: each validates against the state the previous one left.
    await sql`SELECT pg_advisory_xact_lock(hashtext('application_settings'))`.execute(trx);
    const current = await loadSettings(deps, trx);
    const next: Record<string, unknown> = { ...current.values };
    for (const [name, value] of Object.entries(given)) next[name] = value;
    if (given.repository_storages !== undefined) {
      const names = deps.storages.names();
      const list = given.repository_storages as string[];
      const base = (given.repository_storages_weighted ?? current.values.repository_storages_weighted) as Record<
        string,
        number
      >;
      next.repository_storages_weighted = Object.fromEntries(
        names.map((n) => [n, list.includes(n) ? base[n] || MAX_STORAGE_WEIGHT : 0]),
      );
      delete next.repository_storages;
    }
    validate(deps, next, given);
    // Stored as answered: every storage named, so an unchanged map records no change.
    next.repository_storages_weighted = weightsFrom(next.repository_storages_weighted, deps.storages);
    const changes: AuditChange[] = [];
    const writes: { key: string; value: string }[] = [];
    const key = () => instanceKey(deps.config.storageDir, deps.config.secretKey);
    for (const def of SETTINGS) {
      const before = current.values[def.name];
      const after = next[def.name];
      if (JSON.stringify(before) === JSON.stringify(after)) continue;
      const stored =
        def.secret && typeof after === 'string' && after !== '' ? { sealed: sealSecret(key(), after) } : after;
      writes.push({ key: def.name, value: JSON.stringify(stored ?? null) });
      changes.push({
        change: def.name,
        from: def.secret ? MASKED : (before ?? null),
        to: def.secret ? MASKED : (after ?? null),
      });
    }
    if (writes.length === 0) return;
    const now = deps.clock.now();
    await trx
      .insertInto('application_settings')
      .values(writes.map((w) => ({ ...w, updated_at: now })))
      .onConflict((oc) =>
        oc.column('key').doUpdateSet({ value: sql`excluded.value`, updated_at: sql`excluded.updated_at` }),
      )
      .execute();
    await recordAuditEvents(trx, deps.clock.now(), actor, {
      entityId: 1,
      entityType: 'Gitlab::Audit::InstanceScope',
      eventName: 'application_setting_updated',
      targetType: 'ApplicationSetting',
      targetId: 1,
      targetDetails: 'Application settings',
      changes,
    });
  });
}

/**
 * Every name mapped to GitLab's attribute, values normalised the way GitLab stores them:
 * `enabled_git_access_protocol` `all`/`nil`/blank is both (null), visibility levels by name.
 */
export function canonicalChange(change: Record<string, unknown>): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const [given, value] of Object.entries(change)) {
    if (value === undefined) continue;
    // Since 13.0 hashed storage cannot be turned off; GitLab drops the attribute silently.
    if (given === 'hashed_storage_enabled') continue;
    const name = ALIASES.get(given) ?? DEPRECATED_NAMES[given] ?? given;
    // The successor wins when both names are given.
    if (name !== given && change[name] !== undefined) continue;
    if (name === 'repository_storages') {
      result[name] = value;
      continue;
    }
    const def = SETTINGS_BY_NAME.get(name);
    if (!def) continue;
    result[name] = normalise(def, value);
  }
  return result;
}

function normalise(def: SettingDefinition, value: unknown): unknown {
  if (def.name === 'enabled_git_access_protocol') {
    return value === 'ssh' || value === 'http' ? value : null;
  }
  if (def.kind === 'visibility_levels' && Array.isArray(value)) {
    const byNumber = Object.fromEntries(Object.entries(VISIBILITY_LEVELS).map(([n, v]) => [String(v), n]));
    return value.map((v) => byNumber[String(v)] ?? String(v));
  }
  return value;
}

const URL_SCHEMES = ['http:', 'https:'];
const EMAIL = /^[^@\s]+@[^@\s]+$/;
const TOKEN_PREFIX = /^[a-zA-Z0-9_+=/@:.-]+$/;
const MAX_OUTBOUND_ALLOWLIST = 1000;
const MAX_PAGES_SIZE_MB = 1024 * 1024;
const MAX_REQUEST_DURATION_SECONDS = 57;
const DAY_SECONDS = 86_400;
/** GitLab's shortest period of inactivity after which the dormant-user job may deactivate anyone. */
const DORMANT_PERIOD_MIN_DAYS = 90;

type Range = { min?: number; over?: number; max?: number; under?: number };

/** Integer attributes and GitLab's numericality bounds (min ≥, over >, max ≤, under <). */
const INTEGER_RANGES: Record<string, Range> = {
  container_registry_token_expire_delay: { over: 0 },
  default_projects_limit: { min: 0 },
  deletion_adjourned_period: { min: 0, max: 90 },
  diff_max_patch_bytes: { min: 204800, max: 512000 },
  diff_max_files: { min: 1000, max: 3000 },
  diff_max_lines: { min: 50000, max: 100000 },
  elasticsearch_indexed_field_length_limit: { min: 0 },
  elasticsearch_indexed_file_size_limit_kb: { over: 0 },
  elasticsearch_max_bulk_concurrency: { min: 1 },
  elasticsearch_max_bulk_size_mb: { min: 1 },
  external_pipeline_validation_service_timeout: { over: 0 },
  geo_status_timeout: { over: 0 },
  git_two_factor_session_expiry: { min: 1, max: 10080 },
  gitaly_timeout_default: { min: 0, max: MAX_REQUEST_DURATION_SECONDS },
  gitaly_timeout_fast: { min: 0 },
  gitaly_timeout_medium: { min: 0 },
  housekeeping_incremental_repack_period: { over: 0 },
  issues_create_limit: { min: 0 },
  local_markdown_version: { min: 0, under: 65536 },
  max_artifacts_size: { over: 0 },
  max_attachment_size: { over: 0 },
  max_import_size: { min: 0 },
  max_pages_size: { min: 0, under: MAX_PAGES_SIZE_MB },
  max_personal_access_token_lifetime: { min: 1, max: 365 },
  metrics_method_call_threshold: { min: 0 },
  raw_blob_request_limit: { min: 0 },
  session_expire_delay: { min: 0 },
  snippet_size_limit: { over: 0 },
  terminal_max_session_time: { min: 0 },
  wiki_page_max_content_bytes: { min: 1024 },
};

function checkRange(errors: Validation, name: string, value: unknown, range: Range): void {
  if (typeof value !== 'number') return;
  if (range.min !== undefined && value < range.min) errors.add(name, `must be greater than or equal to ${range.min}`);
  if (range.over !== undefined && value <= range.over) errors.add(name, `must be greater than ${range.over}`);
  if (range.max !== undefined && value > range.max) errors.add(name, `must be less than or equal to ${range.max}`);
  if (range.under !== undefined && value >= range.under) errors.add(name, `must be less than ${range.under}`);
}

function checkUrl(errors: Validation, name: string, value: unknown): void {
  if (typeof value !== 'string' || value === '') return;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    errors.add(name, 'must be a valid URL');
    return;
  }
  if (!URL_SCHEMES.includes(url.protocol)) errors.add(name, 'is blocked: Only allowed schemes are http, https');
}

const blank = (value: unknown) =>
  value === null || value === undefined || value === '' || (Array.isArray(value) && value.length === 0);

/** GitLab's model validations over the settings as they would be after the change. */
function validate(deps: Deps, next: Record<string, unknown>, given: Record<string, unknown>): void {
  const errors = new Validation();
  for (const [name, range] of Object.entries(INTEGER_RANGES)) checkRange(errors, name, next[name], range);
  const incremental = next.housekeeping_incremental_repack_period as number;
  const full = next.housekeeping_full_repack_period as number;
  checkRange(errors, 'housekeeping_full_repack_period', full, { min: incremental });
  checkRange(errors, 'housekeeping_gc_period', next.housekeeping_gc_period, { min: full });
  const gitalyDefault = next.gitaly_timeout_default as number;
  checkRange(errors, 'gitaly_timeout_medium', next.gitaly_timeout_medium, {
    max: gitalyDefault,
    min: next.gitaly_timeout_fast as number,
  });
  checkRange(errors, 'gitaly_timeout_fast', next.gitaly_timeout_fast, { max: gitalyDefault });
  checkRange(errors, 'polling_interval_multiplier', next.polling_interval_multiplier, { min: 0 });
  if (
    next.external_authorization_service_enabled === true ||
    given.external_authorization_service_timeout !== undefined
  ) {
    checkRange(errors, 'external_authorization_service_timeout', next.external_authorization_service_timeout, {
      over: 0,
      max: 10,
    });
  }
  if (![0, 1, 6].includes(next.first_day_of_week as number))
    errors.add('first_day_of_week', 'is not included in the list');

  if (!blank(next.abuse_notification_email) && !EMAIL.test(String(next.abuse_notification_email))) {
    errors.add('abuse_notification_email', 'is invalid');
  }
  for (const name of ['after_sign_out_path', 'home_page_url', 'help_page_support_url'])
    checkUrl(errors, name, next[name]);
  if (!blank(next.commit_email_hostname) && !/^[^@]+$/.test(String(next.commit_email_hostname))) {
    errors.add('commit_email_hostname', 'is invalid');
  }
  if (next.deactivate_dormant_users === true) {
    const period = next.deactivate_dormant_users_period as number;
    if (!(period >= DORMANT_PERIOD_MIN_DAYS)) {
      errors.add(
        'deactivate_dormant_users_period',
        `'${period}' days of inactivity must be greater than or equal to ${DORMANT_PERIOD_MIN_DAYS}`,
      );
    }
  }
  const branchName = next.default_branch_name;
  if (typeof branchName === 'string' && branchName !== '') {
    // New repositories start on it, so it must be a name git takes for a branch.
    if (!isValidBranchName(branchName)) errors.add('default_branch_name', 'is invalid');
    if (branchName.length > 255) errors.add('default_branch_name', 'is too long (maximum is 255 characters)');
  }
  const prefix = next.personal_access_token_prefix;
  if (typeof prefix === 'string' && prefix !== '') {
    if (!TOKEN_PREFIX.test(prefix)) {
      errors.add(
        'personal_access_token_prefix',
        "can contain only letters of the Base64 alphabet (RFC4648) with the addition of '@', ':' and '.'",
      );
    }
    if (prefix.length > 20) errors.add('personal_access_token_prefix', 'is too long (maximum is 20 characters)');
  }
  if (typeof next.rate_limiting_response_text === 'string' && next.rate_limiting_response_text.length > 255) {
    errors.add('rate_limiting_response_text', 'is too long (maximum is 255 characters)');
  }
  if (typeof next.email_additional_text === 'string' && next.email_additional_text.length > 10000) {
    errors.add('email_additional_text', 'is too long (maximum is 10000 characters)');
  }
  const ciPath = next.default_ci_config_path;
  if (typeof ciPath === 'string' && ciPath !== '') {
    if (/(\.{2}|^\/)/.test(ciPath)) {
      errors.add('default_ci_config_path', 'cannot include leading slash or directory traversal.');
    }
    if (ciPath.length > 255) errors.add('default_ci_config_path', 'is too long (maximum is 255 characters)');
  }
  if (blank(next.default_artifacts_expire_in)) errors.add('default_artifacts_expire_in', "can't be blank");
  else if (parseDuration(String(next.default_artifacts_expire_in)) === undefined) {
    errors.add('default_artifacts_expire_in', 'is not a correct duration');
  }
  const archive = next.archive_builds_in_human_readable;
  if (!blank(archive)) {
    const seconds = parseDuration(String(archive));
    if (seconds === undefined) errors.add('archive_builds_in_human_readable', 'is not a correct duration');
    else if (seconds < DAY_SECONDS) {
      errors.add('archive_builds_in_seconds', `must be greater than or equal to ${DAY_SECONDS}`);
    }
  }
  const restricted = (next.restricted_visibility_levels ?? []) as string[];
  for (const level of restricted) {
    if (!(level in VISIBILITY_LEVELS)) {
      errors.add('restricted_visibility_levels', `'${level}' is not a valid visibility level`);
    }
  }
  for (const source of (next.import_sources ?? []) as string[]) {
    if (!(IMPORT_SOURCES as readonly string[]).includes(source)) {
      errors.add('import_sources', `'${source}' is not a import source`);
    }
  }
  if (((next.outbound_local_requests_whitelist ?? []) as string[]).length > MAX_OUTBOUND_ALLOWLIST) {
    errors.add('outbound_local_requests_whitelist', 'is too long (maximum is 1000 entries)');
  }

  // Companions the model requires, whatever the request named.
  if (next.akismet_enabled === true && blank(next.akismet_api_key)) errors.add('akismet_api_key', "can't be blank");
  if (next.asset_proxy_enabled === true) {
    if (blank(next.asset_proxy_url)) errors.add('asset_proxy_url', "can't be blank");
    if (blank(next.asset_proxy_secret_key)) errors.add('asset_proxy_secret_key', "can't be blank");
  }
  checkUrl(errors, 'asset_proxy_url', next.asset_proxy_url);
  if (next.enforce_terms === true && blank(next.terms)) errors.add('terms', 'You need to set terms to be enforced');
  if (next.domain_denylist_enabled === true && blank(next.domain_denylist)) {
    errors.add('domain_denylist', 'Domain denylist cannot be empty if denylist is enabled.');
  }
  if (next.external_authorization_service_enabled === true) {
    if (blank(next.external_authorization_service_default_label)) {
      errors.add('external_authorization_service_default_label', "can't be blank");
    }
    if (blank(next.external_authorization_service_url))
      errors.add('external_authorization_service_url', "can't be blank");
    checkUrl(errors, 'external_authorization_service_url', next.external_authorization_service_url);
  }
  if (!blank(next.external_auth_client_cert) && blank(next.external_auth_client_key)) {
    errors.add('external_auth_client_key', "can't be blank");
  }
  if (next.eks_integration_enabled === true) {
    if (!/^\d{12}$/.test(String(next.eks_account_id ?? ''))) {
      errors.add('eks_account_id', 'must be a 12-digit number');
    }
    const keyId = next.eks_access_key_id;
    if (typeof keyId === 'string' && keyId !== '' && (keyId.length < 16 || keyId.length > 128)) {
      errors.add('eks_access_key_id', 'is the wrong length (should be 16 to 128 characters)');
    }
  }
  if (next.mailgun_events_enabled === true && blank(next.mailgun_signing_key)) {
    errors.add('mailgun_signing_key', "can't be blank");
  }
  if (next.plantuml_enabled === true && blank(next.plantuml_url)) errors.add('plantuml_url', "can't be blank");
  if (next.kroki_enabled === true && blank(next.kroki_url)) errors.add('kroki_url', "can't be blank");

  const names = deps.storages.names();
  const weights = next.repository_storages_weighted as Record<string, number>;
  if (given.repository_storages_weighted !== undefined || given.repository_storages !== undefined) {
    const invalid = Object.keys(given.repository_storages_weighted ?? {}).filter((n) => !names.includes(n));
    if (invalid.length > 0) errors.add('repository_storages_weighted', `can't include: ${invalid.join(', ')}`);
    for (const [name, weight] of Object.entries(weights)) {
      if (weight < 0 || weight > MAX_STORAGE_WEIGHT) {
        errors.add('repository_storages_weighted', `value for '${name}' must be between 0 and 100`);
      }
    }
    const listed = (given.repository_storages ?? []) as string[];
    const unknown = listed.filter((n) => !names.includes(n));
    if (unknown.length > 0) errors.add('repository_storages', `can't include: ${unknown.join(', ')}`);
  }
  errors.throwIfAny();
}

const DURATION_UNITS: Record<string, number> = {
  s: 1,
  sec: 1,
  second: 1,
  m: 60,
  min: 60,
  minute: 60,
  h: 3600,
  hr: 3600,
  hour: 3600,
  d: DAY_SECONDS,
  day: DAY_SECONDS,
  w: 7 * DAY_SECONDS,
  wk: 7 * DAY_SECONDS,
  week: 7 * DAY_SECONDS,
  mo: 30 * DAY_SECONDS,
  month: 30 * DAY_SECONDS,
  y: 365 * DAY_SECONDS,
  yr: 365 * DAY_SECONDS,
  year: 365 * DAY_SECONDS,
};

/**
 * Seconds in a human duration as GitLab's ChronicDuration reads the common forms (`15 days`,
 * `1 month`, `2 years 3 hours`, `3600`, `never` → 0), or undefined when it cannot be read.
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim().toLowerCase();
  if (trimmed === 'never') return 0;
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const parts = trimmed
    .replace(/\band\b|,/g, ' ')
    .split(/\s+/)
    .join(' ');
  const pattern = /(\d+(?:\.\d+)?)\s*([a-z]+)/g;
  let total = 0;
  let consumed = '';
  for (const match of parts.matchAll(pattern)) {
    const unit = (match[2] as string).replace(/s$/, '');
    const seconds = DURATION_UNITS[unit] ?? DURATION_UNITS[match[2] as string];
    if (seconds === undefined) return undefined;
    total += Number(match[1]) * seconds;
    consumed += match[0];
  }
  if (consumed.replace(/\s/g, '') !== parts.replace(/\s/g, '') || consumed === '') return undefined;
  return Math.round(total);
}
