import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import type { Db } from '../db/database.js';
import { findMember, updateMemberRow } from '../db/queries/members.js';
import { findNamespaceByFullPath } from '../db/queries/namespaces.js';
import { findUserByUsername } from '../db/queries/users.js';
import type { Namespace, User } from '../db/schema.js';
import { GROUP_MEMBER_LEVELS } from '../policies/access-levels.js';
import type { Deps } from './deps.js';
import { createMembership, isLastOwner, type MemberTarget, recordMemberEvent } from './members.js';

/** True when the group follows a directory group (its members are managed by synchronisation). */
export async function isLdapSynced(db: Db, groupId: number): Promise<boolean> {
  const row = await db
    .selectFrom('ldap_group_links')
    .select('group_id')
    .where('group_id', '=', groupId)
    .executeTakeFirst();
  return row !== undefined;
}

const levelSchema = z
  .number()
  .int()
  .refine((n) => (GROUP_MEMBER_LEVELS as readonly number[]).includes(n), 'is not a group access level');

/**
 * The directory export `depot ldap sync` reads (YAML or JSON): each linked group with the
 * members its directory group grants, by username, with their access level.
 */
export const directorySchema = z.object({
  groups: z.array(
    z.object({
      /** The Depot group's full path. */
      group: z.string().min(1),
      /** The directory group's common name (defaults to the group path). */
      cn: z.string().min(1).optional(),
      members: z.record(z.string().min(1), levelSchema),
    }),
  ),
});
export type Directory = z.infer<typeof directorySchema>;

export class DirectoryError extends Error {}

/** Parses a directory file's text (YAML is a superset of JSON). */
export function parseDirectory(text: string): Directory {
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (error) {
    throw new DirectoryError(`not YAML or JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  const result = directorySchema.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new DirectoryError(`${issue?.path.join('.') || 'file'}: ${issue?.message ?? 'invalid'}`);
  }
  return result.data;
}

export interface GroupSyncResult {
  group: string;
  added: string[];
  updated: string[];
  removed: string[];
  /** Members whose level is overridden, left as they are. */
  overridden: string[];
  /** Usernames in the file with no Depot account. */
  unknown: string[];
  /** LDAP members no longer in the directory who stay because they are the last Owner. */
  keptLastOwner: string[];
}

/**
 * Brings LDAP-synchronised groups in line with the directory (GitLab's LDAP group sync): links
 * each group, adds its directory members as LDAP members, resets the level of every LDAP member
 * without an override to the directory's, and removes LDAP members the directory no longer lists
 * (never the last Owner). Members added by hand (not LDAP) stay as they are.
 */
export async function syncDirectory(deps: Deps, directory: Directory): Promise<GroupSyncResult[]> {
  const groups: Namespace[] = [];
  for (const entry of directory.groups) {
    const group = await findNamespaceByFullPath(deps.db, entry.group);
    if (group?.kind !== 'group') throw new DirectoryError(`no group ${entry.group}`);
    groups.push(group);
  }
  const results: GroupSyncResult[] = [];
  for (const [i, entry] of directory.groups.entries()) {
    results.push(await syncGroup(deps, groups[i] as Namespace, entry.cn ?? entry.group, entry.members));
  }
  return results;
}

async function syncGroup(
  deps: Deps,
  group: Namespace,
  cn: string,
  levels: Record<string, number>,
): Promise<GroupSyncResult> {
  const result: GroupSyncResult = {
    group: group.full_path,
    added: [],
    updated: [],
    removed: [],
    overridden: [],
    unknown: [],
    keptLastOwner: [],
  };
  const now = deps.clock.now();
  await deps.db
    .insertInto('ldap_group_links')
    .values({ group_id: group.id, cn, created_at: now, synced_at: now })
    .onConflict((oc) => oc.column('group_id').doUpdateSet({ cn, synced_at: now }))
    .execute();
  const target: MemberTarget = { type: 'group', group };
  const listed = new Map<number, User>();
  for (const [username, level] of Object.entries(levels)) {
    const user = await findUserByUsername(deps.db, username);
    if (!user) {
      result.unknown.push(username);
      continue;
    }
    listed.set(user.id, user);
    const member = await findMember(deps.db, 'group', group.id, user.id);
    if (!member || member.requested_at !== null) {
      await createMembership(deps, null, target, user, level, null, 'ldap', { ldap: true });
      result.added.push(user.username);
    } else if (member.ldap && member.override) {
      result.overridden.push(user.username);
    } else if (member.access_level !== level || !member.ldap) {
      // Never demote the last Owner: the group would be left without one.
      if (level !== 50 && (await isLastOwner(deps, target, member))) {
        result.keptLastOwner.push(user.username);
        continue;
      }
      await updateMemberRow(deps.db, member.id, { access_level: level, ldap: true, updated_at: now });
      result.updated.push(user.username);
    }
  }
  const ldapMembers = await deps.db
    .selectFrom('members')
    .selectAll()
    .where('source_type', '=', 'group')
    .where('source_id', '=', group.id)
    .where('ldap', '=', true)
    .where('requested_at', 'is', null)
    .execute();
  for (const member of ldapMembers) {
    if (listed.has(member.user_id)) continue;
    const user = await deps.db
      .selectFrom('users')
      .select('username')
      .where('id', '=', member.user_id)
      .executeTakeFirst();
    const name = user?.username ?? String(member.user_id);
    if (await isLastOwner(deps, target, member)) {
      result.keptLastOwner.push(name);
      continue;
    }
    await deps.db.transaction().execute(async (tx) => {
      await tx.deleteFrom('members').where('id', '=', member.id).execute();
      await recordMemberEvent(tx, 'left', member, now);
    });
    result.removed.push(name);
  }
  return result;
}
