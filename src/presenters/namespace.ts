import type { Namespace, User } from '../db/schema.js';
import { avatarUrl, type PresentContext } from './user.js';

/** Web URL of a namespace: `/<username>` for users, `/groups/<full_path>` for groups. */
export function namespaceWebUrl(ns: Namespace, pc: PresentContext): string {
  return ns.kind === 'user' ? `${pc.baseUrl}/${ns.full_path}` : `${pc.baseUrl}/groups/${ns.full_path}`;
}

/**
 * GitLab's NamespaceBasic entity. A user namespace shows its owner's avatar, so pass the owner
 * when there is one; groups have no avatar here.
 */
export function presentNamespaceBasic(ns: Namespace, pc: PresentContext, owner?: Pick<User, 'email'> | null) {
  return {
    id: ns.id,
    name: ns.name,
    path: ns.path,
    kind: ns.kind,
    full_path: ns.full_path,
    parent_id: ns.parent_id,
    avatar_url: ns.kind === 'user' && owner ? avatarUrl(owner.email) : null,
    web_url: namespaceWebUrl(ns, pc),
  };
}

/** Counts shown to group owners in the Namespace entity. */
export interface NamespaceCounts {
  membersCountWithDescendants: number;
  projectsCount: number;
}

/**
 * GitLab's (Community Edition) Namespace entity; `counts` only when the caller administers the
 * group, and `owner` for the avatar of a user namespace.
 */
export function presentNamespace(
  ns: Namespace,
  pc: PresentContext,
  counts: NamespaceCounts | null,
  owner?: Pick<User, 'email'> | null,
) {
  return {
    ...presentNamespaceBasic(ns, pc, owner),
    ...(counts
      ? {
          members_count_with_descendants: counts.membersCountWithDescendants,
          root_repository_size: null,
          projects_count: counts.projectsCount,
        }
      : {}),
  };
}
