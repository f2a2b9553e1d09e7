import { expiredMembers, groupOwnerIds } from '../db/queries/members.js';
import { findNamespaceById } from '../db/queries/namespaces.js';
import { AccessLevel } from '../policies/access-levels.js';
import { type Deps, today } from './deps.js';
import { recordMemberEvent } from './members.js';

/** GitLab's RemoveExpiredMembersWorker runs daily at 00:10 UTC. */
export const MEMBER_EXPIRY_HOUR_UTC = 0;
export const MEMBER_EXPIRY_MINUTE_UTC = 10;
const BATCH_ROWS = 500;

/**
 * Removes memberships whose expiry date has come, each with an `expired` event in the same
 * transaction. (They stopped granting access on that date already: the policies ignore them.)
 * A group's last Owner stays, as in GitLab. Returns how many were removed.
 */
export async function removeExpiredMembers(deps: Deps, signal?: AbortSignal): Promise<number> {
  const day = today(deps);
  let removed = 0;
  let afterId = 0;
  for (;;) {
    if (signal?.aborted) break;
    const batch = await expiredMembers(deps.db, day, afterId, BATCH_ROWS);
    if (batch.length === 0) break;
    for (const member of batch) {
      afterId = Math.max(afterId, member.id);
      if (member.source_type === 'group' && member.access_level === AccessLevel.OWNER) {
        const group = await findNamespaceById(deps.db, member.source_id);
        // The expired row is no longer among the active Owners: keep it if no Owner is left.
        if (group && (await groupOwnerIds(deps.db, group.traversal_ids, day)).length === 0) continue;
      }
      const now = deps.clock.now();
      await deps.db.transaction().execute(async (tx) => {
        const gone = await tx.deleteFrom('members').where('id', '=', member.id).returning('id').executeTakeFirst();
        if (gone) await recordMemberEvent(tx, 'expired', member, now);
      });
      removed += 1;
    }
    if (batch.length < BATCH_ROWS) break;
  }
  return removed;
}
