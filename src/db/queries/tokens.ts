import { type Insertable, sql } from 'kysely';
import type { Db } from '../database.js';
import type { PersonalAccessToken, PersonalAccessTokensTable } from '../schema.js';

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
}

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
  if (f.createdAfter) q = q.where('created_at', '>', f.createdAfter);
  if (f.createdBefore) q = q.where('created_at', '<', f.createdBefore);
  if (f.lastUsedAfter) q = q.where('last_used_at', '>', f.lastUsedAfter);
  if (f.lastUsedBefore) q = q.where('last_used_at', '<', f.lastUsedBefore);
  return q;
}

export function listPersonalAccessTokens(db: Db, f: TokenFilter, window: { limit: number; offset: number }) {
  return tokenQuery(db, f).selectAll().orderBy('id', 'asc').limit(window.limit).offset(window.offset).execute();
}

export async function countPersonalAccessTokens(db: Db, f: TokenFilter, cap: number): Promise<number> {
  const row = await db
    .selectFrom(tokenQuery(db, f).select('id').limit(cap).as('t'))
    .select(sql<number>`count(*)::int`.as('n'))
    .executeTakeFirstOrThrow();
  return row.n;
}
