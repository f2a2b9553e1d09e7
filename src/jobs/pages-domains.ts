import type { Deps } from '../services/deps.js';
import {
  findPagesDomainById,
  PAGES_DOMAIN_VERIFY_JOB,
  verifyPagesDomain,
  verifyPagesDomains,
} from '../services/pages-domains.js';
import { queueNextRun, type RecurringSchedule, recurringJob } from './recurring.js';
import type { JobKind } from './worker.js';

/** Every hour (GitLab checks every 15 minutes; a domain's grace period is days long). */
export const PAGES_DOMAIN_VERIFICATION_SCHEDULE: RecurringSchedule = {
  kind: 'pages_domains_verification',
  minuteUtc: 23,
};

/** Verifies the domains that need it and removes those disabled for a week. */
export const pagesDomainsVerificationJob = recurringJob(PAGES_DOMAIN_VERIFICATION_SCHEDULE, async (ctx) => {
  const result = await verifyPagesDomains(ctx.deps);
  ctx.log.info(result, 'pages domains verified');
});

/** Verifies one domain just added (its DNS lookups kept out of the request). */
export const pagesDomainVerifyJob: JobKind = {
  kind: PAGES_DOMAIN_VERIFY_JOB,
  forgetDone: true,
  async run(ctx) {
    const domain = await findPagesDomainById(ctx.deps.db, Number(ctx.job.payload.pages_domain_id));
    if (!domain) return;
    const result = await verifyPagesDomain(ctx.deps, domain);
    ctx.log.info({ domain: domain.domain, verified: result.verified }, 'pages domain verified');
  },
};

/** Queues the first run of the verification job (idempotent; called when the server starts). */
export async function schedulePagesDomainsJob(deps: Deps): Promise<void> {
  await queueNextRun(deps, PAGES_DOMAIN_VERIFICATION_SCHEDULE);
}
