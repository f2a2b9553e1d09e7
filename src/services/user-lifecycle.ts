import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { projectsInSubtree } from '../db/queries/projects.js';
import { findUserById, soloOwnedGroupIds, transitionUserState } from '../db/queries/users.js';
import type { User } from '../db/schema.js';
import { ApiError, conflict, forbidden } from '../http/errors.js';
import { enqueueJob } from '../jobs/queue.js';
import { getApplicationSettings } from './application-settings.js';
import { type Deps, today } from './deps.js';
import { deleteGroup, findGroup } from './groups.js';
import { deleteProject } from './projects.js';

/**
 * GitLab's user state machine (app/models/user.rb) and the admin services around it
 * (app/services/users/*): which transitions the API refuses, with GitLab's texts and statuses.
 * None of these records an activity event, as in GitLab (EE records audit events only).
 */

/** GitLab's `User#blocked?`: the states that keep a user out (blocked, pending approval, banned). */
export const BLOCKED_STATES: readonly User['state'][] = ['blocked', 'blocked_pending_approval', 'banned'];

export const isBlocked = (user: User) => BLOCKED_STATES.includes(user.state);

/** The durable job that deletes a user (GitLab's DeleteUserWorker). */
export const DELETE_USER_JOB = 'delete_user';

/** GitLab's `render_api_error!(message, status)`: the message alone, without the status prefix. */
const apiError = (status: number, message: string) => new ApiError(status, { message });

/** What a state-changing endpoint answers on success: GitLab's endpoints return `true` or `false`. */
export type TransitionResult = boolean;

/**
 * POST /users/:id/block. LDAP blocks do not exist in Depot; the others are GitLab's rules: not
 * oneself, not the ghost user, and an already blocked user (banned and pending approval count)
 * is left as it is with an empty 201.
 */
export async function blockUser(deps: Deps, admin: User, user: User): Promise<TransitionResult | null> {
  if (admin.id === user.id) throw forbidden('The API initiating user cannot be blocked by the API');
  if (isBlocked(user)) return null;
  if (user.ghost) throw apiError(403, 'An internal user cannot be blocked');
  const done = await transitionUserState(deps.db, user.id, ['active', 'deactivated'], 'blocked', deps.clock.now());
  return done !== undefined;
}

/**
 * POST /users/:id/unblock: a deactivated user is refused; any other state goes to active when
 * GitLab's `activate` event allows it (false, still 201, when the user was active already).
 */
export async function unblockUser(deps: Deps, user: User): Promise<TransitionResult> {
  if (user.state === 'deactivated') throw forbidden('Deactivated users cannot be unblocked by the API');
  if (user.ghost) return false;
  const done = await transitionUserState(deps.db, user.id, BLOCKED_STATES, 'active', deps.clock.now());
  return done !== undefined;
}

/**
 * POST /users/:id/deactivate (Users::DeactivateService): blocked users and internal users are
 * refused, as is anyone active within the instance's dormant period (`deactivate_dormant_users_period`
 * days, by their last activity or sign-in). Already deactivated: an empty 201.
 */
export async function deactivateUser(deps: Deps, user: User): Promise<TransitionResult | null> {
  if (user.state === 'deactivated') return null;
  if (isBlocked(user)) throw apiError(403, 'Error occurred. A blocked user cannot be deactivated');
  // Of GitLab's internal users Depot has the ghost (project bots are not internal).
  if (user.ghost) throw apiError(403, 'Internal users cannot be deactivated');
  const period = (await getApplicationSettings(deps)).values.deactivate_dormant_users_period as number;
  if (!inactiveFor(deps, user, period)) {
    throw apiError(
      403,
      `The user you are trying to deactivate has been active in the past ${period} days and cannot be deactivated`,
    );
  }
  const done = await transitionUserState(deps.db, user.id, ['active'], 'deactivated', deps.clock.now());
  if (!done) throw apiError(400, 'State cannot transition via "deactivate"');
  return true;
}

/** GitLab's `User#no_recent_activity?`: last activity day and last sign-in both older than `days`. */
function inactiveFor(deps: Deps, user: User, days: number): boolean {
  const cutoff = deps.clock.now().getTime() - days * 24 * 60 * 60 * 1000;
  const lastDay = user.last_activity_on === null ? 0 : Date.parse(`${user.last_activity_on}T00:00:00Z`);
  const lastSignIn = user.current_sign_in_at?.getTime() ?? 0;
  return Math.max(lastDay, lastSignIn) <= cutoff;
}

/** POST /users/:id/activate (Users::ActivateService): blocked users must be unblocked first. */
export async function activateUser(deps: Deps, user: User): Promise<TransitionResult> {
  if (isBlocked(user)) throw apiError(403, 'Error occurred. A blocked user must be unblocked to be activated');
  if (user.state === 'active') return true;
  const done = await transitionUserState(deps.db, user.id, ['deactivated'], 'active', deps.clock.now());
  if (!done) throw apiError(422, 'State cannot transition via "activate"');
  return true;
}

/** POST /users/:id/ban and /unban (Users::BanService, UnbanService): only active users are banned. */
export async function banUser(deps: Deps, user: User, action: 'ban' | 'unban'): Promise<TransitionResult> {
  const [from, to]: [User['state'], User['state']] = action === 'ban' ? ['active', 'banned'] : ['banned', 'active'];
  if (user.state !== from || (action === 'ban' && user.ghost)) {
    throw apiError(403, `You cannot ${action} ${user.state} users.`);
  }
  const done = await transitionUserState(deps.db, user.id, [from], to, deps.clock.now());
  if (!done) throw apiError(403, `You cannot ${action} ${user.state} users.`);
  return true;
}

/** POST /users/:id/approve (Users::ApproveService): only a user pending approval. */
export async function approveUser(deps: Deps, user: User): Promise<void> {
  const done =
    user.state === 'blocked_pending_approval' &&
    (await transitionUserState(deps.db, user.id, ['blocked_pending_approval'], 'active', deps.clock.now()));
  if (!done) throw apiError(409, 'The user you are trying to approve is not pending approval');
}

/** POST /users/:id/reject (Users::RejectService): deletes a user pending approval, hard. */
export async function rejectUser(deps: Deps, admin: User, user: User): Promise<void> {
  if (user.state !== 'blocked_pending_approval') throw apiError(409, 'User does not have a pending request');
  await scheduleUserDeletion(deps, admin, user, { hardDelete: true });
}

/**
 * DELETE /users/:id (User#delete_async): refused while the user is the only Owner of a group,
 * unless `hard_delete` (then those groups go too). The user is blocked and hidden at once, so
 * their tokens stop working and the API answers 404; the `delete_user` job, queued in the same
 * transaction, removes their personal projects, memberships and the row itself.
 */
export async function scheduleUserDeletion(
  deps: Deps,
  admin: User,
  user: User,
  options: { hardDelete: boolean },
): Promise<void> {
  if (user.ghost) throw forbidden('The ghost user cannot be removed');
  if (!options.hardDelete && (await soloOwnedGroupIds(deps.db, user.id)).length > 0) {
    throw conflict('User cannot be removed while is the sole-owner of a group');
  }
  const now = deps.clock.now();
  await deps.db.transaction().execute(async (tx) => {
    const marked = await tx
      .updateTable('users')
      .set({ deleting_at: now, state: 'blocked', updated_at: now })
      .where('id', '=', user.id)
      .where('deleting_at', 'is', null)
      .returning('id')
      .executeTakeFirst();
    if (!marked) return;
    await enqueueJob(tx, DELETE_USER_JOB, {
      user_id: user.id,
      deleted_by_id: admin.id,
      hard_delete: options.hardDelete,
    });
  });
}

/** A column naming who made a row, moved to the ghost user when its user is deleted. */
export interface AuthoredColumn {
  table: string;
  column: string;
}

/**
 * Columns whose rows outlive their author: when a user is deleted without `hard_delete` these
 * pass to the ghost user (GitLab's Users::MigrateRecordsToGhostUserService: issues, merge
 * requests and their merge user, notes, award emoji, reviews, releases, timelogs, pipelines and
 * builds). Depot has none of those yet: each module that adds one lists its column here. What
 * GitLab does not migrate goes with the user as there: events (deleted with their author), and
 * projects' `creator_id` and members' `created_by_id` (set to null), by the foreign keys.
 */
export const GHOST_AUTHORED_COLUMNS: readonly AuthoredColumn[] = [];

/** GitLab's ghost user's profile (User.ghost). */
const GHOST_BIO =
  'This is a "Ghost User", created to hold all issues authored by users that have since been deleted. ' +
  'This user cannot be removed.';

/** The instance's ghost user, created on first need (the unique index settles races). */
export async function ghostUser(db: Db, now: Date): Promise<User> {
  const existing = await db.selectFrom('users').selectAll().where('ghost', '=', true).executeTakeFirst();
  if (existing) return existing;
  // `ghost`, or `ghost1`, `ghost2`… when a user or group already has the name.
  const { rows } = await sql<{ username: string }>`
    SELECT candidate AS username FROM (
      SELECT CASE WHEN n = 0 THEN 'ghost' ELSE 'ghost' || n END AS candidate, n FROM generate_series(0, 1000) AS n
    ) c
    WHERE NOT EXISTS (SELECT 1 FROM users u WHERE lower(u.username) = c.candidate)
      AND NOT EXISTS (SELECT 1 FROM namespaces ns WHERE lower(ns.full_path) = c.candidate)
    ORDER BY n LIMIT 1`.execute(db);
  const username = rows[0]?.username ?? `ghost-${now.getTime()}`;
  await db
    .insertInto('users')
    .values({
      username,
      email: `${username}@example.com`,
      name: 'Ghost User',
      password_digest: null,
      state: 'blocked',
      ghost: true,
      bio: GHOST_BIO,
      projects_limit: 0,
      confirmed_at: now,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.column('ghost').where('ghost', '=', true).doNothing())
    .execute();
  return db.selectFrom('users').selectAll().where('ghost', '=', true).executeTakeFirstOrThrow();
}

/**
 * The `delete_user` job: personal projects (rows, then repositories), with `hard_delete` the
 * groups the user alone owned, then in one transaction what they authored passes to the ghost
 * user (`authoredColumns`; with `hard_delete` it goes) and the user row goes with its
 * memberships, tokens, events and namespace. Idempotent: a re-run after a crash carries on from
 * what is left.
 */
export async function deleteUserNow(
  deps: Deps,
  userId: number,
  hardDelete: boolean,
  authoredColumns: readonly AuthoredColumn[] = GHOST_AUTHORED_COLUMNS,
): Promise<boolean> {
  const user = await findUserById(deps.db, userId);
  if (!user || user.ghost) return false;
  const namespace = await deps.db
    .selectFrom('namespaces')
    .select('id')
    .where('kind', '=', 'user')
    .where('owner_id', '=', user.id)
    .executeTakeFirst();
  if (namespace) {
    for (const project of await projectsInSubtree(deps.db, namespace.id)) await deleteProject(deps, project);
  }
  if (hardDelete) {
    for (const groupId of await soloOwnedGroupIds(deps.db, user.id)) {
      const group = await findGroup(deps, String(groupId));
      if (group) await deleteGroup(deps, group);
    }
  }
  const now = deps.clock.now();
  await deps.db.transaction().execute(async (tx) => {
    // GitLab makes sure the ghost exists on every deletion, hard or not.
    const ghost = await ghostUser(tx, now);
    if (!hardDelete) {
      for (const { table, column } of authoredColumns) {
        await sql`UPDATE ${sql.table(table)} SET ${sql.ref(column)} = ${ghost.id}
          WHERE ${sql.ref(column)} = ${user.id}`.execute(tx);
      }
    }
    await tx.deleteFrom('members').where('user_id', '=', user.id).execute();
    await tx.deleteFrom('users').where('id', '=', user.id).execute();
  });
  deps.logger.info({ user: user.username, hardDelete, day: today(deps) }, 'user deleted');
  return true;
}

/**
 * Queues the deletion again for users marked for deletion with no queued or running job (the
 * job row was lost, or gave up): with the `hard_delete` of their last job, if one is left.
 */
export async function requeueUserDeletions(deps: Deps): Promise<number> {
  const { rows } = await sql<{ id: number; hard_delete: boolean | null }>`
    SELECT u.id, (SELECT (j.payload->>'hard_delete')::boolean FROM jobs j
        WHERE j.kind = ${DELETE_USER_JOB} AND (j.payload->>'user_id')::int = u.id
        ORDER BY j.id DESC LIMIT 1) AS hard_delete
    FROM users u WHERE u.deleting_at IS NOT NULL AND NOT EXISTS (
      SELECT 1 FROM jobs j WHERE j.kind = ${DELETE_USER_JOB} AND j.state IN ('queued', 'running')
        AND (j.payload->>'user_id')::int = u.id)`.execute(deps.db);
  for (const row of rows) {
    await enqueueJob(deps.db, DELETE_USER_JOB, {
      user_id: row.id,
      deleted_by_id: null,
      hard_delete: row.hard_delete === true,
    });
  }
  return rows.length;
}
