import type { HookDelivery, WebHook } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';
import { HOOK_EVENT_FLAGS } from '../services/webhooks.js';

/** GitLab's ProjectHook entity (Hook plus the project's event flags); the token never appears. */
export function presentProjectHook(hook: WebHook) {
  const flags = Object.fromEntries(HOOK_EVENT_FLAGS.map((flag) => [flag, hook.events[flag] === true]));
  return {
    id: hook.id,
    url: hook.url,
    name: hook.name,
    description: hook.description,
    created_at: isoTime(hook.created_at),
    push_events: flags.push_events,
    tag_push_events: flags.tag_push_events,
    merge_requests_events: flags.merge_requests_events,
    repository_update_events: flags.repository_update_events,
    enable_ssl_verification: hook.enable_ssl_verification,
    alert_status: 'executable',
    disabled_until: null,
    url_variables: [],
    push_events_branch_filter: hook.push_events_branch_filter,
    branch_filter_strategy: hook.branch_filter_strategy,
    custom_webhook_template: null,
    custom_headers: [],
    project_id: hook.project_id,
    issues_events: flags.issues_events,
    confidential_issues_events: flags.confidential_issues_events,
    note_events: flags.note_events,
    confidential_note_events: flags.confidential_note_events,
    pipeline_events: flags.pipeline_events,
    wiki_page_events: flags.wiki_page_events,
    deployment_events: flags.deployment_events,
    feature_flag_events: flags.feature_flag_events,
    job_events: flags.job_events,
    releases_events: flags.releases_events,
    milestone_events: flags.milestone_events,
    emoji_events: flags.emoji_events,
    resource_access_token_events: flags.resource_access_token_events,
    resource_deploy_token_events: flags.resource_deploy_token_events,
    vulnerability_events: flags.vulnerability_events,
  };
}

/** One try of a delivery (GitLab's WebHookLog), with Depot's attempt number and state. */
export function presentHookDelivery(delivery: HookDelivery) {
  return {
    id: delivery.id,
    url: delivery.url,
    trigger: delivery.trigger,
    request_headers: delivery.request_headers,
    request_data: delivery.request_data,
    response_status: delivery.response_status,
    response_body: delivery.response_body,
    internal_error_message: delivery.internal_error_message,
    execution_duration: delivery.execution_duration,
    attempt: delivery.attempt,
    state: delivery.state,
    created_at: isoTime(delivery.created_at),
  };
}
