/**
 * Every application setting of the spec's part 3 with GitLab's name, type and default
 * (lib/api/settings.rb, app/models/application_setting.rb, the ApplicationSetting entity).
 *
 * The spec writes a neutral word where GitLab's name holds a vendor's (`spam_filter_enabled` for
 * `akismet_enabled`): `alias` is that spelling. Both are read and both are answered, so GitLab's
 * clients and the spec's callers meet the names they know.
 */

export type SettingKind =
  | 'boolean'
  | 'integer'
  | 'float'
  | 'string'
  | 'strings'
  | 'integers'
  | 'visibility'
  | 'visibility_levels'
  | 'weights';

export interface SettingDefinition {
  name: string;
  kind: SettingKind;
  default: unknown;
  /** The spec's vendor-neutral spelling of the name. */
  alias?: string;
  /** Sealed with the instance key at rest (src/lib/secret-box.ts). */
  secret?: boolean;
  /** Not in answers: GitLab's entity leaves it out too. */
  hidden?: boolean;
  /** Grape's `values:` (400 `<name> does not have a valid value`). */
  values?: readonly (string | number)[];
}

/** GitLab's import sources of the spec's era (ten of them). */
export const IMPORT_SOURCES = [
  'github',
  'bitbucket',
  'bitbucket_server',
  'gitlab',
  'fogbugz',
  'git',
  'gitlab_project',
  'gitea',
  'manifest',
  'phabricator',
] as const;

export const VISIBILITY_LEVELS = { private: 0, internal: 10, public: 20 } as const;

/** KeyRestrictionValidator: 0 (no restriction), the sizes of each type, -1 (forbidden). */
const KEY_RESTRICTIONS = {
  rsa: [0, 1024, 2048, 3072, 4096, -1],
  dsa: [0, 1024, 2048, 3072, -1],
  ecdsa: [0, 256, 384, 521, -1],
  ed25519: [0, 256, -1],
} as const;

const b = (name: string, def: boolean, extra: Partial<SettingDefinition> = {}): SettingDefinition => ({
  name,
  kind: 'boolean',
  default: def,
  ...extra,
});
const i = (name: string, def: number | null, extra: Partial<SettingDefinition> = {}): SettingDefinition => ({
  name,
  kind: 'integer',
  default: def,
  ...extra,
});
const s = (name: string, def: string | null, extra: Partial<SettingDefinition> = {}): SettingDefinition => ({
  name,
  kind: 'string',
  default: def,
  ...extra,
});
const secret = (name: string, extra: Partial<SettingDefinition> = {}): SettingDefinition =>
  s(name, null, { secret: true, ...extra });

export const SETTINGS: readonly SettingDefinition[] = [
  b('admin_mode', false),
  s('abuse_notification_email', null),
  s('after_sign_out_path', null),
  s('after_sign_up_text', null),
  b('akismet_enabled', false, { alias: 'spam_filter_enabled' }),
  secret('akismet_api_key', { alias: 'spam_filter_api_key' }),
  b('allow_group_owners_to_manage_ldap', true),
  b('allow_local_requests_from_system_hooks', true),
  b('allow_local_requests_from_web_hooks_and_services', false),
  s('archive_builds_in_human_readable', null),
  b('asset_proxy_enabled', false),
  secret('asset_proxy_secret_key', { hidden: true }),
  s('asset_proxy_url', null),
  { name: 'asset_proxy_allowlist', kind: 'strings', default: [] },
  b('authorized_keys_enabled', true),
  s('auto_devops_domain', null),
  b('auto_devops_enabled', true),
  b('automatic_purchased_storage_allocation', false),
  b('check_namespace_plan', false),
  s('commit_email_hostname', null),
  i('container_registry_token_expire_delay', 5),
  b('deactivate_dormant_users', false),
  i('deactivate_dormant_users_period', 90),
  s('default_artifacts_expire_in', '30 days'),
  s('default_branch_name', null),
  i('default_branch_protection', 2, { values: [0, 1, 2] }),
  s('default_ci_config_path', null),
  { name: 'default_group_visibility', kind: 'visibility', default: 'private' },
  i('default_project_creation', 2, { values: [0, 1, 2] }),
  { name: 'default_project_visibility', kind: 'visibility', default: 'private' },
  i('default_projects_limit', 100000),
  { name: 'default_snippet_visibility', kind: 'visibility', default: 'private' },
  b('delayed_project_deletion', false),
  i('deletion_adjourned_period', 7),
  i('diff_max_patch_bytes', 204800),
  i('diff_max_files', 1000),
  i('diff_max_lines', 50000),
  b('disable_feed_token', false),
  { name: 'disabled_oauth_sign_in_sources', kind: 'strings', default: [] },
  b('dns_rebinding_protection_enabled', true),
  b('domain_denylist_enabled', false),
  { name: 'domain_denylist', kind: 'strings', default: null },
  { name: 'domain_allowlist', kind: 'strings', default: null },
  ...(['rsa', 'dsa', 'ecdsa', 'ed25519'] as const).map((type) =>
    i(`${type}_key_restriction`, 0, { values: KEY_RESTRICTIONS[type] }),
  ),
  s('eks_access_key_id', null, { alias: 'cloud_cluster_access_key_id' }),
  s('eks_account_id', null, { alias: 'cloud_cluster_account_id' }),
  secret('eks_secret_access_key', { alias: 'cloud_cluster_secret_access_key', hidden: true }),
  b('eks_integration_enabled', false, { alias: 'cloud_cluster_integration_enabled' }),
  s('elasticsearch_aws_access_key', null, { alias: 'search_engine_aws_access_key' }),
  s('elasticsearch_aws_region', 'us-east-1', { alias: 'search_engine_aws_region' }),
  secret('elasticsearch_aws_secret_access_key', { alias: 'search_engine_aws_secret_access_key', hidden: true }),
  b('elasticsearch_aws', false, { alias: 'search_engine_aws' }),
  i('elasticsearch_indexed_field_length_limit', 0, { alias: 'search_engine_indexed_field_length_limit' }),
  i('elasticsearch_indexed_file_size_limit_kb', 1024, { alias: 'search_engine_indexed_file_size_limit_kb' }),
  b('elasticsearch_indexing', false, { alias: 'search_engine_indexing' }),
  b('elasticsearch_limit_indexing', false, { alias: 'search_engine_limit_indexing' }),
  b('elasticsearch_search', false, { alias: 'search_engine_search' }),
  i('elasticsearch_max_bulk_concurrency', 10, { alias: 'search_engine_max_bulk_concurrency' }),
  i('elasticsearch_max_bulk_size_mb', 10, { alias: 'search_engine_max_bulk_size_mb' }),
  { name: 'elasticsearch_namespace_ids', kind: 'integers', default: [], alias: 'search_engine_namespace_ids' },
  { name: 'elasticsearch_project_ids', kind: 'integers', default: [], alias: 'search_engine_project_ids' },
  s('elasticsearch_url', 'http://localhost:9200', { alias: 'search_engine_url' }),
  s('elasticsearch_username', null, { alias: 'search_engine_username' }),
  secret('elasticsearch_password', { alias: 'search_engine_password', hidden: true }),
  s('email_additional_text', null),
  b('email_author_in_body', false),
  s('enabled_git_access_protocol', null, { values: ['ssh', 'http', 'all', 'nil', ''] }),
  b('enforce_namespace_storage_limit', false),
  b('enforce_terms', false),
  s('external_auth_client_cert', null),
  secret('external_auth_client_key_pass'),
  secret('external_auth_client_key'),
  b('external_authorization_service_enabled', false),
  s('external_authorization_service_default_label', null),
  { name: 'external_authorization_service_timeout', kind: 'float', default: 0.5 },
  s('external_authorization_service_url', null),
  s('external_pipeline_validation_service_url', null),
  secret('external_pipeline_validation_service_token'),
  i('external_pipeline_validation_service_timeout', null),
  i('file_template_project_id', null),
  i('first_day_of_week', 0),
  s('geo_node_allowed_ips', '0.0.0.0/0, ::/0', { alias: 'replica_node_allowed_ips' }),
  i('geo_status_timeout', 10, { alias: 'replica_status_timeout' }),
  i('git_two_factor_session_expiry', 15),
  i('gitaly_timeout_default', 55, { alias: 'git_storage_timeout_default' }),
  i('gitaly_timeout_fast', 10, { alias: 'git_storage_timeout_fast' }),
  i('gitaly_timeout_medium', 30, { alias: 'git_storage_timeout_medium' }),
  b('grafana_enabled', false, { alias: 'dashboards_enabled' }),
  s('grafana_url', '/-/grafana', { alias: 'dashboards_url' }),
  b('gravatar_enabled', true, { alias: 'avatar_service_enabled' }),
  b('hashed_storage_enabled', true),
  b('help_page_hide_commercial_content', false),
  s('help_page_support_url', null),
  s('help_page_text', null),
  s('help_text', null),
  b('hide_third_party_offers', false),
  s('home_page_url', null),
  b('housekeeping_enabled', true),
  b('housekeeping_bitmaps_enabled', true),
  i('housekeeping_full_repack_period', 50),
  i('housekeeping_gc_period', 200),
  i('housekeeping_incremental_repack_period', 10),
  b('html_emails_enabled', true),
  { name: 'import_sources', kind: 'strings', default: [...IMPORT_SOURCES] },
  b('in_product_marketing_emails_enabled', true),
  b('invisible_captcha_enabled', false),
  i('issues_create_limit', 0),
  b('keep_latest_artifact', true),
  i('local_markdown_version', 0),
  secret('mailgun_signing_key', { alias: 'mail_provider_signing_key' }),
  b('mailgun_events_enabled', false, { alias: 'mail_provider_events_enabled' }),
  s('maintenance_mode_message', null),
  b('maintenance_mode', false),
  i('max_artifacts_size', 100),
  i('max_attachment_size', 10),
  i('max_import_size', 0),
  i('max_pages_size', 100),
  b('pages_domain_verification_enabled', true),
  i('max_personal_access_token_lifetime', null),
  i('metrics_method_call_threshold', 10),
  b('mirror_available', true),
  // The keys the spec lists as answered without a parameter description; GitLab takes them too.
  b('signup_enabled', true),
  { name: 'restricted_visibility_levels', kind: 'visibility_levels', default: [] },
  b('password_authentication_enabled_for_web', true),
  s('sign_in_text', null),
  b('user_oauth_applications', true),
  i('session_expire_delay', 10080),
  s('terms', null),
  i('performance_bar_allowed_group_id', null),
  { name: 'outbound_local_requests_whitelist', kind: 'strings', default: [] },
  b('container_expiration_policies_enable_historic_entries', false),
  { name: 'repository_storages_weighted', kind: 'weights', default: { default: 100 } },
  i('terminal_max_session_time', 0),
  { name: 'polling_interval_multiplier', kind: 'float', default: 1 },
  b('user_show_add_ssh_key_message', true),
  b('npm_package_requests_forwarding', true),
  b('pypi_package_requests_forwarding', true),
  i('snippet_size_limit', 52428800),
  i('raw_blob_request_limit', 300),
  i('wiki_page_max_content_bytes', 52428800),
  b('require_admin_approval_after_user_signup', false),
  s('personal_access_token_prefix', null),
  s('rate_limiting_response_text', null),
  b('floc_enabled', false),
  b('plantuml_enabled', false),
  s('plantuml_url', null),
  b('kroki_enabled', false),
  s('kroki_url', null),
  // Depot's own (not GitLab's): whether POST /oauth/token offers the password grant.
  b('oauth_password_grant_enabled', true),
];

export const SETTINGS_BY_NAME: ReadonlyMap<string, SettingDefinition> = new Map(SETTINGS.map((d) => [d.name, d]));

/** The spec's neutral names → GitLab's. */
export const ALIASES: ReadonlyMap<string, string> = new Map(
  SETTINGS.filter((d) => d.alias).map((d) => [d.alias as string, d.name]),
);

/** Deprecated names GitLab still takes, written to (and answered from) their successors. */
export const DEPRECATED_NAMES: Readonly<Record<string, string>> = {
  admin_notification_email: 'abuse_notification_email',
  asset_proxy_whitelist: 'asset_proxy_allowlist',
  allow_local_requests_from_hooks_and_services: 'allow_local_requests_from_web_hooks_and_services',
  password_authentication_enabled: 'password_authentication_enabled_for_web',
  signin_enabled: 'password_authentication_enabled_for_web',
};

/**
 * Grape's `given X requires Y`: switching X on in a request without naming Y is 400
 * `{"error": "Y is missing"}`.
 */
export const COMPANIONS: Readonly<Record<string, readonly string[]>> = {
  akismet_enabled: ['akismet_api_key'],
  eks_integration_enabled: ['eks_account_id', 'eks_access_key_id', 'eks_secret_access_key'],
  external_authorization_service_enabled: [
    'external_authorization_service_url',
    'external_authorization_service_default_label',
    'external_authorization_service_timeout',
  ],
  housekeeping_enabled: [
    'housekeeping_bitmaps_enabled',
    'housekeeping_full_repack_period',
    'housekeeping_gc_period',
    'housekeeping_incremental_repack_period',
  ],
  mailgun_events_enabled: ['mailgun_signing_key'],
  plantuml_enabled: ['plantuml_url'],
  kroki_enabled: ['kroki_url'],
};
