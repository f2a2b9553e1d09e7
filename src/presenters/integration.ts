import type { Integration } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';
import type { IntegrationKind } from '../services/integration-catalog.js';
import { eventFlagValues, settingValue } from '../services/integrations.js';

/** GitLab's ProjectIntegrationBasic entity (the list). */
export function presentIntegrationBasic(kind: IntegrationKind, integration: Integration) {
  const comment = integration.properties.comment_on_event_enabled;
  return {
    id: integration.id,
    title: kind.title,
    slug: kind.slug,
    created_at: isoTime(integration.created_at),
    updated_at: isoTime(integration.updated_at),
    active: integration.active,
    ...eventFlagValues(kind, integration),
    vulnerability_events: false,
    comment_on_event_enabled: typeof comment === 'boolean' ? comment : true,
    inherited: false,
  };
}

/** GitLab's ProjectIntegration entity: the basic one with `properties`, secrets left out. */
export function presentIntegration(kind: IntegrationKind, integration: Integration) {
  const properties = Object.fromEntries(
    kind.fields.filter((f) => !f.secret).map((f) => [f.name, settingValue(kind, integration, f.name)]),
  );
  return { ...presentIntegrationBasic(kind, integration), properties };
}
