import { sql } from 'kysely';
import type { Db } from '../database.js';
import type { NewUser, User, UserUpdate } from '../schema.js';

export function findUserById(db: Db, id: number): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findUserByUsername(db: Db, username: string): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where(sql`lower(username)`, '=', username.toLowerCase()).executeTakeFirst();
}

export function findUserByEmail(db: Db, email: string): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where(sql`lower(email)`, '=', email.toLowerCase()).executeTakeFirst();
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
  blocked?: boolean;
  external?: boolean;
  admins?: boolean;
  createdAfter?: Date;
  createdBefore?: Date;
  withoutProjectBots?: boolean;
  /** Non-admins may not search by email unless it is the public email. */
  searchEmails: boolean;
  orderBy: 'id' | 'name' | 'username' | 'created_at' | 'updated_at' | 'last_activity_on';
  sort: 'asc' | 'desc';
}

function filtered(db: Db, f: UserFilter) {
  let q = db.selectFrom('users');
  if (f.username !== undefined) q = q.where(sql`lower(username)`, '=', f.username.toLowerCase());
  if (f.search !== undefined && f.search !== '') {
    const term = `%${f.search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    const exact = f.search.toLowerCase();
    q = q.where((eb) =>
      eb.or([
        eb(sql`lower(name)`, 'like', term),
        eb(sql`lower(username)`, 'like', term),
        f.searchEmails ? eb(sql`lower(email)`, '=', exact) : eb(sql`lower(public_email)`, '=', exact),
      ]),
    );
  }
  if (f.active) q = q.where('state', '=', 'active');
  if (f.blocked) q = q.where('state', '=', 'blocked');
  if (f.external) q = q.where('external', '=', true);
  if (f.admins) q = q.where('admin', '=', true);
  if (f.createdAfter) q = q.where('created_at', '>', f.createdAfter);
  if (f.createdBefore) q = q.where('created_at', '<', f.createdBefore);
  if (f.withoutProjectBots) q = q.where('bot', '=', false);
  return q;
}

export function listUsers(db: Db, f: UserFilter, window: { limit: number; offset: number }): Promise<User[]> {
  let q = filtered(db, f).selectAll().orderBy(f.orderBy, f.sort);
  if (f.orderBy !== 'id') q = q.orderBy('id', f.sort);
  return q.limit(window.limit).offset(window.offset).execute();
}

export async function countUsers(db: Db, f: UserFilter, cap: number): Promise<number> {
  const row = await db
    .selectFrom(filtered(db, f).select('id').limit(cap).as('t'))
    .select(sql<number>`count(*)::int`.as('n'))
    .executeTakeFirstOrThrow();
  return row.n;
}

export async function countAdmins(db: Db): Promise<number> {
  const row = await db
    .selectFrom('users')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('admin', '=', true)
    .executeTakeFirstOrThrow();
  return row.n;
}
