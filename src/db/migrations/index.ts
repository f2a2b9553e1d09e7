import type { Migration } from 'kysely';
import * as m0001 from './0001-foundation.js';
import * as m0002 from './0002-repository.js';
import * as m0003 from './0003-storage-moves.js';
import * as m0004 from './0004-oauth.js';
import * as m0005 from './0005-members.js';
import * as m0006 from './0006-user-lockout.js';
import * as m0007 from './0007-write-leases.js';
import * as m0008 from './0008-row-change-notices.js';
import * as m0009 from './0009-lookup-notices.js';
import * as m0010 from './0010-oauth-password-grant.js';
import * as m0011 from './0011-project-lfs-version.js';
import * as m0012 from './0012-settings-plan-limits-audit.js';
import * as m0013 from './0013-repository-housekeeping.js';
import * as m0014 from './0014-default-branch-protection.js';
import * as m0015 from './0015-event-feeds.js';
import * as m0016 from './0016-user-lifecycle.js';
import * as m0017 from './0017-group-links.js';
import * as m0018 from './0018-protected-branches.js';
import * as m0019 from './0019-merge-requests.js';
import * as m0020 from './0020-ci.js';
import * as m0021 from './0021-pages-error-tracking.js';
import * as m0022 from './0022-hooks-integrations.js';
import * as m0023 from './0023-environments.js';
import * as m0024 from './0024-redirect-routes.js';

/** Every migration in order. Names never change once landed. */
export const migrations: Record<string, Migration> = {
  '0001-foundation': m0001,
  '0002-repository': m0002,
  '0003-storage-moves': m0003,
  '0004-oauth': m0004,
  '0005-members': m0005,
  '0006-user-lockout': m0006,
  '0007-write-leases': m0007,
  '0008-row-change-notices': m0008,
  '0009-lookup-notices': m0009,
  '0010-oauth-password-grant': m0010,
  '0011-project-lfs-version': m0011,
  '0012-settings-plan-limits-audit': m0012,
  '0013-repository-housekeeping': m0013,
  '0014-default-branch-protection': m0014,
  '0015-event-feeds': m0015,
  '0016-user-lifecycle': m0016,
  '0017-group-links': m0017,
  '0018-protected-branches': m0018,
  '0019-merge-requests': m0019,
  '0020-ci': m0020,
  '0021-pages-error-tracking': m0021,
  '0022-hooks-integrations': m0022,
  '0023-environments': m0023,
  '0024-redirect-routes': m0024,
};
