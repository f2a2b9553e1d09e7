import { sql } from 'kysely';
import { STORAGE_WEIGHTS_SETTING, storageWeights } from '../storage/placement.js';
import type { Deps } from './deps.js';
import { Validation } from './errors.js';

/**
 * Instance-wide application settings, one row per key in `application_settings`. Only the
 * storage keys exist so far; other settings join the same table and the same response.
 */
export interface ApplicationSettings {
  createdAt: Date;
  updatedAt: Date;
  /** Every configured storage with its weight (0–100) for new repositories. */
  repositoryStoragesWeighted: Record<string, number>;
  /** Depot's own: whether POST /oauth/token offers the password grant (GitLab always does). */
  oauthPasswordGrantEnabled: boolean;
}

/** Depot's own setting key (not GitLab's): the instance switch of the OAuth password grant. */
export const PASSWORD_GRANT_SETTING = 'oauth_password_grant_enabled';

export interface ApplicationSettingsChange {
  repository_storages_weighted?: Record<string, number>;
  /** Deprecated: the storages new repositories may go to; the others get weight 0. */
  repository_storages?: string[];
  oauth_password_grant_enabled?: boolean;
}

const MAX_STORAGE_WEIGHT = 100;

export async function readApplicationSettings(deps: Deps): Promise<ApplicationSettings> {
  const rows = await deps.db.selectFrom('application_settings').select(['key', 'value', 'updated_at']).execute();
  const instance = rows.find((r) => r.key === 'instance');
  const createdText = (instance?.value as { created_at?: string } | undefined)?.created_at;
  const updatedAt = rows.reduce<Date | null>(
    (max, r) => (max === null || r.updated_at > max ? r.updated_at : max),
    null,
  );
  const createdAt = createdText ? new Date(createdText) : (instance?.updated_at ?? deps.clock.now());
  return {
    createdAt,
    updatedAt: updatedAt ?? createdAt,
    repositoryStoragesWeighted: await storageWeights(deps.db, deps.storages),
    oauthPasswordGrantEnabled: rows.find((r) => r.key === PASSWORD_GRANT_SETTING)?.value !== false,
  };
}

/** The password grant's switch (on unless an administrator turned it off). */
export async function passwordGrantEnabled(deps: Deps): Promise<boolean> {
  const row = await deps.db
    .selectFrom('application_settings')
    .select('value')
    .where('key', '=', PASSWORD_GRANT_SETTING)
    .executeTakeFirst();
  return row?.value !== false;
}

/** Validates and stores a change, GitLab's model validations giving 400 `{"message": {...}}`. */
export async function updateApplicationSettings(deps: Deps, change: ApplicationSettingsChange): Promise<void> {
  const errors = new Validation();
  const names = deps.storages.names();
  let weights: Record<string, number> | undefined;
  if (change.repository_storages_weighted !== undefined) {
    weights = change.repository_storages_weighted;
    const invalid = Object.keys(weights).filter((n) => !names.includes(n));
    if (invalid.length > 0) errors.add('repository_storages_weighted', `can't include: ${invalid.join(', ')}`);
    for (const [name, weight] of Object.entries(weights)) {
      if (weight < 0 || weight > MAX_STORAGE_WEIGHT) {
        errors.add('repository_storages_weighted', `value for '${name}' must be between 0 and 100`);
      }
    }
  }
  if (change.repository_storages !== undefined) {
    const invalid = change.repository_storages.filter((n) => !names.includes(n));
    if (invalid.length > 0) errors.add('repository_storages', `can't include: ${invalid.join(', ')}`);
    const current = weights ?? (await storageWeights(deps.db, deps.storages));
    weights = Object.fromEntries(
      names.map((n) => [n, change.repository_storages?.includes(n) ? current[n] || MAX_STORAGE_WEIGHT : 0]),
    );
  }
  errors.throwIfAny();
  const values = [
    ...(weights === undefined ? [] : [{ key: STORAGE_WEIGHTS_SETTING, value: JSON.stringify(weights) }]),
    ...(change.oauth_password_grant_enabled === undefined
      ? []
      : [{ key: PASSWORD_GRANT_SETTING, value: JSON.stringify(change.oauth_password_grant_enabled) }]),
  ];
  if (values.length === 0) return;
  const now = deps.clock.now();
  await deps.db
    .insertInto('application_settings')
    .values(values.map((v) => ({ ...v, updated_at: now })))
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({ value: sql`excluded.value`, updated_at: sql`excluded.updated_at` }),
    )
    .execute();
}
