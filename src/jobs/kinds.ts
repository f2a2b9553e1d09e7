import { archiveCacheCleanupJob, archiveCachePurgeJob } from './archive-cache.js';
import { createPipelineJob, stuckBuildsJob } from './ci.js';
import { dormantUsersJob } from './dormant-users.js';
import { environmentAutoDeleteJob, environmentAutoStopJob } from './environments.js';
import { eventsPurgeJob, eventsRetentionJob } from './events.js';
import { HOOK_JOB_KINDS } from './hooks.js';
import { billableMembersRefreshJob, memberExpiryJob } from './members.js';
import { removeSourceBranchJob } from './merge-requests.js';
import { oauthPruneJob } from './oauth.js';
import { pagesDomainsVerificationJob, pagesDomainVerifyJob } from './pages-domains.js';
import { repositoryMaintenanceJob } from './repository-maintenance.js';
import { bulkStorageMoveJob, storageMoveJob } from './storage-move.js';
import { deleteUserJob } from './user-deletion.js';
import type { JobKind } from './worker.js';

/** Every job kind the server runs; a new kind of background work adds itself here. */
export const JOB_KINDS: JobKind[] = [
  storageMoveJob,
  bulkStorageMoveJob,
  billableMembersRefreshJob,
  memberExpiryJob,
  oauthPruneJob,
  dormantUsersJob,
  repositoryMaintenanceJob,
  archiveCacheCleanupJob,
  archiveCachePurgeJob,
  pagesDomainsVerificationJob,
  pagesDomainVerifyJob,
  eventsRetentionJob,
  eventsPurgeJob,
  deleteUserJob,
  createPipelineJob,
  stuckBuildsJob,
  ...HOOK_JOB_KINDS,
  environmentAutoStopJob,
  environmentAutoDeleteJob,
  removeSourceBranchJob,
];
