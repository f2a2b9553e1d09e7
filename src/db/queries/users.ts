import { sql } from 'kysely';
import { toDbId } from '../../lib/ids.js';
import type { Db } from '../database.js';
import type { NewUser, User, UserUpdate } from '../schema.js';
import { countUpTo } from './count.js';

export function findUserById(db: Db, id: number): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findUserByUsername(db: Db, username: string): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where(sql`lower(username)`, '=', username.toLowerCase()).executeTakeFirst();
}

/** GitLab's UserFinder#find_by_id_or_username: digits name an id, anything else a username. */
export async function findUserByIdOrUsername(db: Db, identifier: string): Promise<User | undefined> {
  if (/^\d+$/.test(identifier)) {
    const id = toDbId(identifier);
    return id === null ? undefined : findUserById(db, id);
  }
  return findUserByUsername(db, identifier);
}

export function findUserByEmail(db: Db, email: string): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where(sql`lower(email)`, '=', email.toLowerCase()).executeTakeFirst();
}

/** Users whose e-mail is one of `emails`, compared case-insensitively (commit authors → users). */
export function findUsersByEmails(db: Db, emails: string[]): Promise<User[]> {
  if (emails.length === 0) return Promise.resolve([]);
  const lowered = [...new Set(emails.map((e) => e.toLowerCase()))];
  return db.selectFrom('users').selectAll().where(sql`lower(email)`, 'in', lowered).execute();
}

export function findUsersByIds(db: Db, ids: number[]): Promise<User[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return db.selectFrom('users').selectAll().where('id', 'in', ids).execute();
}

export function insertUser(db: Db, user: NewUser): Promise<User> {
  return db.insertInto('users').values(user).returningAll().executeTakeFirstOrThrow();
}

export function updateUser(db: Db, id: number, changes: UserUpdate): Promise<User | undefined> {
  return db.updateTable('users').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

export interface UserFilter {
  username?: string;
  search?: string;
  active?: boolean;
  humans?: boolean;
  blocked?: boolean;
  external?: boolean;
  admins?: boolean;
  createdAfter?: Date;
  createdBefore?: Date;
  withoutProjectBots?: boolean;
  twoFactor?: 'enabled' | 'disabled';
  excludeActive?: boolean;
  excludeExternal?: boolean;
  excludeHumans?: boolean;
  /** Administrators' searches match the primary email; others' only the public email. */
  searchEmails: boolean;
  /** GitLab's `without_forbidden_states`: non-administrators never list blocked or banned users. */
  withoutForbiddenStates?: boolean;
  /** `search_rank`: GitLab's User.search order (exact public email, username, name; then name, id). */
  orderBy: 'id' | 'name' | 'username' | 'created_at' | 'updated_at' | 'search_rank';
  sort: 'asc' | 'desc';
}

/** Shorter search words only match a whole value (GitLab's MIN_CHARS_FOR_PARTIAL_MATCHING). */
const MIN_CHARS_FOR_PARTIAL_MATCHING = 3;

const likeEscape = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * GitLab's fuzzy_arel_match: every word of three characters or more must occur in the column;
 * a query with no such word must equal the whole value (case-insensitive).
 */
function fuzzyMatch(column: 'name' | 'username', query: string) {
  const words = query.split(/\s+/).filter((w) => w.length >= MIN_CHARS_FOR_PARTIAL_MATCHING);
  if (words.length === 0) return sql<boolean>`${sql.ref(column)} ILIKE ${likeEscape(query)}`;
  return sql.join(
    words.map((w) => sql<boolean>`${sql.ref(column)} ILIKE ${`%${likeEscape(w)}%`}`),
    sql` AND `,
  );
}

function filtered(db: Db, f: UserFilter) {
  // A user whose deletion is under way is gone for the API already.
  let q = db.selectFrom('users').where('deleting_at', 'is', null);
  if (f.username !== undefined) q = q.where(sql`lower(username)`, '=', f.username.toLowerCase());
  const search = f.search?.trim().replace(/\s+/g, ' ');
  if (search) {
    const exact = search.toLowerCase();
    const email = f.searchEmails ? sql<boolean>`lower(email) = ${exact}` : sql<boolean>`lower(public_email) = ${exact}`;
    q = q.where(sql<boolean>`(${email} OR (${fuzzyMatch('name', search)}) OR (${fuzzyMatch('username', search)}))`);
  }
  if (f.active) q = q.where('state', '=', 'active');
  if (f.excludeActive) q = q.where('state', '<>', 'active');
  if (f.blocked) q = q.where('state', '=', 'blocked');
  if (f.withoutForbiddenStates) q = q.where('state', 'not in', ['blocked', 'banned']);
  if (f.external) q = q.where('external', '=', true);
  if (f.excludeExternal) q = q.where('external', '=', false);
  if (f.humans || f.withoutProjectBots) q = q.where('bot', '=', false);
  if (f.excludeHumans) q = q.where('bot', '=', true);
  if (f.admins) q = q.where('admin', '=', true);
  if (f.twoFactor) q = q.where('two_factor_enabled', '=', f.twoFactor === 'enabled');
  if (f.createdAfter) q = q.where('created_at', '>=', f.createdAfter);
  if (f.createdBefore) q = q.where('created_at', '<=', f.createdBefore);
  return q;
}

export function listUsers(db: Db, f: UserFilter, window: { limit: number; offset: number }): Promise<User[]> {
  let q = filtered(db, f).selectAll();
  if (f.orderBy === 'search_rank') {
    const term = (f.search ?? '').trim().replace(/\s+/g, ' ').toLowerCase();
    q = q
      .orderBy(
        sql`CASE WHEN lower(public_email) = ${term} THEN 0 WHEN lower(username) = ${term} THEN 1
          WHEN lower(name) = ${term} THEN 2 ELSE 3 END`,
      )
      .orderBy('name', 'asc')
      .orderBy('id', 'asc');
  } else {
    q = q.orderBy(f.orderBy, f.sort);
    if (f.orderBy !== 'id') q = q.orderBy('id', f.sort);
  }
  return q.limit(window.limit).offset(window.offset).execute();
}

export async function countUsers(db: Db, f: UserFilter, cap: number): Promise<number> {
  return countUpTo(db, filtered(db, f).select('id'), cap);
}

export async function countAdmins(db: Db): Promise<number> {
  const row = await db
    .selectFrom('users')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('admin', '=', true)
    .executeTakeFirstOrThrow();
  return row.n;
}

/**
 * Counts one wrong password for a user, atomically: a lock that has run out is cleared first
 * (the count starts again at 1), and the account is locked once the count reaches `maxAttempts`.
 * An account already locked keeps its lock time. Concurrent wrong guesses each count once, as
 * the row lock serialises the updates and each reads the count the previous one wrote.
 */
export async function recordFailedPasswordAttempt(
  db: Db,
  userId: number,
  now: Date,
  options: { maxAttempts: number; lockedSince: Date },
): Promise<{ failed_attempts: number; locked_at: Date | null } | undefined> {
  const { rows } = await sql<{ failed_attempts: number; locked_at: Date | null }>`
    UPDATE users SET
      failed_attempts = (CASE WHEN locked_at IS NOT NULL AND locked_at <= ${options.lockedSince}
                              THEN 0 ELSE failed_attempts END) + 1,
      locked_at = CASE
        WHEN locked_at IS NOT NULL AND locked_at > ${options.lockedSince} THEN locked_at
        WHEN (CASE WHEN locked_at IS NOT NULL AND locked_at <= ${options.lockedSince}
                   THEN 0 ELSE failed_attempts END) + 1 >= ${options.maxAttempts} THEN ${now}::timestamptz
        ELSE NULL END
    WHERE id = ${userId}
    RETURNING failed_attempts, locked_at`.execute(db);
  const row = rows[0];
  return row && { failed_attempts: Number(row.failed_attempts), locked_at: row.locked_at && new Date(row.locked_at) };
}

/**
 * After a correct password: clears the count and any lock that has run out. Returns false when
 * the account is locked (a concurrent wrong guess may have locked it since it was read).
 */
export async function resetFailedPasswordAttempts(db: Db, userId: number, lockedSince: Date): Promise<boolean> {
  const { rows } = await sql<{ id: number }>`
    UPDATE users SET failed_attempts = 0, locked_at = NULL
    WHERE id = ${userId} AND (locked_at IS NULL OR locked_at <= ${lockedSince})
    RETURNING id`.execute(db);
  return rows.length > 0;
}

/** Records a day of activity (GitLab's `last_activity_on`); a no-op when the day is already set. */
export async function touchUserActivity(db: Db, id: number, day: string): Promise<void> {
  await db
    .updateTable('users')
    .set({ last_activity_on: day })
    .where('id', '=', id)
    .where(sql<boolean>`last_activity_on IS DISTINCT FROM ${day}::date`)
    .execute();
}

/**
 * Deactivates, in one statement, active human users who are not administrators and were last
 * active on `lastActiveBy` or before, or never active and created on `createdBy` or before
 * (GitLab's `User.dormant` and `User.with_no_activity`). Returns the ids it deactivated.
 */
export async function deactivateDormantUsers(
  db: Db,
  cutoff: { lastActiveBy: string; createdBy: string },
  now: Date,
): Promise<number[]> {
  const rows = await db
    .updateTable('users')
    .set({ state: 'deactivated', updated_at: now })
    .where('state', '=', 'active')
    .where('admin', '=', false)
    .where('bot', '=', false)
    .where((eb) =>
      eb.or([
        eb('last_activity_on', '<=', cutoff.lastActiveBy),
        eb.and([eb('last_activity_on', 'is', null), sql<boolean>`created_at::date <= ${cutoff.createdBy}::date`]),
      ]),
    )
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}

/** Makes a deactivated user active again; undefined when the user was not deactivated. */
export function reactivateUser(db: Db, id: number, now: Date): Promise<User | undefined> {
  return db
    .updateTable('users')
    .set({ state: 'active', updated_at: now })
    .where('id', '=', id)
    .where('state', '=', 'deactivated')
    .returningAll()
    .executeTakeFirst();
}

/**
 * Moves a user from one of `from` to `to` in one conditional statement, so that two concurrent
 * transitions cannot both apply; undefined when the user was in none of `from` (or is gone).
 */
export function transitionUserState(
  db: Db,
  id: number,
  from: readonly User['state'][],
  to: User['state'],
  now: Date,
): Promise<User | undefined> {
  return db
    .updateTable('users')
    .set({ state: to, updated_at: now })
    .where('id', '=', id)
    .where('state', 'in', [...from])
    .where('deleting_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

/** Groups where `userId` is the only direct Owner (GitLab's `User#solo_owned_groups`). */
export async function soloOwnedGroupIds(db: Db, userId: number): Promise<number[]> {
  const { rows } = await sql<{ id: number }>`
    SELECT m.source_id AS id FROM members m
    WHERE m.user_id = ${userId} AND m.source_type = 'group' AND m.access_level = 50
      AND m.requested_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM members o WHERE o.source_type = 'group' AND o.source_id = m.source_id
        AND o.access_level = 50 AND o.requested_at IS NULL AND o.user_id <> ${userId})
    ORDER BY m.source_id`.execute(db);
  return rows.map((r) => r.id);
}
