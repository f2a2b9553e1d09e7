import type { Socket } from 'node:net';
import { splitAllowlist } from './allowlist.js';

/** One address a hostname resolves to. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a hostname to every address it has (the default is the system resolver, getaddrinfo). */
export type Lookup = (hostname: string) => Promise<ResolvedAddress[]>;

/** Opens a TCP connection to an address (or, without DNS rebinding protection, a hostname). */
export type Dial = (target: { host: string; port: number; lookup?: Lookup }) => Socket;

/** What the guard allows; a plain object, so settings can supply it. */
export interface OutboundOptions {
  /** Local, private, link-local, shared, broadcast and multicast addresses may be reached. */
  allowLocal: boolean;
  /** `outbound_local_requests_whitelist` entries reachable although local requests are refused. */
  allowlist: readonly string[];
  /** Refuse every target not on the allowlist (`deny_all_requests_except_allowed`). */
  denyAllExceptAllowed: boolean;
  /** Resolve once, check every address and connect to the checked one (`dns_rebinding_protection_enabled`). */
  dnsRebindingProtection: boolean;
  /**
   * Depot's own URLs (BASE_URL): a target with the same scheme, host and port is allowed although
   * local, as GitLab allows requests to its configured host and port.
   */
  internalUrls: readonly string[];
  /** URL schemes allowed. */
  schemes: readonly string[];
  /** When not empty, ports below 1024 must be in this list (GitLab's `ports:`); any port from 1024 is allowed. */
  ports: readonly number[];
  /** Follow redirects (each hop checked like the first URL); off returns the 3xx response itself. */
  followRedirects: boolean;
  /** Redirects followed at most; one more is an OutboundRedirectLimitError. */
  maxRedirects: number;
  /** Time to open each connection (TCP, and TLS for https). */
  connectTimeoutMs: number;
  /** Time for the whole exchange: resolution, every hop, the response body. */
  timeoutMs: number;
  /** Largest response body read; past it the request is aborted with OutboundTooLargeError. */
  maxBytes: number;
  /** Name resolution; tests inject one that answers the addresses they need. */
  lookup?: Lookup;
  /** TCP connector; tests inject one to observe where connections go. */
  dial?: Dial;
  /**
   * Check the https certificate (chain and host name). Off only where the user asked for it, as
   * GitLab's `enable_ssl_verification: false` on a hook or a build server integration.
   */
  verifyTls: boolean;
  /** Extra trusted certificates for https (PEM), besides Node's bundled roots. */
  ca?: string | Buffer | Array<string | Buffer>;
}

/** Time to open a connection: GitLab::HTTP's open_timeout. */
export const CONNECT_TIMEOUT_MS = 10_000;
/** Time for the whole exchange: GitLab::HTTP's DEFAULT_READ_TOTAL_TIMEOUT. */
export const TOTAL_TIMEOUT_MS = 30_000;
/** Redirects followed: HTTParty's default limit. */
export const MAX_REDIRECTS = 5;
/** Largest response body kept; webhook logs and verification only read the start of it. */
export const MAX_RESPONSE_BYTES = 1024 * 1024;

/** The safe defaults: GitLab's defaults for web hooks and integrations. */
export const DEFAULT_OUTBOUND_OPTIONS: OutboundOptions = {
  allowLocal: false,
  allowlist: [],
  denyAllExceptAllowed: false,
  dnsRebindingProtection: true,
  internalUrls: [],
  schemes: ['http', 'https'],
  ports: [],
  followRedirects: true,
  maxRedirects: MAX_REDIRECTS,
  connectTimeoutMs: CONNECT_TIMEOUT_MS,
  timeoutMs: TOTAL_TIMEOUT_MS,
  maxBytes: MAX_RESPONSE_BYTES,
  verifyTls: true,
};

/** The application settings the guard reads, under GitLab's names (absent ones take GitLab's defaults). */
export interface OutboundSettings {
  allow_local_requests_from_web_hooks_and_services?: boolean | null;
  allow_local_requests_from_system_hooks?: boolean | null;
  outbound_local_requests_whitelist?: string | readonly string[] | null;
  dns_rebinding_protection_enabled?: boolean | null;
  deny_all_requests_except_allowed?: boolean | null;
}

/**
 * Which requests the settings govern: web hooks, integrations and other user-given URLs
 * (`allow_local_requests_from_web_hooks_and_services`, default false), or system hooks that
 * administrators set up (`allow_local_requests_from_system_hooks`, default true).
 */
export type OutboundPurpose = 'web_hooks_and_services' | 'system_hooks';

/** Guard options from the application settings, for one purpose; `overrides` (limits, schemes) win. */
export function outboundOptionsFromSettings(
  settings: OutboundSettings,
  purpose: OutboundPurpose = 'web_hooks_and_services',
  overrides: Partial<OutboundOptions> = {},
): OutboundOptions {
  const allowLocal =
    purpose === 'system_hooks'
      ? (settings.allow_local_requests_from_system_hooks ?? true)
      : (settings.allow_local_requests_from_web_hooks_and_services ?? false);
  return {
    ...DEFAULT_OUTBOUND_OPTIONS,
    allowLocal,
    allowlist: splitAllowlist(settings.outbound_local_requests_whitelist),
    dnsRebindingProtection: settings.dns_rebinding_protection_enabled ?? true,
    denyAllExceptAllowed: settings.deny_all_requests_except_allowed ?? false,
    ...overrides,
  };
}
