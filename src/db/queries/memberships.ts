import { sql } from 'kysely';
import type { Db } from '../database.js';
import { countUpTo } from './count.js';

/** One membership of a user with its source's name (GitLab's Membership entity). */
export interface MembershipRow {
  id: number;
  source_id: number;
  source_type: 'project' | 'group';
  source_name: string;
  access_level: number;
}

/**
 * Which of a user's member rows GitLab lists: `Project` is `user.project_members` (memberships,
 * not access requests), `Namespace` is `user.group_members` (memberships of Guest and above),
 * and no type is `user.members`, every row.
 */
export type MembershipType = 'Project' | 'Namespace' | undefined;

function membershipQuery(db: Db, userId: number, type: MembershipType) {
  let q = db
    .selectFrom('members as m')
    .leftJoin('projects as p', (j) => j.onRef('p.id', '=', 'm.source_id').on('m.source_type', '=', 'project'))
    .leftJoin('namespaces as n', (j) => j.onRef('n.id', '=', 'm.source_id').on('m.source_type', '=', 'group'))
    .where('m.user_id', '=', userId);
  if (type === 'Project') q = q.where('m.source_type', '=', 'project').where('m.requested_at', 'is', null);
  if (type === 'Namespace') {
    q = q.where('m.source_type', '=', 'group').where('m.requested_at', 'is', null).where('m.access_level', '>=', 10);
  }
  return q;
}

export function listMemberships(
  db: Db,
  userId: number,
  type: MembershipType,
  window: { limit: number; offset: number },
): Promise<MembershipRow[]> {
  return membershipQuery(db, userId, type)
    .select([
      'm.id',
      'm.source_id',
      'm.source_type',
      'm.access_level',
      sql<string>`coalesce(p.name, n.name, '')`.as('source_name'),
    ])
    .orderBy('m.id', 'asc')
    .limit(window.limit)
    .offset(window.offset)
    .execute();
}

export async function countMemberships(db: Db, userId: number, type: MembershipType, cap: number): Promise<number> {
  return countUpTo(db, membershipQuery(db, userId, type).select('m.id'), cap);
}
