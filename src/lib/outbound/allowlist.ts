import { type Cidr, cidrContains, type IpBytes, normaliseIp, parseCidr } from './ip.js';

/**
 * GitLab's `outbound_local_requests_whitelist`: targets that may be reached although local
 * requests are refused. Entries are, as GitLab reads them: an IP address (`192.168.1.1`,
 * `fe80::1`), an IP range (`10.0.0.0/8`, `fd00::/8`), a hostname (`hooks.internal`), each
 * optionally with a port (`127.0.0.1:8080`, `[::1]:8080`, `hooks.internal:8443`); with no port
 * every port is allowed. A hostname entry matches that hostname exactly: GitLab documents that
 * wildcards (`*.example.com`) are not supported, so such an entry matches no host here either.
 */
export interface Allowlist {
  /** Whether a resolved address may be reached on `port` although it is local. */
  allowsIp(address: IpBytes, port: number): boolean;
  /** Whether a hostname (as the URL gives it, lower case) may be reached on `port` whatever it resolves to. */
  allowsHost(hostname: string, port: number): boolean;
}

interface IpEntry {
  network: Cidr;
  port: number | undefined;
}
interface HostEntry {
  host: string;
  port: number | undefined;
}

/** Splits an entry into its address and port, GitLab's way: `[v6]:port`, `v4-or-host:port`, or no port. */
function splitPort(entry: string): { address: string; port: number | undefined } {
  const bracketed = /^\[(.*)\]:(\d+)$/.exec(entry);
  if (bracketed) return { address: bracketed[1]!, port: Number(bracketed[2]) };
  const single = /^([^:]+):(\d+)$/.exec(entry);
  if (single) return { address: single[1]!, port: Number(single[2]) };
  return { address: entry, port: undefined };
}

/** Builds the allowlist from setting entries (empty and blank entries are ignored). */
export function parseAllowlist(entries: readonly string[]): Allowlist {
  const ips: IpEntry[] = [];
  const hosts: HostEntry[] = [];
  for (const raw of entries) {
    const entry = raw.trim();
    if (!entry) continue;
    const { address, port } = splitPort(entry);
    const network = parseCidr(address);
    if (network) ips.push({ network, port });
    else hosts.push({ host: normaliseHost(address), port });
  }
  return {
    allowsIp(address, port) {
      const bytes = normaliseIp(address);
      return ips.some((e) => cidrContains(e.network, bytes) && (e.port === undefined || e.port === port));
    },
    allowsHost(hostname, port) {
      const host = normaliseHost(hostname);
      return hosts.some((e) => e.host === host && (e.port === undefined || e.port === port));
    },
  };
}

/** Lower case without a trailing dot, so `Hooks.Internal.` and `hooks.internal` are one host. */
function normaliseHost(host: string): string {
  const lower = host.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/**
 * Splits the setting as GitLab's `outbound_local_requests_allowlist_raw` does: entries separated
 * by commas, semicolons or whitespace (newlines included).
 */
export function splitAllowlist(value: string | readonly string[] | null | undefined): string[] {
  if (value == null) return [];
  const parts = typeof value === 'string' ? [value] : value;
  return parts.flatMap((part) => part.split(/[\s,;]+/)).filter((part) => part.length > 0);
}
