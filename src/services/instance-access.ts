import type { User } from '../db/schema.js';
import { getApplicationSettings } from './application-settings.js';
import type { Deps } from './deps.js';

/** GitLab's read-only middleware answer to an API write (403, `{"message": ...}`). */
export const READ_ONLY_API_MESSAGE = 'You cannot perform write operations on a read-only instance';

/** GitLab's refusal of a push in maintenance mode (ee GitAccess#check_maintenance_mode!). */
export const MAINTENANCE_PUSH_MESSAGE =
  'Git push is not allowed because this GitLab instance is currently in (read-only) maintenance mode.';

/**
 * Whether `user` may change anything now: in maintenance mode only administrators may (Depot's
 * choice, issue 16: GitLab lets admins change only the settings, which here are admin-only).
 */
export async function instanceWritable(deps: Deps, user: Pick<User, 'admin'> | null): Promise<boolean> {
  if (user?.admin) return true;
  return (await getApplicationSettings(deps)).values.maintenance_mode !== true;
}

/** The administrator's banner text for maintenance mode, when one is set. */
export async function maintenanceModeMessage(deps: Deps): Promise<string | null> {
  const message = (await getApplicationSettings(deps)).values.maintenance_mode_message;
  return typeof message === 'string' && message.trim() !== '' ? message : null;
}

/**
 * Whether git may be reached over HTTP: `enabled_git_access_protocol` names the one protocol
 * allowed (`ssh` or `http`); empty, `nil` or `all` allow both (GitLab's ProtocolAccess).
 */
export async function gitOverHttpAllowed(deps: Deps): Promise<boolean> {
  return (await getApplicationSettings(deps)).values.enabled_git_access_protocol !== 'ssh';
}

/** GitLab's check_protocol! refusal (403). */
export const gitProtocolRefusal = (protocol: 'http' | 'ssh') =>
  `Git access over ${protocol.toUpperCase()} is not allowed`;
