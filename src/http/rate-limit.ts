import { sql } from 'kysely';
import type { Deps } from '../services/deps.js';
import type { AppContext } from './context.js';
import { tooManyRequests } from './errors.js';

/** A fixed-window limit, as GitLab's ApplicationRateLimiter and Rack::Attack count. */
export interface RateLimit {
  /** GitLab's key, sent as `RateLimit-Name`. */
  name: string;
  threshold: number;
  periodSeconds: number;
  /** The 429 body's `message.error`. */
  message: string;
}

/** Application setting that overrides thresholds: `{"<name>": <requests per period>}`. */
export const RATE_LIMITS_SETTING = 'rate_limits';

export const ARCHIVE_RATE_LIMIT: RateLimit = {
  name: 'project_repositories_archive',
  threshold: 5,
  periodSeconds: 60,
  message: 'This archive has been requested too many times. Try again later.',
};

/** Above this size a file's or blob's JSON (base64) answer counts against large_blob_download. */
export const LARGE_BLOB_BYTES = 10 * 1024 * 1024;

/**
 * GitLab's `large_blob_download` limit for the files API (lib/api/helpers/blob_helpers.rb),
 * scoped to the project. The size in the message is Ruby's `10.megabytes`, an integer.
 */
export const LARGE_FILE_RATE_LIMIT: RateLimit = {
  name: 'large_blob_download',
  threshold: 5,
  periodSeconds: 60,
  message:
    `The requested blob is over the threshold size of ${LARGE_BLOB_BYTES}.\n` +
    "Access this blob using '/projects/:id/repository/files/:file_path/raw' to avoid this error.\n",
};

/** The same limit (one counter per project) for the blobs API, pointing at the raw blob. */
export const LARGE_BLOB_RATE_LIMIT: RateLimit = {
  ...LARGE_FILE_RATE_LIMIT,
  message:
    `The requested blob is over the threshold size of ${LARGE_BLOB_BYTES}.\n` +
    "Access this blob using '/projects/:id/repository/blobs/:sha/raw' to avoid this error.\n",
};

/** GitLab lets anonymous callers of the archive endpoint share a threshold of 100 per project. */
export const ANONYMOUS_ARCHIVE_THRESHOLD = 100;

async function configuredThreshold(deps: Deps, limit: RateLimit): Promise<number> {
  const row = await deps.db
    .selectFrom('application_settings')
    .select('value')
    .where('key', '=', RATE_LIMITS_SETTING)
    .executeTakeFirst();
  const value = (row?.value as Record<string, unknown> | undefined)?.[limit.name];
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : limit.threshold;
}

/**
 * Counts one request against `limit` for `scope` and sets GitLab's `RateLimit-*` headers; over
 * the threshold it throws 429 with `Retry-After` and `RateLimit-ResetTime`. A threshold of 0
 * disables the limit. The counter lives in the database, so every server process shares it.
 */
export async function checkRateLimit(
  ctx: AppContext,
  limit: RateLimit,
  scope: readonly (string | number)[],
  threshold?: number,
): Promise<void> {
  const deps = ctx.state.deps;
  const allowed = threshold ?? (await configuredThreshold(deps, limit));
  if (allowed === 0) return;
  const now = Math.floor(deps.clock.now().getTime() / 1000);
  const windowStart = now - (now % limit.periodSeconds);
  const key = `${limit.name}:${scope.join(':')}`;
  const { rows } = await sql<{ hits: number }>`
    INSERT INTO rate_limit_counters (key, window_started_at, hits)
    VALUES (${key}, ${new Date(windowStart * 1000)}, 1)
    ON CONFLICT (key) DO UPDATE SET
      hits = CASE WHEN rate_limit_counters.window_started_at = excluded.window_started_at
                  THEN rate_limit_counters.hits + 1 ELSE 1 END,
      window_started_at = excluded.window_started_at
    RETURNING hits`.execute(deps.db);
  const observed = Number(rows[0]?.hits ?? 1);
  const retryAfter = limit.periodSeconds - (now % limit.periodSeconds);
  const reset = new Date((now + retryAfter) * 1000);
  const headers: Record<string, string> = {
    'RateLimit-Name': limit.name,
    'RateLimit-Limit': String(Math.ceil((allowed * 60) / limit.periodSeconds)),
    'RateLimit-Observed': String(observed),
    'RateLimit-Remaining': String(Math.max(allowed - observed, 0)),
    'RateLimit-Reset': String(now + retryAfter),
  };
  if (observed > allowed) {
    throw tooManyRequests(limit.message, retryAfter, { ...headers, 'RateLimit-ResetTime': reset.toUTCString() });
  }
  ctx.set(headers);
}
