/**
 * Every kind of project integration Depot knows, under GitLab's slugs, with the parameters
 * GitLab's API takes for it (lib/api/helpers/integrations_helpers.rb), which of them are secret
 * (sealed at rest, never returned), and the events each kind listens to with their defaults.
 */

export type FieldType = 'string' | 'boolean' | 'integer';

export interface IntegrationField {
  name: string;
  type: FieldType;
  required?: boolean;
  /** Sealed with the instance key and never returned; a PUT without it keeps the stored one. */
  secret?: boolean;
  /** A URL Depot sends requests to: checked by the outbound guard when saved. */
  target?: boolean;
  /** A URL shown as a link (issue trackers, wikis): must parse as http(s). */
  url?: boolean;
  /** A list of e-mail addresses (comma or whitespace separated). */
  emails?: boolean;
  values?: readonly string[];
  default?: string | boolean | number;
}

/** Event names as GitLab's integrations name them, and the API flag of each. */
export const EVENT_FLAGS = {
  push: 'push_events',
  issue: 'issues_events',
  confidential_issue: 'confidential_issues_events',
  merge_request: 'merge_requests_events',
  note: 'note_events',
  confidential_note: 'confidential_note_events',
  tag_push: 'tag_push_events',
  pipeline: 'pipeline_events',
  wiki_page: 'wiki_page_events',
  deployment: 'deployment_events',
  job: 'job_events',
  commit: 'commit_events',
  incident: 'incident_events',
  alert: 'alert_events',
} as const;
export type EventName = keyof typeof EVENT_FLAGS;
export type EventFlag = (typeof EVENT_FLAGS)[EventName];

/** The flags every integration response carries (GitLab's ProjectIntegrationBasic). */
export const RESPONSE_EVENT_FLAGS = [
  'commit_events',
  'push_events',
  'issues_events',
  'alert_events',
  'confidential_issues_events',
  'merge_requests_events',
  'tag_push_events',
  'deployment_events',
  'note_events',
  'confidential_note_events',
  'pipeline_events',
  'wiki_page_events',
  'job_events',
  'incident_events',
] as const;

/** GitLab's column defaults for the event flags. */
export const EVENT_DEFAULTS: Record<EventFlag, boolean> = {
  push_events: true,
  issues_events: true,
  confidential_issues_events: true,
  merge_requests_events: true,
  note_events: true,
  confidential_note_events: true,
  tag_push_events: true,
  pipeline_events: true,
  wiki_page_events: true,
  deployment_events: false,
  job_events: true,
  commit_events: true,
  incident_events: false,
  alert_events: true,
};

export type DeliveryKind = 'chat' | 'email_push' | 'email_pipeline' | 'build' | 'none';

export interface IntegrationKind {
  slug: string;
  title: string;
  fields: IntegrationField[];
  events: EventName[];
  delivery: DeliveryKind;
  /** Chat kinds: the payload format of the service. */
  chat?: 'slack' | 'teams' | 'google_chat' | 'discord' | 'plain_text' | 'webex' | 'telegram';
}

export const BRANCHES_TO_BE_NOTIFIED = ['default', 'protected', 'default_and_protected', 'all'] as const;

const s = (name: string, extra: Partial<IntegrationField> = {}): IntegrationField => ({
  name,
  type: 'string',
  ...extra,
});
const b = (name: string, extra: Partial<IntegrationField> = {}): IntegrationField => ({
  name,
  type: 'boolean',
  ...extra,
});
const i = (name: string, extra: Partial<IntegrationField> = {}): IntegrationField => ({
  name,
  type: 'integer',
  ...extra,
});

const branches = (fallback = 'default') =>
  s('branches_to_be_notified', { values: BRANCHES_TO_BE_NOTIFIED, default: fallback });
const brokenOnly = b('notify_only_broken_pipelines', { default: true });
/** Deprecated (GitLab keeps it): true narrows notifications to the default branch. */
const onlyDefault = b('notify_only_default_branch', { default: false });
const webhook = (required = true) => s('webhook', { required, secret: true, target: true });

const CHANNEL_FIELDS = [
  'push_channel',
  'issue_channel',
  'incident_channel',
  'alert_channel',
  'confidential_issue_channel',
  'merge_request_channel',
  'note_channel',
  'confidential_note_channel',
  'tag_push_channel',
  'deployment_channel',
  'pipeline_channel',
  'wiki_page_channel',
].map((name) => s(name));

const CHAT_EVENTS: EventName[] = [
  'push',
  'issue',
  'confidential_issue',
  'merge_request',
  'note',
  'confidential_note',
  'tag_push',
  'pipeline',
  'wiki_page',
];
const BUILD_EVENTS: EventName[] = ['push', 'merge_request', 'tag_push'];

const trackerFields = (newIssue: boolean) => [
  s('project_url', { required: true, url: true }),
  s('issues_url', { required: true, url: true }),
  ...(newIssue ? [s('new_issue_url', { required: true, url: true })] : []),
  s('title'),
  s('description'),
];

const KINDS: IntegrationKind[] = [
  {
    slug: 'apple-app-store',
    title: 'Apple App Store Connect',
    fields: [
      s('app_store_issuer_id', { required: true }),
      s('app_store_key_id', { required: true }),
      s('app_store_private_key_file_name', { required: true }),
      s('app_store_private_key', { required: true, secret: true }),
      b('app_store_protected_refs', { default: true }),
    ],
    events: [],
    delivery: 'none',
  },
  {
    slug: 'asana',
    title: 'Asana',
    fields: [s('api_key', { required: true, secret: true }), s('restrict_to_branch')],
    events: ['push'],
    delivery: 'none',
  },
  {
    slug: 'assembla',
    title: 'Assembla',
    fields: [s('token', { required: true, secret: true }), s('subdomain')],
    events: ['push'],
    delivery: 'none',
  },
  {
    slug: 'bamboo',
    title: 'Atlassian Bamboo',
    fields: [
      s('bamboo_url', { required: true, target: true }),
      b('enable_ssl_verification', { default: true }),
      s('build_key', { required: true }),
      s('username', { required: true }),
      s('password', { required: true, secret: true }),
    ],
    events: ['push', 'merge_request', 'tag_push'],
    delivery: 'build',
  },
  { slug: 'bugzilla', title: 'Bugzilla', fields: trackerFields(true), events: [], delivery: 'none' },
  {
    slug: 'buildkite',
    title: 'Buildkite',
    fields: [
      s('token', { required: true, secret: true }),
      s('project_url', { required: true, url: true }),
      b('enable_ssl_verification', { default: true }),
    ],
    events: BUILD_EVENTS,
    delivery: 'build',
  },
  {
    slug: 'campfire',
    title: 'Campfire',
    fields: [s('token', { required: true, secret: true }), s('subdomain'), s('room')],
    events: ['push'],
    delivery: 'none',
  },
  { slug: 'clickup', title: 'ClickUp', fields: trackerFields(false), events: [], delivery: 'none' },
  {
    slug: 'confluence',
    title: 'Confluence Workspace',
    fields: [s('confluence_url', { required: true, url: true })],
    events: [],
    delivery: 'none',
  },
  {
    slug: 'custom-issue-tracker',
    title: 'Custom issue tracker',
    fields: trackerFields(true),
    events: [],
    delivery: 'none',
  },
  {
    slug: 'datadog',
    title: 'Datadog',
    fields: [
      s('api_key', { required: true, secret: true }),
      s('datadog_site', { default: 'datadoghq.com' }),
      s('api_url', { url: true }),
      b('archive_trace_events', { default: false }),
      s('datadog_service'),
      s('datadog_env'),
      s('datadog_tags'),
    ],
    events: ['pipeline', 'job'],
    delivery: 'none',
  },
  {
    slug: 'discord',
    title: 'Discord Notifications',
    fields: [webhook(), branches(), brokenOnly, ...CHANNEL_FIELDS],
    events: [...CHAT_EVENTS, 'deployment'],
    delivery: 'chat',
    chat: 'discord',
  },
  {
    slug: 'drone-ci',
    title: 'Drone',
    fields: [
      s('token', { required: true, secret: true }),
      s('drone_url', { required: true, target: true }),
      b('enable_ssl_verification', { default: true }),
    ],
    events: BUILD_EVENTS,
    delivery: 'build',
  },
  {
    slug: 'emails-on-push',
    title: 'Emails on push',
    fields: [
      s('recipients', { required: true, emails: true }),
      b('disable_diffs', { default: false }),
      b('send_from_committer_email', { default: false }),
      branches('all'),
    ],
    events: ['push', 'tag_push'],
    delivery: 'email_push',
  },
  {
    slug: 'ewm',
    title: 'EWM',
    fields: trackerFields(true),
    events: [],
    delivery: 'none',
  },
  {
    slug: 'external-wiki',
    title: 'External wiki',
    fields: [s('external_wiki_url', { required: true, url: true })],
    events: [],
    delivery: 'none',
  },
  {
    slug: 'flowdock',
    title: 'Flowdock',
    fields: [s('token', { required: true, secret: true })],
    events: ['push'],
    delivery: 'none',
  },
  {
    slug: 'github',
    title: 'GitHub',
    fields: [
      s('token', { required: true, secret: true }),
      s('repository_url', { required: true, url: true }),
      b('static_context', { default: false }),
    ],
    events: ['pipeline'],
    delivery: 'none',
  },
  {
    slug: 'google-play',
    title: 'Google Play',
    fields: [
      s('package_name', { required: true }),
      s('service_account_key_file_name', { required: true }),
      s('service_account_key', { required: true, secret: true }),
      b('google_play_protected_refs', { default: true }),
    ],
    events: [],
    delivery: 'none',
  },
  {
    slug: 'hangouts-chat',
    title: 'Google Chat',
    fields: [webhook(), branches(), brokenOnly],
    events: CHAT_EVENTS,
    delivery: 'chat',
    chat: 'google_chat',
  },
  {
    slug: 'harbor',
    title: 'Harbor',
    fields: [
      s('url', { required: true, url: true }),
      s('project_name', { required: true }),
      s('username', { required: true }),
      s('password', { required: true, secret: true }),
    ],
    events: [],
    delivery: 'none',
  },
  {
    slug: 'irker',
    title: 'irker (IRC gateway)',
    fields: [
      s('recipients', { required: true }),
      s('default_irc_uri'),
      s('server_host', { default: 'localhost' }),
      i('server_port', { default: 6659 }),
      b('colorize_messages', { default: false }),
    ],
    events: ['push'],
    delivery: 'none',
  },
  {
    slug: 'jenkins',
    title: 'Jenkins',
    fields: [
      s('jenkins_url', { required: true, target: true }),
      b('enable_ssl_verification', { default: true }),
      s('project_name', { required: true }),
      s('username'),
      s('password', { secret: true }),
    ],
    events: BUILD_EVENTS,
    delivery: 'build',
  },
  {
    slug: 'jira',
    title: 'Jira',
    fields: [
      s('url', { required: true, url: true }),
      s('api_url', { url: true }),
      i('jira_auth_type', { default: 0 }),
      s('username'),
      s('password', { required: true, secret: true }),
      b('jira_issue_transition_automatic', { default: false }),
      s('jira_issue_transition_id'),
      s('jira_issue_prefix'),
      s('jira_issue_regex'),
      b('comment_on_event_enabled', { default: false }),
    ],
    events: ['commit', 'merge_request'],
    delivery: 'none',
  },
  {
    slug: 'mattermost',
    title: 'Mattermost notifications',
    fields: [webhook(), s('username'), s('channel'), branches(), brokenOnly, onlyDefault, ...CHANNEL_FIELDS],
    events: [...CHAT_EVENTS, 'deployment'],
    delivery: 'chat',
    chat: 'slack',
  },
  {
    slug: 'mattermost-slash-commands',
    title: 'Mattermost slash commands',
    fields: [s('token', { required: true, secret: true }), s('username')],
    events: [],
    delivery: 'none',
  },
  {
    slug: 'microsoft-teams',
    title: 'Microsoft Teams notifications',
    fields: [webhook(), branches(), brokenOnly],
    events: CHAT_EVENTS,
    delivery: 'chat',
    chat: 'teams',
  },
  {
    slug: 'packagist',
    title: 'Packagist',
    fields: [
      s('username', { required: true }),
      s('token', { required: true, secret: true }),
      s('server', { target: true }),
    ],
    events: BUILD_EVENTS,
    delivery: 'build',
  },
  {
    slug: 'pipelines-email',
    title: 'Pipeline status emails',
    fields: [
      s('recipients', { required: true, emails: true }),
      brokenOnly,
      b('notify_only_default_branch', { default: false }),
      b('add_pusher', { default: false }),
      branches(),
    ],
    events: ['pipeline'],
    delivery: 'email_pipeline',
  },
  {
    slug: 'pivotaltracker',
    title: 'Pivotal Tracker',
    fields: [s('token', { required: true, secret: true }), s('restrict_to_branch')],
    events: ['push'],
    delivery: 'none',
  },
  {
    slug: 'prometheus',
    title: 'Prometheus',
    fields: [
      b('manual_configuration', { default: false }),
      s('api_url', { required: true, url: true }),
      s('google_iap_audience_client_id', { required: true }),
      s('google_iap_service_account_json', { required: true, secret: true }),
    ],
    events: [],
    delivery: 'none',
  },
  {
    slug: 'pumble',
    title: 'Pumble',
    fields: [webhook(), branches(), brokenOnly],
    events: CHAT_EVENTS,
    delivery: 'chat',
    chat: 'plain_text',
  },
  {
    slug: 'pushover',
    title: 'Pushover',
    fields: [
      s('api_key', { required: true, secret: true }),
      s('user_key', { required: true, secret: true }),
      s('priority', { required: true, values: ['-2', '-1', '0', '1', '2'] }),
      s('device', { required: true }),
      s('sound', { required: true }),
    ],
    events: ['push'],
    delivery: 'none',
  },
  { slug: 'redmine', title: 'Redmine', fields: trackerFields(true), events: [], delivery: 'none' },
  {
    slug: 'slack',
    title: 'Slack notifications',
    fields: [webhook(), s('username'), s('channel'), branches(), brokenOnly, onlyDefault, ...CHANNEL_FIELDS],
    events: [...CHAT_EVENTS, 'deployment', 'incident', 'alert'],
    delivery: 'chat',
    chat: 'slack',
  },
  {
    slug: 'slack-slash-commands',
    title: 'Slack slash commands',
    fields: [s('token', { required: true, secret: true })],
    events: [],
    delivery: 'none',
  },
  {
    slug: 'squash-tm',
    title: 'Squash TM',
    fields: [s('url', { required: true, url: true }), s('token', { secret: true })],
    events: ['issue', 'confidential_issue'],
    delivery: 'none',
  },
  {
    slug: 'teamcity',
    title: 'JetBrains TeamCity',
    fields: [
      s('teamcity_url', { required: true, target: true }),
      b('enable_ssl_verification', { default: true }),
      s('build_type', { required: true }),
      s('username', { required: true }),
      s('password', { required: true, secret: true }),
    ],
    events: ['push', 'merge_request'],
    delivery: 'build',
  },
  {
    slug: 'telegram',
    title: 'Telegram',
    fields: [
      s('hostname', { target: true, default: 'https://api.telegram.org' }),
      s('token', { required: true, secret: true }),
      s('room', { required: true }),
      s('thread'),
      branches(),
      brokenOnly,
    ],
    events: CHAT_EVENTS,
    delivery: 'chat',
    chat: 'telegram',
  },
  {
    slug: 'unify-circuit',
    title: 'Unify Circuit',
    fields: [webhook(), branches(), brokenOnly],
    events: CHAT_EVENTS,
    delivery: 'chat',
    chat: 'plain_text',
  },
  {
    slug: 'webex-teams',
    title: 'Webex Teams',
    fields: [webhook(), branches(), brokenOnly],
    events: CHAT_EVENTS,
    delivery: 'chat',
    chat: 'webex',
  },
  { slug: 'youtrack', title: 'YouTrack', fields: trackerFields(false), events: [], delivery: 'none' },
  {
    slug: 'zentao',
    title: 'ZenTao',
    fields: [
      s('url', { required: true, url: true }),
      s('api_url', { url: true }),
      s('api_token', { required: true, secret: true }),
      s('zentao_product_xid', { required: true }),
    ],
    events: [],
    delivery: 'none',
  },
];

// Every integration takes `push_events` unless it has another list of events (spec part 3).
for (const kind of KINDS) if (kind.events.length === 0) kind.events = ['push'];

export const INTEGRATION_KINDS: ReadonlyMap<string, IntegrationKind> = new Map(KINDS.map((k) => [k.slug, k]));
export const INTEGRATION_SLUGS = KINDS.map((k) => k.slug) as [string, ...string[]];

/** The API flags a kind takes (its events), e.g. `push_events`. */
export function eventFlagsOf(kind: IntegrationKind): EventFlag[] {
  return kind.events.map((e) => EVENT_FLAGS[e]);
}
