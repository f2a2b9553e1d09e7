/**
 * The outbound request guard (DESIGN.md §3 "Outbound requests"): every request Depot makes to a
 * URL a user gave goes through `outboundRequest`, with options from `outboundOptionsFromSettings`.
 */
export { type Allowlist, parseAllowlist, splitAllowlist } from './allowlist.js';
export {
  OutboundBlockedError,
  OutboundConnectionError,
  OutboundError,
  OutboundRedirectLimitError,
  OutboundTimeoutError,
  OutboundTooLargeError,
} from './errors.js';
export { checkOutboundUrl, type OutboundTarget, systemLookup } from './guard.js';
export { type AddressClass, classifyIp, parseIp } from './ip.js';
export {
  CONNECT_TIMEOUT_MS,
  DEFAULT_OUTBOUND_OPTIONS,
  type Dial,
  type Lookup,
  MAX_REDIRECTS,
  MAX_RESPONSE_BYTES,
  type OutboundOptions,
  type OutboundPurpose,
  type OutboundSettings,
  outboundOptionsFromSettings,
  type ResolvedAddress,
  TOTAL_TIMEOUT_MS,
} from './options.js';
export { type OutboundRequest, type OutboundResponse, outboundRequest } from './request.js';
