import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';

/** A timestamptz column: written as a Date (or left to its default), read as a Date. */
type Timestamp = ColumnType<Date, Date | undefined, Date>;
type NullableTimestamp = ColumnType<Date | null, Date | null | undefined, Date | null>;
/** A date column, read and written as `YYYY-MM-DD`. */
type DateString = ColumnType<string | null, string | null | undefined, string | null>;
type Json<T> = ColumnType<T, string, string>;

export type Visibility = 'private' | 'internal' | 'public';
/**
 * GitLab's user states Depot has; `blocked_pending_approval` awaits an administrator after sign-up.
 * `blocked`, `blocked_pending_approval` and `banned` are GitLab's blocked states (`blocked?`).
 */
export type UserState = 'active' | 'blocked' | 'deactivated' | 'blocked_pending_approval' | 'banned';
export type MemberSource = 'group' | 'project';

export interface UsersTable {
  id: Generated<number>;
  username: string;
  email: string;
  name: string;
  password_digest: string | null;
  admin: Generated<boolean>;
  state: Generated<UserState>;
  bio: Generated<string>;
  location: Generated<string>;
  public_email: string | null;
  website_url: Generated<string>;
  organization: Generated<string>;
  job_title: Generated<string>;
  pronouns: string | null;
  linkedin: Generated<string>;
  twitter: Generated<string>;
  discord: Generated<string>;
  skype: Generated<string>;
  note: string | null;
  can_create_group: Generated<boolean>;
  projects_limit: Generated<number>;
  external: Generated<boolean>;
  private_profile: Generated<boolean>;
  bot: Generated<boolean>;
  two_factor_enabled: Generated<boolean>;
  theme_id: Generated<number>;
  color_scheme_id: Generated<number>;
  created_by_id: number | null;
  confirmed_at: NullableTimestamp;
  last_sign_in_at: NullableTimestamp;
  current_sign_in_at: NullableTimestamp;
  last_activity_on: DateString;
  /** Wrong passwords since the last success or unlock (Devise :lockable). */
  failed_attempts: Generated<number>;
  /** Set when the account was locked by too many wrong passwords; cleared on unlock. */
  locked_at: NullableTimestamp;
  /** The one ghost user: holds what deleted users authored (GitLab's internal `ghost` user type). */
  ghost: Generated<boolean>;
  /** Set when an administrator deleted the user; the `delete_user` job then removes the row. */
  deleting_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface NamespacesTable {
  id: Generated<number>;
  kind: 'user' | 'group';
  name: string;
  path: string;
  /** `parent/child/...`; kept in step with `path` and the parent's full path. */
  full_path: string;
  parent_id: number | null;
  /** Ids from the root namespace down to this one, inclusive (GitLab's traversal_ids). */
  traversal_ids: ColumnType<number[], number[], number[]>;
  owner_id: number | null;
  description: Generated<string>;
  visibility: Visibility;
  request_access_enabled: Generated<boolean>;
  project_creation_level: Generated<string>;
  subgroup_creation_level: Generated<string>;
  lfs_enabled: Generated<boolean>;
  share_with_group_lock: Generated<boolean>;
  require_two_factor_authentication: Generated<boolean>;
  two_factor_grace_period: Generated<number>;
  emails_enabled: Generated<boolean>;
  mentions_disabled: Generated<boolean>;
  default_branch: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ProjectFeatures {
  issues: string;
  repository: string;
  merge_requests: string;
  forking: string;
  wiki: string;
  builds: string;
  snippets: string;
  pages: string;
  analytics: string;
  operations: string;
  security_and_compliance: string;
  container_registry: string;
  environments: string;
  feature_flags: string;
  infrastructure: string;
  releases: string;
  monitor: string;
  model_experiments: string;
  model_registry: string;
  requirements: string;
}

export interface ProjectsTable {
  id: Generated<number>;
  namespace_id: number;
  name: string;
  path: string;
  full_path: string;
  description: string | null;
  visibility: Visibility;
  default_branch: string | null;
  creator_id: number | null;
  repository_storage: string;
  repository_read_only: Generated<boolean>;
  archived: Generated<boolean>;
  request_access_enabled: Generated<boolean>;
  lfs_enabled: Generated<boolean>;
  /** Raised with every LFS object linked to the project (archives depend on the set). */
  lfs_objects_version: Generated<number>;
  /** GitLab's default_branch_protection level when the project was created (0, 1 or 2). */
  default_branch_protection: Generated<number>;
  features: Json<ProjectFeatures>;
  topics: Json<string[]>;
  settings: Json<Record<string, unknown>>;
  created_at: Timestamp;
  updated_at: Timestamp;
  last_activity_at: Timestamp;
}

export interface MembersTable {
  id: Generated<number>;
  source_type: MemberSource;
  source_id: number;
  user_id: number;
  access_level: number;
  expires_at: DateString;
  created_by_id: number | null;
  /** Set while the row is a pending access request, null once it is a membership. */
  requested_at: NullableTimestamp;
  invite_source: string | null;
  ldap: Generated<boolean>;
  override: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface PersonalAccessTokensTable {
  id: Generated<number>;
  user_id: number;
  name: string;
  description: string | null;
  token_digest: string;
  scopes: Json<string[]>;
  expires_at: DateString;
  revoked: Generated<boolean>;
  impersonation: Generated<boolean>;
  previous_personal_access_token_id: number | null;
  last_used_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface EventsTable {
  id: Generated<number>;
  action: string;
  author_id: number;
  project_id: number | null;
  group_id: number | null;
  target_type: string | null;
  target_id: number | null;
  /** The target's number within its project (merge requests, issues); null when it has none. */
  target_iid: Generated<number | null>;
  target_title: string | null;
  push_data: Json<Record<string, unknown> | null>;
  created_at: Timestamp;
}

export interface ApplicationSettingsTable {
  key: string;
  value: Json<unknown>;
  updated_at: Timestamp;
}

export interface DB {
  users: UsersTable;
  namespaces: NamespacesTable;
  projects: ProjectsTable;
  members: MembersTable;
  personal_access_tokens: PersonalAccessTokensTable;
  events: EventsTable;
  application_settings: ApplicationSettingsTable;
  lfs_objects: LfsObjectsTable;
  lfs_objects_projects: LfsObjectsProjectsTable;
  rate_limit_counters: RateLimitCountersTable;
  jobs: JobsTable;
  repository_storage_moves: RepositoryStorageMovesTable;
  repository_write_leases: RepositoryWriteLeasesTable;
  ldap_group_links: LdapGroupLinksTable;
  billable_members: BillableMembersTable;
  project_group_links: ProjectGroupLinksTable;
  group_group_links: GroupGroupLinksTable;
  billable_member_refreshes: BillableMemberRefreshesTable;
  oauth_applications: OauthApplicationsTable;
  oauth_access_grants: OauthAccessGrantsTable;
  oauth_access_tokens: OauthAccessTokensTable;
  web_sessions: WebSessionsTable;
  plan_limits: PlanLimitsTable;
  audit_events: AuditEventsTable;
  repository_housekeeping: RepositoryHousekeepingTable;
  pages_domains: PagesDomainsTable;
  error_tracking_settings: ErrorTrackingSettingsTable;
  error_tracking_client_keys: ErrorTrackingClientKeysTable;
  error_tracking_errors: ErrorTrackingErrorsTable;
  error_tracking_error_events: ErrorTrackingErrorEventsTable;
  security_advisories: SecurityAdvisoriesTable;
  ci_build_reports: CiBuildReportsTable;
  merge_requests: MergeRequestsTable;
  merge_request_approvals: MergeRequestApprovalsTable;
  merge_request_commits: MergeRequestCommitsTable;
  approval_project_rules: ApprovalProjectRulesTable;
  approval_merge_request_rules: ApprovalMergeRequestRulesTable;
  project_approval_settings: ProjectApprovalSettingsTable;
  protected_branches: ProtectedBranchesTable;
  protected_branch_push_access_levels: ProtectedBranchAccessLevelsTable & { deploy_key_id: number | null };
  protected_branch_merge_access_levels: ProtectedBranchAccessLevelsTable;
  protected_branch_unprotect_access_levels: ProtectedBranchAccessLevelsTable;
  ci_registration_tokens: CiRegistrationTokensTable;
  ci_runners: CiRunnersTable;
  ci_runner_projects: CiRunnerProjectsTable;
  ci_runner_namespaces: CiRunnerNamespacesTable;
  ci_pipelines: CiPipelinesTable;
  ci_builds: CiBuildsTable;
  ci_build_trace_chunks: CiBuildTraceChunksTable;
  web_hooks: WebHooksTable;
  integrations: IntegrationsTable;
  hook_deliveries: HookDeliveriesTable;
  environments: EnvironmentsTable;
  deployments: DeploymentsTable;
  redirect_routes: RedirectRoutesTable;
}

/** An old full path that still names a project (migration 0024 keeps these). */
export interface RedirectRoutesTable {
  id: Generated<number>;
  project_id: number;
  path: string;
  created_at: Generated<Timestamp>;
}

/** A protected branch name or wildcard (GitLab's protected_branches). */
export interface ProtectedBranchesTable {
  id: Generated<number>;
  project_id: number;
  name: string;
  allow_force_push: Generated<boolean>;
  code_owner_approval_required: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** Who may push, merge or unprotect: exactly one of a role, a user or a group per row. */
export interface ProtectedBranchAccessLevelsTable {
  id: Generated<number>;
  protected_branch_id: number;
  access_level: number | null;
  user_id: number | null;
  group_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

type IntArray = ColumnType<number[], number[] | undefined, number[]>;

export type MergeRequestState = 'opened' | 'closed' | 'merged' | 'locked';

/** A merge request (migration 0019); `iid` counts per target project. */
export interface MergeRequestsTable {
  id: Generated<number>;
  iid: number;
  target_project_id: number;
  source_project_id: number;
  source_branch: string;
  target_branch: string;
  title: string;
  description: string | null;
  state: Generated<MergeRequestState>;
  author_id: number | null;
  assignee_ids: IntArray;
  reviewer_ids: IntArray;
  /** GitLab's merge_status: unchecked, checking, can_be_merged, cannot_be_merged. */
  merge_status: Generated<string>;
  /** The source branch's head as the merge request knows it. */
  sha: string | null;
  /** The target branch's tip when the head was last recorded (diff_refs.start_sha). */
  base_sha: string | null;
  merge_commit_sha: string | null;
  squash_commit_sha: string | null;
  squash: Generated<boolean>;
  remove_source_branch: Generated<boolean>;
  merged_by_id: number | null;
  merged_at: NullableTimestamp;
  closed_by_id: number | null;
  closed_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** The commits a merged merge request brought (for the changelog). */
export interface MergeRequestCommitsTable {
  merge_request_id: number;
  project_id: number;
  sha: string;
}

export interface MergeRequestApprovalsTable {
  id: Generated<number>;
  merge_request_id: number;
  user_id: number;
  created_at: Timestamp;
}

export type ApprovalRuleType = 'regular' | 'code_owner' | 'report_approver' | 'any_approver';

export interface ApprovalProjectRulesTable {
  id: Generated<number>;
  project_id: number;
  name: string;
  rule_type: Generated<ApprovalRuleType>;
  approvals_required: Generated<number>;
  user_ids: IntArray;
  group_ids: IntArray;
  /** Protected branch ids, plain integers (no foreign key; see migration 0019). */
  protected_branch_ids: IntArray;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ApprovalMergeRequestRulesTable {
  id: Generated<number>;
  merge_request_id: number;
  name: string;
  rule_type: Generated<ApprovalRuleType>;
  approvals_required: Generated<number>;
  user_ids: IntArray;
  group_ids: IntArray;
  approval_project_rule_id: number | null;
  section: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ProjectApprovalSettingsTable {
  project_id: number;
  approvals_before_merge: Generated<number>;
  reset_approvals_on_push: Generated<boolean>;
  disable_overriding_approvers_per_merge_request: Generated<boolean>;
  merge_requests_author_approval: Generated<boolean>;
  merge_requests_disable_committers_approval: Generated<boolean>;
  require_password_to_approve: Generated<boolean>;
  updated_at: Timestamp;
}

export type MergeRequest = Selectable<MergeRequestsTable>;
export type ApprovalProjectRule = Selectable<ApprovalProjectRulesTable>;
export type ApprovalMergeRequestRule = Selectable<ApprovalMergeRequestRulesTable>;
export type ProjectApprovalSettings = Selectable<ProjectApprovalSettingsTable>;

export interface WebHooksTable {
  id: Generated<number>;
  project_id: number;
  url: string;
  name: string | null;
  description: string | null;
  /** The secret token sealed with the instance key (src/lib/secret-box.ts). */
  sealed_token: string | null;
  /** Event flags by GitLab's name (`push_events`: true). */
  events: Json<Record<string, boolean>>;
  enable_ssl_verification: Generated<boolean>;
  push_events_branch_filter: string | null;
  branch_filter_strategy: Generated<string>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type WebHook = Selectable<WebHooksTable>;

export interface IntegrationsTable {
  id: Generated<number>;
  project_id: number;
  slug: string;
  active: Generated<boolean>;
  events: Json<Record<string, boolean>>;
  /** Settings that are not secret. */
  properties: Json<Record<string, unknown>>;
  /** Secret settings, each sealed with the instance key. */
  sealed_secrets: Json<Record<string, string>>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Integration = Selectable<IntegrationsTable>;

export interface HookDeliveriesTable {
  id: Generated<number>;
  project_id: number;
  web_hook_id: number | null;
  integration_id: number | null;
  trigger: string;
  url: string;
  attempt: number;
  /** `delivered`, `retrying` or `failed`. */
  state: string;
  request_headers: Json<Record<string, string>>;
  request_data: Json<unknown>;
  response_status: string | null;
  response_body: string | null;
  internal_error_message: string | null;
  execution_duration: Generated<number>;
  created_at: Timestamp;
}
export type HookDelivery = Selectable<HookDeliveriesTable>;

export interface RepositoryHousekeepingTable {
  project_id: number;
  pushes_since_gc: Generated<number>;
}

/** bigint columns: `pg` reads them as numbers here (src/db/database.ts sets the int8 parser). */
export interface PlanLimitsTable {
  plan_name: string;
  conan_max_file_size: ColumnType<number, number | undefined, number>;
  generic_packages_max_file_size: ColumnType<number, number | undefined, number>;
  helm_max_file_size: ColumnType<number, number | undefined, number>;
  maven_max_file_size: ColumnType<number, number | undefined, number>;
  npm_max_file_size: ColumnType<number, number | undefined, number>;
  nuget_max_file_size: ColumnType<number, number | undefined, number>;
  pypi_max_file_size: ColumnType<number, number | undefined, number>;
  terraform_module_max_file_size: ColumnType<number, number | undefined, number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface AuditEventsTable {
  id: Generated<number>;
  author_id: number | null;
  entity_id: number;
  entity_type: string;
  event_name: string;
  details: Json<Record<string, unknown>>;
  created_at: Timestamp;
}

export interface LfsObjectsTable {
  id: Generated<number>;
  oid: string;
  /** bigint: PostgreSQL returns it as a string through `pg`; read it with Number(). */
  size: ColumnType<string | number, number, number>;
  created_at: Generated<Date>;
}

export interface LfsObjectsProjectsTable {
  lfs_object_id: number;
  project_id: number;
  created_at: Generated<Date>;
}

export interface RateLimitCountersTable {
  key: string;
  window_started_at: Date;
  hits: number;
}

export type JobState = 'queued' | 'running' | 'done' | 'failed';

export interface JobsTable {
  id: Generated<number>;
  kind: string;
  payload: Json<Record<string, unknown>>;
  state: Generated<JobState>;
  run_at: Generated<Date>;
  attempts: Generated<number>;
  max_attempts: Generated<number>;
  locked_by: string | null;
  locked_at: NullableTimestamp;
  heartbeat_at: NullableTimestamp;
  last_error: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  finished_at: NullableTimestamp;
}

export type StorageMoveContainer = 'project' | 'snippet' | 'group';

/** A repository write under way (migration 0007); storage moves wait for these to end. */
export interface RepositoryWriteLeasesTable {
  id: Generated<number>;
  project_id: number;
  /** `<host>:<pid>:<nonce>` of the writing process. */
  holder: string;
  /** What writes: `push`, `api`, `lfs`. */
  kind: string;
  acquired_at: Generated<Date>;
  heartbeat_at: Generated<Date>;
}

export interface RepositoryStorageMovesTable {
  id: Generated<number>;
  container_type: StorageMoveContainer;
  container_id: number;
  /** GitLab's numeric state (src/storage/moves.ts MOVE_STATES). */
  state: number;
  source_storage_name: string;
  destination_storage_name: string;
  error_message: string | null;
  /** The step the mover is on (for logs, the CLI and crash recovery). */
  step: string | null;
  /** bigint: `pg` returns it as a string; read it with Number(). */
  bytes_total: ColumnType<string | number, number | undefined, number>;
  bytes_copied: ColumnType<string | number, number | undefined, number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type Job = Selectable<JobsTable>;
export type StorageMove = Selectable<RepositoryStorageMovesTable>;

export type User = Selectable<UsersTable>;
export type NewUser = Insertable<UsersTable>;
export type UserUpdate = Updateable<UsersTable>;
export type Namespace = Selectable<NamespacesTable>;
export type Project = Selectable<ProjectsTable>;
export type Member = Selectable<MembersTable>;
export type PersonalAccessToken = Selectable<PersonalAccessTokensTable>;
export type Event = Selectable<EventsTable>;

export interface OauthApplicationsTable {
  id: Generated<number>;
  /** The public `client_id`. */
  uid: string;
  secret_digest: string;
  name: string;
  /** Registered redirect URIs, one per line, each matched exactly. */
  redirect_uri: string;
  scopes: Json<string[]>;
  confidential: Generated<boolean>;
  /** The user who registered it on /profile/applications; null for instance-wide applications. */
  owner_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface OauthAccessGrantsTable {
  id: Generated<number>;
  application_id: number;
  user_id: number;
  code_digest: string;
  redirect_uri: string;
  scopes: Json<string[]>;
  code_challenge: string | null;
  code_challenge_method: string | null;
  expires_at: Timestamp;
  revoked_at: NullableTimestamp;
  access_token_id: number | null;
  created_at: Timestamp;
}

export interface OauthAccessTokensTable {
  id: Generated<number>;
  application_id: number;
  user_id: number;
  token_digest: string;
  refresh_token_digest: string | null;
  scopes: Json<string[]>;
  expires_in: number;
  family: string;
  previous_token_id: number | null;
  revoked_at: NullableTimestamp;
  created_at: Timestamp;
}

export interface WebSessionsTable {
  id: Generated<number>;
  session_digest: string;
  user_id: number | null;
  csrf_token: string;
  return_to: string | null;
  expires_at: Timestamp;
  created_at: Timestamp;
}

export type OauthApplication = Selectable<OauthApplicationsTable>;
export type OauthAccessGrant = Selectable<OauthAccessGrantsTable>;
export type OauthAccessToken = Selectable<OauthAccessTokensTable>;
export type WebSession = Selectable<WebSessionsTable>;

/** A group kept in step with a directory group (LDAP synchronisation, `depot ldap sync`). */
export interface LdapGroupLinksTable {
  group_id: number;
  /** The directory group's common name. */
  cn: string;
  created_at: Timestamp;
  synced_at: Timestamp;
}

export type BillableMembershipType = 'group_member' | 'project_member';

/** The daily snapshot of a top-level group's billable users (refreshed at 12:00 UTC). */
export interface BillableMembersTable {
  group_id: number;
  user_id: number;
  membership_type: BillableMembershipType;
  /** The user's highest level anywhere in the hierarchy when the snapshot was taken. */
  access_level: number;
  /** When the user's oldest membership in the hierarchy was created. */
  joined_at: Date;
}

export interface BillableMemberRefreshesTable {
  group_id: number;
  refreshed_at: Date;
}

export type LdapGroupLink = Selectable<LdapGroupLinksTable>;

/** A project shared with a group: the group's members get at most `group_access` on it. */
export interface ProjectGroupLinksTable {
  id: Generated<number>;
  project_id: number;
  group_id: number;
  group_access: number;
  expires_at: DateString;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** A group shared with a group: members of `shared_with_group_id` get at most `group_access`. */
export interface GroupGroupLinksTable {
  id: Generated<number>;
  shared_group_id: number;
  shared_with_group_id: number;
  group_access: number;
  expires_at: DateString;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type ProjectGroupLink = Selectable<ProjectGroupLinksTable>;
export type GroupGroupLink = Selectable<GroupGroupLinksTable>;
export interface PagesDomainsTable {
  id: Generated<number>;
  project_id: number;
  domain: string;
  /** The PEM chain as given (leaf first). */
  certificate: string | null;
  /** `openssl x509 -noout -text` of the leaf, made when the certificate is saved. */
  certificate_text: string | null;
  /** The private key, sealed with the instance key (src/lib/secret-box.ts). */
  key_sealed: string | null;
  certificate_source: Generated<'user_provided' | 'gitlab_provided'>;
  certificate_valid_not_before: NullableTimestamp;
  certificate_valid_not_after: NullableTimestamp;
  auto_ssl_enabled: Generated<boolean>;
  verification_code: string;
  verified_at: NullableTimestamp;
  enabled_until: NullableTimestamp;
  /** When a domain that failed verification past its grace period goes (GitLab's REMOVAL_DELAY). */
  remove_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type PagesDomain = Selectable<PagesDomainsTable>;

export interface ErrorTrackingSettingsTable {
  project_id: number;
  enabled: boolean;
  integrated: boolean;
  api_url: string | null;
  project_name: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type ErrorTrackingSetting = Selectable<ErrorTrackingSettingsTable>;

export interface ErrorTrackingClientKeysTable {
  id: Generated<number>;
  project_id: number;
  active: Generated<boolean>;
  public_key: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type ErrorTrackingClientKey = Selectable<ErrorTrackingClientKeysTable>;

export interface ErrorTrackingErrorsTable {
  id: Generated<number>;
  project_id: number;
  /** SHA-1 of name, description, actor and platform: what groups events into one error. */
  fingerprint: string;
  name: string;
  description: string;
  actor: string;
  platform: string | null;
  status: Generated<string>;
  events_count: Generated<number>;
  first_seen_at: Timestamp;
  last_seen_at: Timestamp;
}
export type ErrorTrackingError = Selectable<ErrorTrackingErrorsTable>;

export interface ErrorTrackingErrorEventsTable {
  id: Generated<number>;
  error_id: number;
  description: string;
  environment: string | null;
  level: string | null;
  occurred_at: Timestamp;
  payload: Json<Record<string, unknown>>;
}

export interface SecurityAdvisoriesTable {
  id: Generated<number>;
  /** The OSV id (GHSA-…, PYSEC-…). */
  osv_id: string;
  ecosystem: string;
  /** The package name as the ecosystem's advisories spell it (src/services/dependencies/versions.ts). */
  package_name: string;
  summary: string | null;
  /** GitLab's severities: critical, high, medium, low, info or unknown. */
  severity: string;
  /** The OSV `affected` entries for this package. */
  affected: Json<unknown[]>;
  modified_at: NullableTimestamp;
  withdrawn_at: NullableTimestamp;
}
export type RunnerType = 'instance_type' | 'group_type' | 'project_type';
export type RegistrationScope = 'instance' | 'group' | 'project';

export interface CiRegistrationTokensTable {
  scope: RegistrationScope;
  /** The group or project id; 0 for the instance. */
  scope_id: number;
  token_digest: string;
  /** The token sealed with the instance key (src/lib/secret-box.ts), to be shown again. */
  token_sealed: string;
  created_at: Timestamp;
}

export interface CiRunnersTable {
  id: Generated<number>;
  runner_type: RunnerType;
  token_digest: string;
  description: Generated<string>;
  active: Generated<boolean>;
  locked: Generated<boolean>;
  run_untagged: Generated<boolean>;
  access_level: Generated<string>;
  maximum_timeout: number | null;
  tag_list: ColumnType<string[], string[] | undefined, string[]>;
  name: string | null;
  version: string | null;
  revision: string | null;
  platform: string | null;
  architecture: string | null;
  ip_address: string | null;
  contacted_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CiRunnerProjectsTable {
  runner_id: number;
  project_id: number;
  created_at: Timestamp;
}

export interface CiRunnerNamespacesTable {
  runner_id: number;
  namespace_id: number;
}

export interface CiPipelinesTable {
  id: Generated<number>;
  iid: number;
  project_id: number;
  ref: string;
  tag: boolean;
  sha: string;
  before_sha: string;
  status: string;
  source: string;
  protected: boolean;
  user_id: number | null;
  yaml_errors: string | null;
  variables: Json<{ key: string; value: string }[]>;
  created_at: Timestamp;
  updated_at: Timestamp;
  started_at: NullableTimestamp;
  finished_at: NullableTimestamp;
}

export interface CiBuildsTable {
  id: Generated<number>;
  pipeline_id: number;
  project_id: number;
  name: string;
  stage: string;
  stage_idx: number;
  status: string;
  when: string;
  allow_failure: boolean;
  /** A later try of the same job replaced this one. */
  retried: Generated<boolean>;
  needs: ColumnType<string[] | null, string[] | null | undefined, string[] | null>;
  tag_list: ColumnType<string[], string[] | undefined, string[]>;
  options: Json<Record<string, unknown>>;
  ref: string;
  tag: boolean;
  sha: string;
  protected: boolean;
  /** Seconds the job may run. */
  timeout: number;
  user_id: number | null;
  runner_id: number | null;
  token_digest: string | null;
  failure_reason: string | null;
  exit_code: number | null;
  coverage: number | null;
  trace_size: Generated<number>;
  artifacts_file: string | null;
  artifacts_size: ColumnType<string | null, number | null | undefined, number | null>;
  artifacts_expire_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
  queued_at: NullableTimestamp;
  started_at: NullableTimestamp;
  finished_at: NullableTimestamp;
}

export interface CiBuildTraceChunksTable {
  build_id: number;
  offset: number;
  data: Buffer;
}

export type Runner = Selectable<CiRunnersTable>;
export type Pipeline = Selectable<CiPipelinesTable>;
export type Build = Selectable<CiBuildsTable>;

/** A report artifact of a CI job (`reports:<file_type>`), kept whole. */
export interface CiBuildReportsTable {
  id: Generated<number>;
  build_id: number;
  file_type: string;
  filename: string;
  content: Buffer;
  created_at: Generated<Date>;
}
/** A deployment target of a project (GitLab's environments). */
export interface EnvironmentsTable {
  id: Generated<number>;
  project_id: number;
  name: string;
  slug: string;
  external_url: string | null;
  /** available, stopping or stopped. */
  state: Generated<string>;
  tier: Generated<string>;
  description: Generated<string | null>;
  auto_stop_at: NullableTimestamp;
  /** Set by the review-app clean-up: the environment is deleted at this time. */
  auto_delete_at: NullableTimestamp;
  /** The stop job whose end was last applied to this environment. */
  last_stop_build_id: Generated<number | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** A deployment to an environment, by a CI job (deployable_id) or through the API. */
export interface DeploymentsTable {
  id: Generated<number>;
  iid: number;
  project_id: number;
  environment_id: number;
  ref: string;
  tag: Generated<boolean>;
  sha: string;
  user_id: number | null;
  deployable_id: number | null;
  status: string;
  /** The name of the job that stops the environment this deployment made (`environment:on_stop`). */
  on_stop: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  finished_at: NullableTimestamp;
}

export type Environment = Selectable<EnvironmentsTable>;
export type Deployment = Selectable<DeploymentsTable>;
