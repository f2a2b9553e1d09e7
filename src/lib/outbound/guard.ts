import { lookup as dnsLookup } from 'node:dns/promises';
import { networkInterfaces } from 'node:os';
import { parseAllowlist } from './allowlist.js';
import { OutboundBlockedError } from './errors.js';
import { type AddressClass, BLOCKED_MESSAGES, classifyIp, formatIp, normaliseIp, parseIp } from './ip.js';
import type { Lookup, OutboundOptions, ResolvedAddress } from './options.js';

/** A URL that passed the guard, and where to connect for it. */
export interface OutboundTarget {
  url: URL;
  /** The URL's host without IPv6 brackets: the Host header's name and the TLS server name. */
  hostname: string;
  port: number;
  /**
   * The checked address to connect to (DNS rebinding protection, or an IP literal); undefined
   * when the connection resolves the hostname itself (protection off).
   */
  pinned: ResolvedAddress | undefined;
}

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

/** The system resolver: every address, in the order getaddrinfo gives them. */
export const systemLookup: Lookup = async (hostname) => {
  const answers = await dnsLookup(hostname, { all: true, verbatim: true });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

function blocked(message: string): never {
  throw new OutboundBlockedError(message);
}

/** This machine's own addresses: GitLab refuses them as "localhost" too. */
function ownAddresses(): Set<string> {
  const own = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) {
      const bytes = parseIp(info.address);
      if (bytes) own.add(formatIp(normaliseIp(bytes)));
    }
  }
  return own;
}

/**
 * Checks a URL as GitLab's UrlBlocker does and decides where to connect for it: the URL's form
 * (scheme, port, user, host), then every address its host resolves to. Throws
 * OutboundBlockedError with GitLab's message when the request may not be made.
 */
export async function checkOutboundUrl(input: string | URL, options: OutboundOptions): Promise<OutboundTarget> {
  const text = typeof input === 'string' ? input : input.href;
  // The URL parser silently drops tabs and newlines; GitLab refuses multi-line URLs.
  if (/[\r\n\t]/.test(text)) blocked('URI is invalid');
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    blocked('URI is invalid');
  }
  const defaultPort = DEFAULT_PORTS[url.protocol];
  const port = url.port === '' ? defaultPort : Number(url.port);
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const internal = options.internalUrls.some((own) => sameOrigin(own, url));
  if (!internal) checkForm(url, port, hostname, options);
  // Only http and https are spoken, whatever schemes the options allow.
  if (port === undefined) blocked('URI is invalid');
  const literal = parseIp(hostname);

  // Nothing to check and nothing to pin: connect by name as GitLab does.
  if (options.allowLocal && !options.dnsRebindingProtection && !options.denyAllExceptAllowed && !literal) {
    return { url, hostname, port, pinned: undefined };
  }

  const allowlist = parseAllowlist(options.allowlist);
  const hostAllowed = !literal && allowlist.allowsHost(hostname, port);
  let addresses: ResolvedAddress[];
  if (literal) {
    addresses = [{ address: formatIp(normaliseIp(literal)), family: normaliseIp(literal).length === 4 ? 4 : 6 }];
  } else {
    try {
      addresses = await (options.lookup ?? systemLookup)(hostname);
    } catch {
      addresses = [];
    }
    if (addresses.length === 0) {
      // GitLab lets an unresolvable host through only when it would not pin it anyway.
      if (hostAllowed || (!options.dnsRebindingProtection && !options.denyAllExceptAllowed)) {
        return { url, hostname, port, pinned: undefined };
      }
      blocked('Host cannot be resolved or invalid');
    }
  }

  const checked = addresses.map((a) => {
    const bytes = parseIp(a.address);
    if (!bytes) blocked('Host cannot be resolved or invalid');
    const normal = normaliseIp(bytes);
    return { address: formatIp(normal), family: (normal.length === 4 ? 4 : 6) as 4 | 6, bytes: normal };
  });

  if (!hostAllowed && !internal) {
    const own = options.allowLocal ? new Set<string>() : ownAddresses();
    const refusals = new Set<AddressClass>();
    let unlisted = false;
    for (const a of checked) {
      if (allowlist.allowsIp(a.bytes, port)) continue;
      unlisted = true;
      if (options.allowLocal) continue;
      const kind = own.has(a.address) ? 'localhost' : classifyIp(a.bytes);
      if (kind !== 'public') refusals.add(kind);
    }
    if (unlisted && options.denyAllExceptAllowed) {
      blocked('Requests to hosts and IP addresses not on the Allow List are denied');
    }
    // Any refused address refuses the URL, worded by the first class GitLab checks.
    for (const [kind, message] of Object.entries(BLOCKED_MESSAGES)) {
      if (refusals.has(kind as AddressClass)) blocked(message);
    }
  }

  const first = checked[0]!;
  const pin = literal !== undefined || options.dnsRebindingProtection;
  return { url, hostname, port, pinned: pin ? { address: first.address, family: first.family } : undefined };
}

/** The URL's form: scheme, port, user and host (GitLab's validate_uri). */
function checkForm(url: URL, port: number | undefined, hostname: string, options: OutboundOptions): void {
  const scheme = url.protocol.slice(0, -1);
  if (!options.schemes.includes(scheme)) blocked(`Only allowed schemes are ${options.schemes.join(', ')}`);
  if (port === undefined || port === 0) blocked('URI is invalid');
  if (options.ports.length > 0 && port < 1024 && !options.ports.includes(port)) {
    blocked(`Only allowed ports are ${options.ports.join(', ')}, and any over 1024`);
  }
  if (url.username && !/^[\p{L}\p{N}]/u.test(safeDecode(url.username))) {
    blocked('Username needs to start with an alphanumeric character');
  }
  if (!hostname) blocked('URI is invalid');
  if (!parseIp(hostname) && !/^[\p{L}\p{N}]/u.test(hostname)) blocked('Hostname or IP address invalid');
}

/** Same scheme, host and port (GitLab's check for its own URLs). */
function sameOrigin(own: string, url: URL): boolean {
  try {
    return new URL(own).origin === url.origin;
  } catch {
    return false;
  }
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
