import type { Integration, Project } from '../db/schema.js';
import { paramError, validationError } from '../http/errors.js';
import { checkOutboundUrl, OutboundError } from '../lib/outbound/index.js';
import type { Deps } from './deps.js';
import {
  EVENT_DEFAULTS,
  type EventFlag,
  eventFlagsOf,
  type IntegrationField,
  type IntegrationKind,
  RESPONSE_EVENT_FLAGS,
} from './integration-catalog.js';
import { outboundOptions } from './outbound.js';
import { openWith, sealWith } from './webhooks.js';

/**
 * Project integrations (GitLab's lib/api/integrations.rb): one row per project and kind, its
 * plain settings in `properties`, its secrets sealed in `sealed_secrets`.
 */

const EMAIL = /^[^@\s,]+@[^@\s,]+$/;

export function listActiveIntegrations(deps: Deps, projectId: number): Promise<Integration[]> {
  return deps.db
    .selectFrom('integrations')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('active', '=', true)
    .orderBy('id')
    .execute();
}

export function findIntegration(deps: Deps, projectId: number, slug: string): Promise<Integration | undefined> {
  return deps.db
    .selectFrom('integrations')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('slug', '=', slug)
    .executeTakeFirst();
}

/** The addresses of an e-mail list setting (comma or whitespace separated). */
export function splitEmails(value: string): string[] {
  return value
    .split(/[\s,]+/)
    .map((e) => e.trim())
    .filter(Boolean);
}

const isBlank = (value: unknown) => value === undefined || value === null || value === '';

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/** 422 with the field's reason when the outbound guard would refuse the URL now. */
async function checkTarget(deps: Deps, field: IntegrationField, value: string): Promise<void> {
  try {
    await checkOutboundUrl(value, await outboundOptions(deps, 'web_hooks_and_services'));
  } catch (error) {
    if (error instanceof OutboundError) {
      throw validationError({ [field.name]: [`is blocked: ${error.message}`] }, 422);
    }
    throw error;
  }
}

/**
 * Creates or edits a project's integration of `kind` and makes it active unless `active` is false (GitLab's PUT).
 * Required settings must be given unless already stored (a PUT without a secret keeps it);
 * URLs, e-mail lists and enumerations are checked; a delivery target the outbound guard refuses
 * is a 422 naming the field.
 */
export async function saveIntegration(
  deps: Deps,
  project: Project,
  kind: IntegrationKind,
  params: Record<string, unknown>,
): Promise<Integration> {
  const existing = await findIntegration(deps, project.id, kind.slug);
  const properties: Record<string, unknown> = { ...(existing?.properties ?? {}) };
  const secrets: Record<string, string> = { ...(existing?.sealed_secrets ?? {}) };
  const stored = (field: IntegrationField) =>
    field.secret ? secrets[field.name] !== undefined : !isBlank(properties[field.name]);

  const missing = kind.fields
    // A required setting may be left out when stored; sent empty, it is missing (a blank secret keeps the stored one).
    .filter((f) => f.required && isBlank(params[f.name]) && (!stored(f) || (params[f.name] === '' && !f.secret)))
    .map((f) => `${f.name} is missing`);
  if (missing.length > 0) throw paramError(missing);

  const problems: Record<string, string[]> = {};
  for (const field of kind.fields) {
    const value = params[field.name];
    if (value === undefined || value === null) continue;
    if (typeof value === 'string' && value !== '') {
      if ((field.url || field.target) && !isHttpUrl(value)) problems[field.name] = ['must be a valid URL'];
      if (field.emails) {
        const bad = splitEmails(value).filter((e) => !EMAIL.test(e));
        if (bad.length > 0) problems[field.name] = [`contains invalid email addresses: ${bad.join(', ')}`];
      }
    }
  }
  if (Object.keys(problems).length > 0) throw validationError(problems);
  for (const field of kind.fields) {
    const value = params[field.name];
    if (field.target && typeof value === 'string' && value !== '') await checkTarget(deps, field, value);
  }

  for (const field of kind.fields) {
    const value = params[field.name];
    if (value === undefined || value === null) continue;
    if (field.secret) {
      // A blank secret keeps the stored one, as GitLab's forms do.
      if (value !== '') secrets[field.name] = sealWith(deps, String(value));
    } else {
      properties[field.name] = value;
    }
  }
  const events: Record<string, boolean> = { ...(existing?.events ?? {}) };
  for (const flag of eventFlagsOf(kind)) {
    if (typeof params[flag] === 'boolean') events[flag] = params[flag] as boolean;
  }

  const now = deps.clock.now();
  const values = {
    // GitLab's PUT activates the integration; `active: false` (the spec's issue trackers) keeps it off.
    active: params.active !== false,
    properties: JSON.stringify(properties),
    sealed_secrets: JSON.stringify(secrets),
    events: JSON.stringify(events),
    updated_at: now,
  };
  if (existing) {
    return deps.db
      .updateTable('integrations')
      .set(values)
      .where('id', '=', existing.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }
  return deps.db
    .insertInto('integrations')
    .values({ project_id: project.id, slug: kind.slug, created_at: now, ...values })
    .onConflict((oc) => oc.columns(['project_id', 'slug']).doUpdateSet(values))
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Turns an integration off and forgets its settings, secrets and event choices (GitLab's
 * DELETE resets every field to its default and sets `active` false). Nothing to do when none.
 */
export async function disableIntegration(deps: Deps, projectId: number, slug: string): Promise<void> {
  await deps.db
    .updateTable('integrations')
    .set({
      active: false,
      properties: JSON.stringify({}),
      sealed_secrets: JSON.stringify({}),
      events: JSON.stringify({}),
      updated_at: deps.clock.now(),
    })
    .where('project_id', '=', projectId)
    .where('slug', '=', slug)
    .execute();
}

/** Whether the integration listens to `flag`: its choice, else the kind's default; never for events it has not. */
export function eventEnabled(kind: IntegrationKind, integration: Integration, flag: string): boolean {
  if (!(eventFlagsOf(kind) as string[]).includes(flag)) return false;
  const chosen = integration.events[flag];
  return typeof chosen === 'boolean' ? chosen : EVENT_DEFAULTS[flag as EventFlag];
}

/** Every event flag as the response shows it. */
export function eventFlagValues(kind: IntegrationKind, integration: Integration): Record<string, boolean> {
  return Object.fromEntries(RESPONSE_EVENT_FLAGS.map((flag) => [flag, eventEnabled(kind, integration, flag)]));
}

/** A non-secret setting's value: the stored one, else the kind's default, else null. */
export function settingValue(kind: IntegrationKind, integration: Integration, name: string): unknown {
  const value = integration.properties[name];
  if (value !== undefined && value !== null) return value;
  return kind.fields.find((f) => f.name === name)?.default ?? null;
}

/** Every setting, secrets opened: for delivery only, never for a response. */
export function settingsForDelivery(
  deps: Deps,
  kind: IntegrationKind,
  integration: Integration,
): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const field of kind.fields) {
    if (field.secret) {
      const sealed = integration.sealed_secrets[field.name];
      settings[field.name] = sealed ? openWith(deps, sealed) : null;
    } else {
      settings[field.name] = settingValue(kind, integration, field.name);
    }
  }
  return settings;
}
