import { type Insertable, sql } from 'kysely';
import type { Db } from '../database.js';
import type {
  OauthAccessGrant,
  OauthAccessGrantsTable,
  OauthAccessToken,
  OauthAccessTokensTable,
  OauthApplication,
  OauthApplicationsTable,
  WebSession,
  WebSessionsTable,
} from '../schema.js';

// Applications

export function insertOauthApplication(db: Db, values: Insertable<OauthApplicationsTable>): Promise<OauthApplication> {
  return db.insertInto('oauth_applications').values(values).returningAll().executeTakeFirstOrThrow();
}

export function findOauthApplicationByUid(db: Db, uid: string): Promise<OauthApplication | undefined> {
  return db.selectFrom('oauth_applications').selectAll().where('uid', '=', uid).executeTakeFirst();
}

export function findOauthApplicationById(db: Db, id: number): Promise<OauthApplication | undefined> {
  return db.selectFrom('oauth_applications').selectAll().where('id', '=', id).executeTakeFirst();
}

export function listOauthApplications(db: Db, ownerId?: number): Promise<OauthApplication[]> {
  let q = db.selectFrom('oauth_applications').selectAll();
  if (ownerId !== undefined) q = q.where('owner_id', '=', ownerId);
  return q.orderBy('id', 'asc').execute();
}

/** Deletes an application (its grants and tokens go with it); ownership in the WHERE clause when given. */
export async function deleteOauthApplication(db: Db, id: number, ownerId?: number): Promise<boolean> {
  let q = db.deleteFrom('oauth_applications').where('id', '=', id);
  if (ownerId !== undefined) q = q.where('owner_id', '=', ownerId);
  const result = await q.executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

// Grants (authorization codes)

export function insertOauthGrant(db: Db, values: Insertable<OauthAccessGrantsTable>): Promise<OauthAccessGrant> {
  return db.insertInto('oauth_access_grants').values(values).returningAll().executeTakeFirstOrThrow();
}

/** The grant with this code digest, locked until the transaction ends. */
export function lockOauthGrantByDigest(db: Db, digest: string): Promise<OauthAccessGrant | undefined> {
  return db
    .selectFrom('oauth_access_grants')
    .selectAll()
    .where('code_digest', '=', digest)
    .forUpdate()
    .executeTakeFirst();
}

export async function markOauthGrantUsed(db: Db, id: number, now: Date, accessTokenId: number): Promise<void> {
  await db
    .updateTable('oauth_access_grants')
    .set({ revoked_at: now, access_token_id: accessTokenId })
    .where('id', '=', id)
    .execute();
}

// Access and refresh tokens

export function insertOauthToken(db: Db, values: Insertable<OauthAccessTokensTable>): Promise<OauthAccessToken> {
  return db.insertInto('oauth_access_tokens').values(values).returningAll().executeTakeFirstOrThrow();
}

export function findOauthTokenByDigest(db: Db, digest: string): Promise<OauthAccessToken | undefined> {
  return db.selectFrom('oauth_access_tokens').selectAll().where('token_digest', '=', digest).executeTakeFirst();
}

export function findOauthTokenByRefreshDigest(db: Db, digest: string): Promise<OauthAccessToken | undefined> {
  return db.selectFrom('oauth_access_tokens').selectAll().where('refresh_token_digest', '=', digest).executeTakeFirst();
}

export function lockOauthTokenByRefreshDigest(db: Db, digest: string): Promise<OauthAccessToken | undefined> {
  return db
    .selectFrom('oauth_access_tokens')
    .selectAll()
    .where('refresh_token_digest', '=', digest)
    .forUpdate()
    .executeTakeFirst();
}

export function findOauthTokenById(db: Db, id: number): Promise<OauthAccessToken | undefined> {
  return db.selectFrom('oauth_access_tokens').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function revokeOauthToken(db: Db, id: number, now: Date): Promise<void> {
  await db
    .updateTable('oauth_access_tokens')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .execute();
}

/** Revokes every token of a refresh chain. */
export async function revokeOauthTokenFamily(db: Db, family: string, now: Date): Promise<void> {
  await db
    .updateTable('oauth_access_tokens')
    .set({ revoked_at: now })
    .where('family', '=', family)
    .where('revoked_at', 'is', null)
    .execute();
}

// Browser sessions

export function insertWebSession(db: Db, values: Insertable<WebSessionsTable>): Promise<WebSession> {
  return db.insertInto('web_sessions').values(values).returningAll().executeTakeFirstOrThrow();
}

export function findWebSessionByDigest(db: Db, digest: string, now: Date): Promise<WebSession | undefined> {
  return db
    .selectFrom('web_sessions')
    .selectAll()
    .where('session_digest', '=', digest)
    .where('expires_at', '>', now)
    .executeTakeFirst();
}

export async function setWebSessionReturnTo(db: Db, id: number, returnTo: string | null): Promise<void> {
  await db.updateTable('web_sessions').set({ return_to: returnTo }).where('id', '=', id).execute();
}

export async function deleteWebSession(db: Db, id: number): Promise<void> {
  await db.deleteFrom('web_sessions').where('id', '=', id).execute();
}

export async function deleteExpiredWebSessions(db: Db, now: Date): Promise<void> {
  await db.deleteFrom('web_sessions').where('expires_at', '<=', now).execute();
}

// Pruning

/** Deletes up to `limit` authorization codes that expired at or before `now`; returns how many. */
export async function deleteExpiredOauthGrants(db: Db, now: Date, limit: number): Promise<number> {
  const { rows } = await sql<{ id: number }>`
    DELETE FROM oauth_access_grants WHERE id IN (
      SELECT id FROM oauth_access_grants WHERE expires_at <= ${now} ORDER BY id LIMIT ${limit})
    RETURNING id`.execute(db);
  return rows.length;
}

/**
 * Deletes up to `limit` tokens revoked at or before `revokedBefore` whose family has no token
 * left that is not revoked: while a family is alive its rotated tokens are what recognises a
 * replayed refresh token. Returns how many.
 */
export async function deleteDeadOauthTokens(db: Db, revokedBefore: Date, limit: number): Promise<number> {
  const { rows } = await sql<{ id: number }>`
    DELETE FROM oauth_access_tokens WHERE id IN (
      SELECT t.id FROM oauth_access_tokens t
      WHERE t.revoked_at IS NOT NULL AND t.revoked_at <= ${revokedBefore}
        AND NOT EXISTS (
          SELECT 1 FROM oauth_access_tokens live WHERE live.family = t.family AND live.revoked_at IS NULL)
      ORDER BY t.id LIMIT ${limit})
    RETURNING id`.execute(db);
  return rows.length;
}
