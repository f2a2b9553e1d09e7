import { type Insertable, sql } from 'kysely';
import type { Db } from '../database.js';
import type { PersonalAccessToken, PersonalAccessTokensTable } from '../schema.js';
import { countUpTo } from './count.js';

export function insertPersonalAccessToken(db: Db, values: Insertable<PersonalAccessTokensTable>) {
  return db.insertInto('personal_access_tokens').values(values).returningAll().executeTakeFirstOrThrow();
}

export function findPersonalAccessTokenByDigest(db: Db, digest: string): Promise<PersonalAccessToken | undefined> {
  return db.selectFrom('personal_access_tokens').selectAll().where('token_digest', '=', digest).executeTakeFirst();
}

export function findPersonalAccessTokenById(db: Db, id: number): Promise<PersonalAccessToken | undefined> {
  return db.selectFrom('personal_access_tokens').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function revokePersonalAccessToken(db: Db, id: number, now: Date): Promise<void> {
  await db.updateTable('personal_access_tokens').set({ revoked: true, updated_at: now }).where('id', '=', id).execute();
}

/** Revokes every token of a rotation family (the token, its predecessors and successors). */
export async function revokeTokenFamily(db: Db, id: number, now: Date): Promise<void> {
  await sql`
    WITH RECURSIVE up(id, prev) AS (
      SELECT id, previous_personal_access_token_id FROM personal_access_tokens WHERE id = ${id}
      UNION SELECT t.id, t.previous_personal_access_token_id FROM personal_access_tokens t JOIN up ON t.id = up.prev
    ), down(id) AS (
      SELECT id FROM up
      UNION SELECT t.id FROM personal_access_tokens t JOIN down ON t.previous_personal_access_token_id = down.id
    )
    UPDATE personal_access_tokens SET revoked = TRUE, updated_at = ${now}
    WHERE id IN (SELECT id FROM down) AND revoked = FALSE`.execute(db);
}

export async function touchPersonalAccessToken(db: Db, id: number, now: Date): Promise<void> {
  await db.updateTable('personal_access_tokens').set({ last_used_at: now }).where('id', '=', id).execute();
}

export interface TokenFilter {
  userId?: number;
  revoked?: boolean;
  /** active = not revoked and not expired on `today`. */
  state?: 'active' | 'inactive';
  today: string;
  search?: string;
  createdAfter?: Date;
  createdBefore?: Date;
  lastUsedAfter?: Date;
  lastUsedBefore?: Date;
  /** `YYYY-MM-DD`: expires_at < expiresBefore, expires_at >= expiresAfter. */
  expiresBefore?: string;
  expiresAfter?: string;
  /** Non-administrators never list impersonation tokens. */
  withoutImpersonation?: boolean;
  /** Only impersonation tokens (GET /users/:user_id/impersonation_tokens). */
  onlyImpersonation?: boolean;
  sort?: TokenSort;
}

/** GitLab's `sort` values for tokens (Sortable's simple sorts plus the token ones). */
export const TOKEN_SORTS = [
  'created_asc',
  'created_desc',
  'created_at_asc',
  'created_at_desc',
  'updated_asc',
  'updated_desc',
  'updated_at_asc',
  'updated_at_desc',
  'name_asc',
  'name_desc',
  'id_asc',
  'id_desc',
  'expires_asc',
  'expires_desc',
  'expires_at_asc_id_desc',
  'last_used_asc',
  'last_used_desc',
] as const;
export type TokenSort = (typeof TOKEN_SORTS)[number];

const SORT_COLUMNS: Record<
  TokenSort,
  ['created_at' | 'updated_at' | 'name' | 'id' | 'expires_at' | 'last_used_at', 'asc' | 'desc', 'asc' | 'desc']
> = {
  created_asc: ['created_at', 'asc', 'asc'],
  created_desc: ['created_at', 'desc', 'desc'],
  created_at_asc: ['created_at', 'asc', 'asc'],
  created_at_desc: ['created_at', 'desc', 'desc'],
  updated_asc: ['updated_at', 'asc', 'asc'],
  updated_desc: ['updated_at', 'desc', 'desc'],
  updated_at_asc: ['updated_at', 'asc', 'asc'],
  updated_at_desc: ['updated_at', 'desc', 'desc'],
  name_asc: ['name', 'asc', 'asc'],
  name_desc: ['name', 'desc', 'desc'],
  id_asc: ['id', 'asc', 'asc'],
  id_desc: ['id', 'desc', 'desc'],
  expires_asc: ['expires_at', 'asc', 'desc'],
  expires_desc: ['expires_at', 'desc', 'desc'],
  expires_at_asc_id_desc: ['expires_at', 'asc', 'desc'],
  last_used_asc: ['last_used_at', 'asc', 'desc'],
  last_used_desc: ['last_used_at', 'desc', 'desc'],
};

function tokenQuery(db: Db, f: TokenFilter) {
  let q = db.selectFrom('personal_access_tokens');
  if (f.userId !== undefined) q = q.where('user_id', '=', f.userId);
  if (f.revoked !== undefined) q = q.where('revoked', '=', f.revoked);
  if (f.state === 'active') {
    q = q
      .where('revoked', '=', false)
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', f.today)]));
  } else if (f.state === 'inactive') {
    q = q.where((eb) => eb.or([eb('revoked', '=', true), eb('expires_at', '<=', f.today)]));
  }
  if (f.search) {
    const term = `%${f.search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    q = q.where(sql`lower(name)`, 'like', term);
  }
  if (f.createdAfter) q = q.where('created_at', '>=', f.createdAfter);
  if (f.createdBefore) q = q.where('created_at', '<=', f.createdBefore);
  if (f.lastUsedAfter) q = q.where('last_used_at', '>=', f.lastUsedAfter);
  if (f.lastUsedBefore) q = q.where('last_used_at', '<=', f.lastUsedBefore);
  if (f.expiresBefore) q = q.where('expires_at', '<', f.expiresBefore);
  if (f.expiresAfter) q = q.where('expires_at', '>=', f.expiresAfter);
  if (f.withoutImpersonation) q = q.where('impersonation', '=', false);
  if (f.onlyImpersonation) q = q.where('impersonation', '=', true);
  return q;
}

export function listPersonalAccessTokens(db: Db, f: TokenFilter, window: { limit: number; offset: number }) {
  let q = tokenQuery(db, f).selectAll();
  if (f.sort) {
    const [column, direction, tieBreak] = SORT_COLUMNS[f.sort];
    q = column === 'id' ? q.orderBy('id', direction) : q.orderBy(column, direction).orderBy('id', tieBreak);
  } else {
    q = q.orderBy('id', 'asc');
  }
  return q.limit(window.limit).offset(window.offset).execute();
}

export async function countPersonalAccessTokens(db: Db, f: TokenFilter, cap: number): Promise<number> {
  return countUpTo(db, tokenQuery(db, f).select('id'), cap);
}
