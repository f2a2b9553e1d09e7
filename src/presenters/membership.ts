import type { MembershipRow } from '../db/queries/memberships.js';

/** GitLab's Membership entity: a group is a `Namespace` source. */
export function presentMembership(row: MembershipRow) {
  return {
    source_id: row.source_id,
    source_name: row.source_name,
    source_type: row.source_type === 'project' ? 'Project' : 'Namespace',
    access_level: row.access_level,
  };
}
