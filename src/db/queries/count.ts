import { type SelectQueryBuilder, sql } from 'kysely';
import type { Db } from '../database.js';
import type { DB } from '../schema.js';

/**
 * min(rows of `query`, cap), counted by PostgreSQL (`count(*)` over the query cut at `cap`): the
 * capped total a paginated list reports without reading the rows.
 */
export async function countUpTo(db: Db, query: SelectQueryBuilder<DB, any, any>, cap: number): Promise<number> {
  const row = await db
    .selectFrom(query.limit(cap).as('capped'))
    .select(sql<number>`count(*)::int`.as('n'))
    .executeTakeFirstOrThrow();
  return row.n;
}
