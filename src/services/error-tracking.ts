import { createHash, randomBytes } from 'node:crypto';
import { gunzipSync, inflateSync } from 'node:zlib';
import type { Db } from '../db/database.js';
import type { ErrorTrackingClientKey, ErrorTrackingError, ErrorTrackingSetting } from '../db/schema.js';
import { badRequestMessage } from '../http/errors.js';
import type { Deps } from './deps.js';

/**
 * Integrated error tracking (GitLab's lib/api/error_tracking/ and ErrorTracking::* models): a
 * project's settings, client keys, and the collector error SDKs send events to.
 */

/** GitLab's client key prefix (ErrorTracking::ClientKey). */
const PUBLIC_KEY_PREFIX = 'glet_';

export async function findErrorTrackingSetting(db: Db, projectId: number): Promise<ErrorTrackingSetting | undefined> {
  return db.selectFrom('error_tracking_settings').selectAll().where('project_id', '=', projectId).executeTakeFirst();
}

/** Creates or changes a project's settings (GitLab's PUT; PATCH changes existing ones only). */
export async function saveErrorTrackingSetting(
  deps: Deps,
  projectId: number,
  change: { enabled: boolean; integrated?: boolean },
): Promise<ErrorTrackingSetting> {
  const now = deps.clock.now();
  return deps.db
    .insertInto('error_tracking_settings')
    .values({
      project_id: projectId,
      enabled: change.enabled,
      integrated: change.integrated ?? true,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) =>
      oc.column('project_id').doUpdateSet({
        enabled: change.enabled,
        ...(change.integrated === undefined ? {} : { integrated: change.integrated }),
        updated_at: now,
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** GitLab's `sentry_external_url`: the issues page of the external backend, from its API URL. */
export function externalUrl(setting: ErrorTrackingSetting): string | null {
  if (!setting.api_url) return null;
  return setting.api_url.replace(/\/api\/0\/projects\/?/, '/');
}

export async function listClientKeys(db: Db, projectId: number, window: { limit: number; offset: number }) {
  return db
    .selectFrom('error_tracking_client_keys')
    .selectAll()
    .where('project_id', '=', projectId)
    .orderBy('id')
    .limit(window.limit)
    .offset(window.offset)
    .execute();
}

export async function countClientKeys(db: Db, projectId: number, limit: number): Promise<number> {
  const rows = await db
    .selectFrom('error_tracking_client_keys')
    .select('id')
    .where('project_id', '=', projectId)
    .limit(limit)
    .execute();
  return rows.length;
}

export async function createClientKey(deps: Deps, projectId: number): Promise<ErrorTrackingClientKey> {
  const now = deps.clock.now();
  return deps.db
    .insertInto('error_tracking_client_keys')
    .values({
      project_id: projectId,
      public_key: `${PUBLIC_KEY_PREFIX}${randomBytes(16).toString('hex')}`,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Removes a project's key; undefined when the project has no such key. */
export async function deleteClientKey(
  db: Db,
  projectId: number,
  keyId: number,
): Promise<ErrorTrackingClientKey | undefined> {
  return db
    .deleteFrom('error_tracking_client_keys')
    .where('project_id', '=', projectId)
    .where('id', '=', keyId)
    .returningAll()
    .executeTakeFirst();
}

/** GitLab's DSN for a key: `<scheme>://<public key>@<host>/api/v4/error_tracking/collector/<project id>`. */
export function clientKeyDsn(baseUrl: string, key: ErrorTrackingClientKey): string {
  const url = new URL(baseUrl);
  const root = url.pathname.replace(/\/+$/, '');
  return `${url.protocol}//${key.public_key}@${url.host}${root}/api/v4/error_tracking/collector/${key.project_id}`;
}

/** Whether the collector takes events for the project: integrated on and enabled, and the key active. */
export async function collectorAccepts(db: Db, projectId: number, publicKey: string | undefined): Promise<boolean> {
  if (!publicKey) return false;
  const row = await db
    .selectFrom('error_tracking_settings as s')
    .innerJoin('error_tracking_client_keys as k', 'k.project_id', 's.project_id')
    .select('k.id')
    .where('s.project_id', '=', projectId)
    .where('s.enabled', '=', true)
    .where('s.integrated', '=', true)
    .where('k.active', '=', true)
    .where('k.public_key', '=', publicKey)
    .executeTakeFirst();
  return row !== undefined;
}

/** The public key of a collector request: `sentry_key` in the query, or the `X-Sentry-Auth` header. */
export function requestPublicKey(query: Record<string, unknown>, authHeader: string | undefined): string | undefined {
  if (typeof query.sentry_key === 'string' && query.sentry_key !== '') return query.sentry_key;
  if (!authHeader) return undefined;
  const match = /(?:^|[\s,])sentry_key=([^,\s]+)/.exec(authHeader.replace(/^Sentry\s+/i, ' '));
  if (!match) throw badRequestMessage('Failed to parse sentry request');
  return match[1];
}

/** The body as bytes, inflated when the SDK compressed it. */
export function decodeBody(body: Buffer, encoding: string | undefined): Buffer {
  try {
    if (encoding === 'gzip') return gunzipSync(body);
    if (encoding === 'deflate') return inflateSync(body);
  } catch {
    throw badRequestMessage('Failed to parse sentry request');
  }
  return body;
}

export interface EnvelopeItem {
  type: string;
  payload: Buffer;
}

/**
 * Splits an envelope (a header line, then items: a header line and a payload, its `length`
 * bytes when given, else up to the next newline).
 */
export function parseEnvelope(body: Buffer): EnvelopeItem[] {
  const items: EnvelopeItem[] = [];
  const lineEnd = (from: number) => {
    const at = body.indexOf(0x0a, from);
    return at === -1 ? body.length : at;
  };
  let at = lineEnd(0);
  JSON.parse(body.subarray(0, at).toString('utf8'));
  at += 1;
  while (at < body.length) {
    const end = lineEnd(at);
    const headerText = body.subarray(at, end).toString('utf8').trim();
    at = end + 1;
    if (headerText === '') continue;
    const header = JSON.parse(headerText) as { type?: unknown; length?: unknown };
    if (typeof header.type !== 'string') throw new Error('item without a type');
    let payload: Buffer;
    if (typeof header.length === 'number' && Number.isInteger(header.length) && header.length >= 0) {
      if (at + header.length > body.length) throw new Error('short item');
      payload = body.subarray(at, at + header.length);
      at += header.length + 1;
    } else {
      const payloadEnd = lineEnd(at);
      payload = body.subarray(at, payloadEnd);
      at = payloadEnd + 1;
    }
    items.push({ type: header.type, payload });
  }
  return items;
}

type Event = Record<string, unknown>;
interface ExceptionValue {
  type?: unknown;
  value?: unknown;
  stacktrace?: { frames?: { function?: unknown; module?: unknown }[] };
}

const firstException = (event: Event): ExceptionValue | undefined =>
  ((event.exception as { values?: ExceptionValue[] } | undefined)?.values ?? [])[0];

/** GitLab's PayloadValidator, in short: an event with an exception of a named type. */
export function validEvent(event: unknown): event is Event {
  if (!event || typeof event !== 'object' || Array.isArray(event)) return false;
  const values = (event as { exception?: { values?: unknown } }).exception?.values;
  if (!Array.isArray(values) || values.length === 0) return false;
  const first = values[0] as ExceptionValue;
  return typeof first === 'object' && first !== null && typeof first.type === 'string';
}

/** What raised it: the event's transaction, or `function(module)` of the last stack frame. */
function actorOf(event: Event, exception: ExceptionValue): string {
  if (typeof event.transaction === 'string' && event.transaction !== '') return event.transaction;
  const frame = exception.stacktrace?.frames?.at(-1);
  if (!frame) return '';
  return `${String(frame.function ?? '')}(${String(frame.module ?? '')})`;
}

/** The event's time: an ISO string or seconds since the epoch; now when absent or unreadable. */
function timestampOf(event: Event, now: Date): Date {
  const value = event.timestamp;
  if (typeof value === 'number') return new Date(value * 1000);
  if (typeof value === 'string') {
    const parsed = /^\d+(\.\d+)?$/.test(value) ? new Date(Number(value) * 1000) : new Date(value);
    if (!Number.isNaN(parsed.getTime())) return parsed;
  }
  return now;
}

/** GitLab's CollectErrorService: the error its type, value, actor and platform name, and the event. */
export async function collectError(deps: Deps, projectId: number, event: Event): Promise<void> {
  const exception = firstException(event) as ExceptionValue;
  const name = String(exception.type);
  const description = typeof exception.value === 'string' ? exception.value : '';
  const actor = actorOf(event, exception);
  const platform = typeof event.platform === 'string' ? event.platform : null;
  const at = timestampOf(event, deps.clock.now());
  const fingerprint = createHash('sha1')
    .update([name, description, actor, platform ?? ''].join('\0'))
    .digest('hex');
  await deps.db.transaction().execute(async (tx) => {
    const error = await tx
      .insertInto('error_tracking_errors')
      .values({
        project_id: projectId,
        fingerprint,
        name,
        description,
        actor,
        platform,
        first_seen_at: at,
        last_seen_at: at,
        events_count: 1,
      })
      .onConflict((oc) =>
        oc.columns(['project_id', 'fingerprint']).doUpdateSet((eb) => ({
          events_count: eb('error_tracking_errors.events_count', '+', 1),
          last_seen_at: eb.fn('greatest', ['error_tracking_errors.last_seen_at', eb.val(at)]),
          first_seen_at: eb.fn('least', ['error_tracking_errors.first_seen_at', eb.val(at)]),
        })),
      )
      .returning('id')
      .executeTakeFirstOrThrow();
    await tx
      .insertInto('error_tracking_error_events')
      .values({
        error_id: error.id,
        description,
        environment: typeof event.environment === 'string' ? event.environment : null,
        level: typeof event.level === 'string' ? event.level : null,
        occurred_at: at,
        payload: JSON.stringify(event),
      })
      .execute();
  });
}

export interface ErrorWithLatest extends ErrorTrackingError {
  latest: Record<string, unknown> | null;
}

/** A project's errors, the most recently seen first, each with its latest event. */
export async function listProjectErrors(db: Db, projectId: number, limit = 100): Promise<ErrorWithLatest[]> {
  const errors = await db
    .selectFrom('error_tracking_errors')
    .selectAll()
    .where('project_id', '=', projectId)
    .orderBy('last_seen_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  const result: ErrorWithLatest[] = [];
  for (const error of errors) {
    const latest = await db
      .selectFrom('error_tracking_error_events')
      .select('payload')
      .where('error_id', '=', error.id)
      .orderBy('occurred_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    result.push({ ...error, latest: (latest?.payload as Record<string, unknown> | undefined) ?? null });
  }
  return result;
}
