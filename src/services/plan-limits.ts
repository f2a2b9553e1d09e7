import { type AuditActor, type AuditChange, recordAuditEvents } from './audit-events.js';
import { cachedLookup, type Deps } from './deps.js';
import { Validation } from './errors.js';

/** GitLab's plan names (Plan::ALL_PLANS: the free edition's `default` and the paid edition's). */
export const PLAN_NAMES = [
  'default',
  'free',
  'bronze',
  'silver',
  'premium',
  'gold',
  'ultimate',
  'ultimate_trial',
  'premium_trial',
  'opensource',
] as const;
export type PlanName = (typeof PLAN_NAMES)[number];

/** The eight package file size limits (bytes) with GitLab's defaults. */
export const PLAN_LIMIT_DEFAULTS = {
  conan_max_file_size: 3221225472,
  generic_packages_max_file_size: 5368709120,
  helm_max_file_size: 5242880,
  maven_max_file_size: 3221225472,
  npm_max_file_size: 524288000,
  nuget_max_file_size: 524288000,
  pypi_max_file_size: 3221225472,
  terraform_module_max_file_size: 1073741824,
} as const;
export type PlanLimitName = keyof typeof PLAN_LIMIT_DEFAULTS;
export const PLAN_LIMIT_NAMES = Object.keys(PLAN_LIMIT_DEFAULTS) as PlanLimitName[];
export type PlanLimits = Record<PlanLimitName, number>;

/** A plan's limits (its defaults until an administrator changes them), cached in process. */
export async function getPlanLimits(deps: Deps, plan: PlanName): Promise<PlanLimits> {
  return (await cachedLookup(deps, 'planLimits', plan, async () => {
    const row = await deps.db.selectFrom('plan_limits').selectAll().where('plan_name', '=', plan).executeTakeFirst();
    const limits = { ...PLAN_LIMIT_DEFAULTS } as PlanLimits;
    for (const name of PLAN_LIMIT_NAMES) if (row) limits[name] = Number(row[name]);
    return limits;
  })) as PlanLimits;
}

/** Changes a plan's limits (integers ≥ 0, else 400 `{"message": {...}}`), audited per attribute. */
export async function updatePlanLimits(
  deps: Deps,
  actor: AuditActor,
  plan: PlanName,
  change: Partial<PlanLimits>,
): Promise<void> {
  const errors = new Validation();
  for (const name of PLAN_LIMIT_NAMES) {
    const value = change[name];
    if (value !== undefined && value < 0) errors.add(name, 'must be greater than or equal to 0');
  }
  errors.throwIfAny();
  await deps.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('plan_limits')
      .values({ plan_name: plan })
      .onConflict((oc) => oc.doNothing())
      .execute();
    const row = await trx
      .selectFrom('plan_limits')
      .selectAll()
      .where('plan_name', '=', plan)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const changes: AuditChange[] = [];
    const set: Partial<PlanLimits> = {};
    for (const name of PLAN_LIMIT_NAMES) {
      const value = change[name];
      if (value === undefined || Number(row[name]) === value) continue;
      set[name] = value;
      changes.push({ change: name, from: Number(row[name]), to: value });
    }
    if (changes.length === 0) return;
    const now = deps.clock.now();
    await trx
      .updateTable('plan_limits')
      .set({ ...set, updated_at: now })
      .where('plan_name', '=', plan)
      .execute();
    await recordAuditEvents(trx, now, actor, {
      entityId: 1,
      entityType: 'Gitlab::Audit::InstanceScope',
      eventName: 'plan_limits_updated',
      targetType: 'PlanLimits',
      targetId: plan,
      targetDetails: plan,
      changes,
    });
  });
}
