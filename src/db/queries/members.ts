import type { Insertable } from 'kysely';
import type { Db } from '../database.js';
import type { Member, MemberSource, MembersTable } from '../schema.js';

export function insertMember(db: Db, values: Insertable<MembersTable>): Promise<Member> {
  return db.insertInto('members').values(values).returningAll().executeTakeFirstOrThrow();
}

export function findMember(db: Db, sourceType: MemberSource, sourceId: number, userId: number) {
  return db
    .selectFrom('members')
    .selectAll()
    .where('source_type', '=', sourceType)
    .where('source_id', '=', sourceId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
}

export async function deleteMembersOfSources(db: Db, sourceType: MemberSource, sourceIds: number[]) {
  if (sourceIds.length === 0) return;
  await db.deleteFrom('members').where('source_type', '=', sourceType).where('source_id', 'in', sourceIds).execute();
}
