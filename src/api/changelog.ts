import { z } from 'zod';
import { DEFAULT_TRAILER } from '../changelog/commits.js';
import { DEFAULT_CONFIG_FILE } from '../changelog/config.js';
import { ChangelogError } from '../changelog/errors.js';
import { isValidRepoPath } from '../git/validate.js';
import type { AppContext } from '../http/context.js';
import { ApiError, forbidden } from '../http/errors.js';
import { p } from '../http/params.js';
import { checkRateLimit, type RateLimit } from '../http/rate-limit.js';
import type { ApiRouter } from '../http/route.js';
import type { ZonedTime } from '../lib/strftime.js';
import { presentChangelog } from '../presenters/changelog.js';
import { type ChangelogRequest, commitChangelog, defaultBranchOf, generateChangelog } from '../services/changelog.js';
import { canPushToBranch } from '../services/protected-branches.js';
import { type LoadedRepository, loadRepository } from './helpers.js';

/** GitLab's `project_repositories_changelog` limit, per user and project. */
export const CHANGELOG_RATE_LIMIT: RateLimit = {
  name: 'project_repositories_changelog',
  threshold: 5,
  periodSeconds: 60,
  message: 'This changelog has been requested too many times. Try again later.',
};

// Gitlab::Regex.unbounded_semver_regex: the version must contain a semantic version somewhere.
const NUM = '(?:0|[1-9]\\d*)';
const IDENT = '(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)';
const UNBOUNDED_SEMVER = new RegExp(
  `${NUM}\\.${NUM}\\.${NUM}(?:-${IDENT}(?:\\.${IDENT})*)?(?:\\+[0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*)?`,
);

const ISO_DATE =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/** An ISO 8601 date or date-time with its offset kept (a bare date is midnight at +00:00). */
export function parseReleaseDate(text: string): ZonedTime | null {
  const m = ISO_DATE.exec(text.trim());
  if (!m) return null;
  const [, y, mo, d, h = '0', mi = '0', s = '0', frac = '0', zone = 'Z'] = m;
  let offsetMinutes = 0;
  if (zone.toUpperCase() !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || '0'));
  }
  const wall = Date.UTC(
    Number(y),
    Number(mo) - 1,
    Number(d),
    Number(h),
    Number(mi),
    Number(s),
    Number(frac.padEnd(3, '0').slice(0, 3)),
  );
  const check = new Date(wall);
  if (
    Number.isNaN(wall) ||
    check.getUTCMonth() !== Number(mo) - 1 ||
    check.getUTCDate() !== Number(d) ||
    Number(h) > 23 ||
    Number(mi) > 59 ||
    Number(s) > 60
  ) {
    return null;
  }
  return { epochMs: wall - offsetMinutes * 60_000, offsetMinutes };
}

const releaseParams = {
  id: p.string(),
  version: p.string().refine((v) => UNBOUNDED_SEMVER.test(v), { message: 'is invalid' }),
  from: p.string().optional(),
  to: p.string().optional(),
  date: p
    .string()
    .refine((v) => parseReleaseDate(v) !== null, { message: 'is invalid' })
    .transform((v) => parseReleaseDate(v) as ZonedTime)
    .optional(),
  trailer: p.string().default(DEFAULT_TRAILER),
  config_file: p.string().default(DEFAULT_CONFIG_FILE),
  /** Newer GitLab: read the config file at this ref instead of the default branch. */
  config_file_ref: p.string().optional(),
};

const showParams = z.object(releaseParams);

const commitParams = z.object({
  ...releaseParams,
  branch: p.string().optional(),
  file: p
    .string()
    .refine((v) => isValidRepoPath(v), { message: 'is invalid' })
    .default('CHANGELOG.md'),
  message: p.string().optional(),
});

function changelogRequest(params: z.infer<typeof showParams>): ChangelogRequest {
  return {
    version: params.version,
    from: params.from,
    to: params.to,
    date: params.date,
    trailer: params.trailer,
    configFile: params.config_file,
    configFileRef: params.config_file_ref,
  };
}

/** GitLab answers every changelog failure with 422 and this prefix. */
async function asChangelogFailure<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ChangelogError) {
      throw new ApiError(422, { message: `Failed to generate the changelog: ${error.message}` });
    }
    throw error;
  }
}

async function limitRate(ctx: AppContext, loaded: LoadedRepository): Promise<void> {
  const user = ctx.state.actor.user;
  await checkRateLimit(ctx, CHANGELOG_RATE_LIMIT, [user ? user.id : 'anonymous', loaded.project.id]);
}

/** Changelog generation (lib/api/repositories.rb): GET returns the section, POST commits it. */
export function registerChangelogRoutes(api: ApiRouter): void {
  api.get(
    '/projects/:id/repository/changelog',
    { summary: 'Generate a changelog section and return it', params: showParams },
    async (ctx, params) => {
      const loaded = await loadRepository(ctx, params.id);
      await limitRate(ctx, loaded);
      const subject = { ...loaded, user: ctx.state.actor.user };
      const notes = await asChangelogFailure(() =>
        generateChangelog(ctx.state.deps, subject, changelogRequest(params)),
      );
      ctx.body = presentChangelog(notes);
    },
  );

  api.post(
    '/projects/:id/repository/changelog',
    { summary: 'Generate a changelog section and commit it into the changelog file', params: commitParams },
    async (ctx, params) => {
      const loaded = await loadRepository(ctx, params.id);
      await limitRate(ctx, loaded);
      const branch = params.branch ?? defaultBranchOf(loaded.project);
      const user = ctx.state.actor.user;
      if (!user || !(await canPushToBranch(ctx.state.deps, loaded.project, loaded.policy, branch))) {
        throw forbidden('You are not allowed to commit a changelog on this branch');
      }
      await asChangelogFailure(() =>
        commitChangelog(
          ctx.state.deps,
          { ...loaded, user },
          {
            ...changelogRequest(params),
            branch,
            file: params.file,
            message: params.message,
          },
        ),
      );
      // GitLab's handler ends in `status(200)`, whose value Grape renders as the body.
      ctx.status = 200;
      ctx.type = 'application/json';
      ctx.body = '200';
    },
  );
}
