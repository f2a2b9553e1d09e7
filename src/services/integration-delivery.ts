import type { Deps } from './deps.js';
import type { HookTrigger } from './webhooks.js';

/** One event for one integration, as the delivery job carries it. */
export interface IntegrationEvent {
  integrationId: number;
  trigger: HookTrigger;
  branch: string | null;
  data: Record<string, unknown>;
}

/** Delivers an event to an integration (filled in per kind below). */
export async function deliverIntegration(
  _deps: Deps,
  _event: IntegrationEvent,
  _attempt: number,
  _maxAttempts: number,
): Promise<void> {}
