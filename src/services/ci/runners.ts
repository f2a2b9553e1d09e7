import { type Expression, type SqlBool, sql } from 'kysely';
import { activeMembership } from '../../db/queries/access.js';
import type { Namespace, Project, RegistrationScope, Runner, RunnerType, User } from '../../db/schema.js';
import { digestToken, generateToken } from '../../lib/crypto.js';
import { instanceKey, openSecret, sealSecret } from '../../lib/secret-box.js';
import { AccessLevel } from '../../policies/access-levels.js';
import { type Deps, today } from '../deps.js';

/**
 * CI runners (GitLab's app/models/ci/runner.rb and lib/api/ci/runners.rb): registration with a
 * scope's registration token, authentication tokens, status, and who owns which runner.
 */

/** GitLab's runner authentication token prefix. */
export const RUNNER_TOKEN_PREFIX = 'glrt-';
/** GitLab's registration token prefix (RunnersTokenPrefixable). */
export const REGISTRATION_TOKEN_PREFIX = 'GR1348941';
/** A runner that asked for jobs within this many seconds is online (Ci::Runner::ONLINE_CONTACT_TIMEOUT). */
export const ONLINE_CONTACT_TIMEOUT_SECONDS = 2 * 60 * 60;
/** contacted_at and the runner's info are written at most this often (GitLab caches them too). */
export const CONTACT_UPDATE_EVERY_SECONDS = 60;

export type RunnerStatus = 'online' | 'offline' | 'paused' | 'not_connected';

export interface RegistrationTarget {
  scope: RegistrationScope;
  scopeId: number;
}

/** A new registration token for the instance, a group or a project (the old one stops working). */
export async function resetRegistrationToken(deps: Deps, target: RegistrationTarget): Promise<string> {
  const token = generateToken(REGISTRATION_TOKEN_PREFIX);
  const values = {
    token_digest: digestToken(token),
    token_sealed: sealSecret(secretKey(deps), token),
    created_at: deps.clock.now(),
  };
  await deps.db
    .insertInto('ci_registration_tokens')
    .values({ scope: target.scope, scope_id: target.scopeId, ...values })
    .onConflict((oc) => oc.columns(['scope', 'scope_id']).doUpdateSet(values))
    .execute();
  return token;
}

const secretKey = (deps: Deps) => instanceKey(deps.config.storageDir, deps.config.secretKey);

/**
 * The registration tokens of some groups or projects, made on first read as GitLab's
 * ensure_runners_token does (GitLab shows them as `runners_token` to those who administer them).
 */
export async function registrationTokens(
  deps: Deps,
  scope: RegistrationScope,
  ids: number[],
): Promise<Map<number, string>> {
  const tokens = new Map<number, string>();
  if (ids.length === 0) return tokens;
  const rows = await deps.db
    .selectFrom('ci_registration_tokens')
    .select(['scope_id', 'token_sealed'])
    .where('scope', '=', scope)
    .where('scope_id', 'in', ids)
    .execute();
  for (const row of rows) {
    try {
      tokens.set(row.scope_id, openSecret(secretKey(deps), row.token_sealed));
    } catch {
      // Sealed under another instance key: a new token replaces it below.
    }
  }
  for (const id of ids) {
    if (!tokens.has(id)) tokens.set(id, await resetRegistrationToken(deps, { scope, scopeId: id }));
  }
  return tokens;
}

export interface RunnerInfo {
  name?: string | undefined;
  version?: string | undefined;
  revision?: string | undefined;
  platform?: string | undefined;
  architecture?: string | undefined;
}

export interface RegisterInput {
  token: string;
  description?: string | undefined;
  info?: RunnerInfo | undefined;
  active?: boolean | undefined;
  paused?: boolean | undefined;
  locked?: boolean | undefined;
  run_untagged?: boolean | undefined;
  tag_list?: string[] | undefined;
  access_level?: string | undefined;
  maximum_timeout?: number | undefined;
}

const RUNNER_TYPE_OF: Record<RegistrationScope, RunnerType> = {
  instance: 'instance_type',
  group: 'group_type',
  project: 'project_type',
};

/** Registers a runner; undefined when the registration token is unknown (GitLab's 403). */
export async function registerRunner(
  deps: Deps,
  input: RegisterInput,
  ipAddress: string | null,
): Promise<{ runner: Runner; token: string } | undefined> {
  const registration = await deps.db
    .selectFrom('ci_registration_tokens')
    .selectAll()
    .where('token_digest', '=', digestToken(input.token))
    .executeTakeFirst();
  if (!registration) return undefined;
  const token = generateToken(RUNNER_TOKEN_PREFIX);
  const now = deps.clock.now();
  const info = input.info ?? {};
  const runner = await deps.db.transaction().execute(async (tx) => {
    const row = await tx
      .insertInto('ci_runners')
      .values({
        runner_type: RUNNER_TYPE_OF[registration.scope],
        token_digest: digestToken(token),
        description: input.description ?? '',
        active: input.paused !== undefined ? !input.paused : (input.active ?? true),
        locked: input.locked ?? false,
        run_untagged: input.run_untagged ?? true,
        access_level: input.access_level ?? 'not_protected',
        maximum_timeout: input.maximum_timeout ?? null,
        tag_list: normaliseTags(input.tag_list ?? []),
        name: info.name ?? null,
        version: info.version ?? null,
        revision: info.revision ?? null,
        platform: info.platform ?? null,
        architecture: info.architecture ?? null,
        ip_address: ipAddress,
        created_at: now,
        updated_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    if (registration.scope === 'project') {
      await tx
        .insertInto('ci_runner_projects')
        .values({ runner_id: row.id, project_id: registration.scope_id, created_at: now })
        .execute();
    } else if (registration.scope === 'group') {
      await tx
        .insertInto('ci_runner_namespaces')
        .values({ runner_id: row.id, namespace_id: registration.scope_id })
        .execute();
    }
    return row;
  });
  return { runner, token };
}

/** Tags as GitLab keeps them: trimmed, without blanks or repeats. */
export function normaliseTags(tags: string[]): string[] {
  return [...new Set(tags.map((t) => t.trim()).filter((t) => t !== ''))];
}

/** The runner an authentication token belongs to. */
export async function findRunnerByToken(deps: Deps, token: string): Promise<Runner | undefined> {
  if (!token.startsWith(RUNNER_TOKEN_PREFIX)) return undefined;
  return deps.db.selectFrom('ci_runners').selectAll().where('token_digest', '=', digestToken(token)).executeTakeFirst();
}

export async function findRunner(deps: Deps, id: number): Promise<Runner | undefined> {
  return deps.db.selectFrom('ci_runners').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Records that the runner called (its address and `info`), at most once a minute. */
export async function touchRunner(
  deps: Deps,
  runner: Runner,
  ipAddress: string | null,
  info: RunnerInfo,
): Promise<void> {
  const now = deps.clock.now();
  const changedInfo =
    (info.version !== undefined && info.version !== runner.version) ||
    (info.name !== undefined && info.name !== runner.name) ||
    (info.revision !== undefined && info.revision !== runner.revision) ||
    (info.platform !== undefined && info.platform !== runner.platform) ||
    (info.architecture !== undefined && info.architecture !== runner.architecture) ||
    (ipAddress !== null && ipAddress !== runner.ip_address);
  const stale =
    !runner.contacted_at || now.getTime() - runner.contacted_at.getTime() > CONTACT_UPDATE_EVERY_SECONDS * 1000;
  if (!changedInfo && !stale) return;
  await deps.db
    .updateTable('ci_runners')
    .set({
      contacted_at: now,
      ...(ipAddress !== null ? { ip_address: ipAddress } : {}),
      ...(info.name !== undefined ? { name: info.name } : {}),
      ...(info.version !== undefined ? { version: info.version } : {}),
      ...(info.revision !== undefined ? { revision: info.revision } : {}),
      ...(info.platform !== undefined ? { platform: info.platform } : {}),
      ...(info.architecture !== undefined ? { architecture: info.architecture } : {}),
    })
    .where('id', '=', runner.id)
    .execute();
}

/** GitLab's status: never contacted, paused, then online within the contact timeout. */
export function runnerStatus(runner: Runner, now: Date): RunnerStatus {
  if (!runner.contacted_at) return 'not_connected';
  if (!runner.active) return 'paused';
  return runnerOnline(runner, now) ? 'online' : 'offline';
}

export function runnerOnline(runner: Runner, now: Date): boolean | null {
  if (!runner.contacted_at) return null;
  return now.getTime() - runner.contacted_at.getTime() < ONLINE_CONTACT_TIMEOUT_SECONDS * 1000;
}

/** SQL: runners user `userId` owns (maintainer of one of its projects or of its group). */
export function ownedByUser(userId: number, date: string): Expression<SqlBool> {
  const active = activeMembership(date);
  return sql<SqlBool>`(EXISTS (
      SELECT 1 FROM ci_runner_projects rp JOIN projects p ON p.id = rp.project_id
      JOIN namespaces ns ON ns.id = p.namespace_id
      WHERE rp.runner_id = r.id AND COALESCE((SELECT max(m.access_level) FROM members m
        WHERE m.user_id = ${userId} AND ${active}
          AND ((m.source_type = 'project' AND m.source_id = p.id)
            OR (m.source_type = 'group' AND m.source_id = ANY(ns.traversal_ids)))), 0) >= ${AccessLevel.MAINTAINER})
    OR EXISTS (
      SELECT 1 FROM ci_runner_namespaces rn JOIN namespaces g ON g.id = rn.namespace_id
      WHERE rn.runner_id = r.id AND COALESCE((SELECT max(m.access_level) FROM members m
        WHERE m.user_id = ${userId} AND ${active}
          AND m.source_type = 'group' AND m.source_id = ANY(g.traversal_ids)), 0) >= ${AccessLevel.MAINTAINER}))`;
}

/** May `user` manage `runner` (GitLab's :update_runner / :read_runner for non-instance runners)? */
export async function userOwnsRunner(deps: Deps, user: User, runner: Runner): Promise<boolean> {
  if (user.admin) return true;
  const { rows } = await sql<{ ok: boolean }>`SELECT ${ownedByUser(user.id, today(deps))} AS ok
    FROM ci_runners r WHERE r.id = ${runner.id}`.execute(deps.db);
  return rows[0]?.ok === true;
}

export interface RunnerFilter {
  type?: RunnerType | undefined;
  /** active, paused, online, offline, never_contacted (also the deprecated scope values). */
  status?: string | undefined;
  tagList?: string[] | undefined;
  /** Only instance runners (`shared`) or only the others (`specific`). */
  shared?: boolean | undefined;
}

/** SQL conditions for the list filters, on alias `r`. */
function filterSql(filter: RunnerFilter, now: Date): Expression<SqlBool>[] {
  const conditions: Expression<SqlBool>[] = [];
  const onlineSince = new Date(now.getTime() - ONLINE_CONTACT_TIMEOUT_SECONDS * 1000);
  if (filter.type) conditions.push(sql<SqlBool>`r.runner_type = ${filter.type}`);
  if (filter.shared === true) conditions.push(sql<SqlBool>`r.runner_type = 'instance_type'`);
  if (filter.shared === false) conditions.push(sql<SqlBool>`r.runner_type <> 'instance_type'`);
  switch (filter.status) {
    case 'active':
      conditions.push(sql<SqlBool>`r.active`);
      break;
    case 'paused':
      conditions.push(sql<SqlBool>`NOT r.active`);
      break;
    case 'online':
      conditions.push(sql<SqlBool>`r.contacted_at > ${onlineSince}`);
      break;
    case 'offline':
      conditions.push(sql<SqlBool>`r.contacted_at <= ${onlineSince}`);
      break;
    case 'never_contacted':
      conditions.push(sql<SqlBool>`r.contacted_at IS NULL`);
      break;
  }
  if (filter.tagList && filter.tagList.length > 0) {
    conditions.push(sql<SqlBool>`r.tag_list @> ${sql.val(filter.tagList)}::text[]`);
  }
  return conditions;
}

export type RunnerScope =
  | { kind: 'all' }
  | { kind: 'owned'; userId: number }
  | { kind: 'project'; project: Project; namespace: Namespace }
  | { kind: 'group'; group: Namespace };

function scopeSql(deps: Deps, scope: RunnerScope): Expression<SqlBool> {
  switch (scope.kind) {
    case 'all':
      return sql<SqlBool>`true`;
    case 'owned':
      return ownedByUser(scope.userId, today(deps));
    case 'project':
      return sql<SqlBool>`(r.runner_type = 'instance_type'
        OR EXISTS (SELECT 1 FROM ci_runner_projects rp WHERE rp.runner_id = r.id AND rp.project_id = ${scope.project.id})
        OR EXISTS (SELECT 1 FROM ci_runner_namespaces rn WHERE rn.runner_id = r.id
          AND rn.namespace_id = ANY(${sql.val(scope.namespace.traversal_ids)}::int[])))`;
    case 'group':
      return sql<SqlBool>`(r.runner_type = 'instance_type'
        OR EXISTS (SELECT 1 FROM ci_runner_namespaces rn WHERE rn.runner_id = r.id
          AND rn.namespace_id = ANY(${sql.val(scope.group.traversal_ids)}::int[])))`;
  }
}

/** Runners of a scope with the filters, by id, one page. */
export async function listRunners(
  deps: Deps,
  scope: RunnerScope,
  filter: RunnerFilter,
  window: { limit: number; offset: number },
): Promise<Runner[]> {
  const where = sql.join([scopeSql(deps, scope), ...filterSql(filter, deps.clock.now())], sql` AND `);
  const { rows } = await sql<Runner>`SELECT r.* FROM ci_runners r WHERE ${where}
    ORDER BY r.id LIMIT ${window.limit} OFFSET ${window.offset}`.execute(deps.db);
  return rows;
}

export async function countRunners(deps: Deps, scope: RunnerScope, filter: RunnerFilter, cap: number): Promise<number> {
  const where = sql.join([scopeSql(deps, scope), ...filterSql(filter, deps.clock.now())], sql` AND `);
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM (SELECT 1 FROM ci_runners r WHERE ${where}
    LIMIT ${cap}) x`.execute(deps.db);
  return rows[0]?.n ?? 0;
}

/** Projects a runner serves, in the order they were linked. */
export async function runnerProjects(deps: Deps, runnerId: number): Promise<Project[]> {
  return deps.db
    .selectFrom('ci_runner_projects')
    .innerJoin('projects', 'projects.id', 'ci_runner_projects.project_id')
    .selectAll('projects')
    .where('ci_runner_projects.runner_id', '=', runnerId)
    .orderBy('ci_runner_projects.created_at')
    .orderBy('projects.id')
    .execute();
}

export interface RunnerUpdate {
  description?: string | undefined;
  active?: boolean | undefined;
  paused?: boolean | undefined;
  tag_list?: string[] | undefined;
  run_untagged?: boolean | undefined;
  locked?: boolean | undefined;
  access_level?: string | undefined;
  maximum_timeout?: number | undefined;
}

export async function updateRunner(deps: Deps, runner: Runner, input: RunnerUpdate): Promise<Runner> {
  const active = input.paused !== undefined ? !input.paused : input.active;
  return deps.db
    .updateTable('ci_runners')
    .set({
      updated_at: deps.clock.now(),
      ...(input.description !== undefined ? { description: input.description } : {}),
      ...(active !== undefined ? { active } : {}),
      ...(input.tag_list !== undefined ? { tag_list: normaliseTags(input.tag_list) } : {}),
      ...(input.run_untagged !== undefined ? { run_untagged: input.run_untagged } : {}),
      ...(input.locked !== undefined ? { locked: input.locked } : {}),
      ...(input.access_level !== undefined ? { access_level: input.access_level } : {}),
      ...(input.maximum_timeout !== undefined ? { maximum_timeout: input.maximum_timeout } : {}),
    })
    .where('id', '=', runner.id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deleteRunner(deps: Deps, runnerId: number): Promise<void> {
  await deps.db.deleteFrom('ci_runners').where('id', '=', runnerId).execute();
}

export async function countRunnerProjects(deps: Deps, runnerId: number): Promise<number> {
  const row = await deps.db
    .selectFrom('ci_runner_projects')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('runner_id', '=', runnerId)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

export async function isRunnerInProject(deps: Deps, runnerId: number, projectId: number): Promise<boolean> {
  const row = await deps.db
    .selectFrom('ci_runner_projects')
    .select('runner_id')
    .where('runner_id', '=', runnerId)
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  return row !== undefined;
}

export async function enableRunnerInProject(deps: Deps, runnerId: number, projectId: number): Promise<void> {
  await deps.db
    .insertInto('ci_runner_projects')
    .values({ runner_id: runnerId, project_id: projectId, created_at: deps.clock.now() })
    .execute();
}

export async function disableRunnerInProject(deps: Deps, runnerId: number, projectId: number): Promise<void> {
  await deps.db
    .deleteFrom('ci_runner_projects')
    .where('runner_id', '=', runnerId)
    .where('project_id', '=', projectId)
    .execute();
}
