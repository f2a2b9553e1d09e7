import { isIPv4, isIPv6 } from 'node:net';

/**
 * IP addresses as bytes, and the classes of address an outbound request may not reach unless the
 * settings allow local requests (GitLab's UrlBlocker classes, plus multicast).
 *
 * Only canonical text is parsed here (dotted-quad IPv4, RFC 4291 IPv6): the odd IPv4 spellings
 * (`2130706433`, `0x7f.1`, `017700000001`) are normalised by the WHATWG URL parser before a host
 * reaches this module, and the same parsed URL is what we connect to, so no second parser can
 * read a host differently.
 */

/** 4 bytes for IPv4, 16 for IPv6. */
export type IpBytes = Uint8Array;

/** Parses a canonical IPv4 or IPv6 address (brackets and an IPv6 zone id are dropped). */
export function parseIp(text: string): IpBytes | undefined {
  let value = text.trim();
  if (value.startsWith('[') && value.endsWith(']')) value = value.slice(1, -1);
  const zone = value.indexOf('%');
  if (zone >= 0) value = value.slice(0, zone);
  if (isIPv4(value)) return Uint8Array.from(value.split('.').map(Number));
  if (isIPv6(value)) return parseIPv6(value);
  return undefined;
}

function parseIPv6(value: string): IpBytes {
  const bytes = new Uint8Array(16);
  let text = value;
  // An embedded dotted quad takes the last 32 bits.
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    const quad = text
      .slice(lastColon + 1)
      .split('.')
      .map(Number);
    tail = [((quad[0]! << 8) | quad[1]!) >>> 0, ((quad[2]! << 8) | quad[3]!) >>> 0];
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head = '', rest] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const groups =
    rest === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  groups.forEach((group, i) => {
    const n = Number.parseInt(group, 16);
    bytes[i * 2] = n >> 8;
    bytes[i * 2 + 1] = n & 0xff;
  });
  if (tail.length) {
    bytes[12] = tail[0]! >> 8;
    bytes[13] = tail[0]! & 0xff;
    bytes[14] = tail[1]! >> 8;
    bytes[15] = tail[1]! & 0xff;
  }
  return bytes;
}

/** Dotted-quad or RFC 5952 text of an address. */
export function formatIp(bytes: IpBytes): string {
  if (bytes.length === 4) return bytes.join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  // The longest run of two or more zero groups becomes `::`.
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      best = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`;
}

function startsWith(bytes: IpBytes, prefix: number[]): boolean {
  return prefix.every((b, i) => bytes[i] === b);
}

/**
 * The IPv4 address an IPv6 address stands for, when it embeds one that the network would reach:
 * IPv4-mapped `::ffff:a.b.c.d` (GitLab converts these before checking), IPv4-compatible
 * `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d` and 6to4 `2002:aabb:ccdd::`.
 */
export function embeddedIPv4(bytes: IpBytes): IpBytes | undefined {
  if (bytes.length !== 16) return undefined;
  const zeros10 = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
  if (startsWith(bytes, [...zeros10, 0xff, 0xff])) return bytes.slice(12);
  if (startsWith(bytes, [...zeros10, 0, 0])) {
    const v4 = bytes.slice(12);
    // `::` and `::1` are IPv6's own unspecified and loopback addresses, not embeddings.
    if (v4[0] === 0 && v4[1] === 0 && v4[2] === 0 && (v4[3] === 0 || v4[3] === 1)) return undefined;
    return v4;
  }
  if (startsWith(bytes, [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0])) return bytes.slice(12);
  if (startsWith(bytes, [0x20, 0x02])) return bytes.slice(2, 6);
  return undefined;
}

/** An IPv4 embedded in an IPv6 address becomes that IPv4 address; anything else is unchanged. */
export function normaliseIp(bytes: IpBytes): IpBytes {
  return embeddedIPv4(bytes) ?? bytes;
}

/** A network: its first address and prefix length. */
export interface Cidr {
  base: IpBytes;
  prefix: number;
}

/** Parses `a.b.c.d/n`, `x::/n` or a single address (a /32 or /128). */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const address = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!address) return undefined;
  const bits = address.length * 8;
  if (slash < 0) {
    const base = normaliseIp(address);
    return { base, prefix: base.length * 8 };
  }
  const prefixText = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > bits) return undefined;
  // A network written in IPv4-mapped form covers those IPv4 addresses.
  if (prefix >= 96 && startsWith(address, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff])) {
    return { base: address.slice(12), prefix: prefix - 96 };
  }
  return { base: address, prefix };
}

/** Whether `address` lies in `network` (both normalised; IPv4 never matches an IPv6 network). */
export function cidrContains(network: Cidr, address: IpBytes): boolean {
  if (network.base.length !== address.length) return false;
  let remaining = network.prefix;
  for (let i = 0; remaining > 0; i++, remaining -= 8) {
    const mask = remaining >= 8 ? 0xff : (0xff << (8 - remaining)) & 0xff;
    if ((network.base[i]! & mask) !== (address[i]! & mask)) return false;
  }
  return true;
}

/** Why an address is not a public one, in the order GitLab checks (and words) them. */
export type AddressClass =
  | 'public'
  | 'localhost'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'shared'
  | 'broadcast'
  | 'multicast';

const RANGES: Array<[AddressClass, string]> = [
  ['localhost', '0.0.0.0/8'],
  ['localhost', '::/128'],
  ['loopback', '127.0.0.0/8'],
  ['loopback', '::1/128'],
  ['private', '10.0.0.0/8'],
  ['private', '172.16.0.0/12'],
  ['private', '192.168.0.0/16'],
  ['private', 'fc00::/7'],
  ['private', 'fec0::/10'],
  ['link-local', '169.254.0.0/16'],
  ['link-local', 'fe80::/10'],
  ['shared', '100.64.0.0/10'],
  ['broadcast', '255.255.255.255/32'],
  ['multicast', '224.0.0.0/4'],
  ['multicast', 'ff00::/8'],
];
const NETWORKS = RANGES.map(([kind, text]) => [kind, parseCidr(text)!] as const);

/** Classifies one address (IPv4-in-IPv6 forms as their IPv4 address); `public` when none applies. */
export function classifyIp(address: IpBytes | string): AddressClass {
  const parsed = typeof address === 'string' ? parseIp(address) : address;
  if (!parsed) throw new TypeError(`not an IP address: ${String(address)}`);
  const bytes = normaliseIp(parsed);
  for (const [kind, network] of NETWORKS) if (cidrContains(network, bytes)) return kind;
  return 'public';
}

/** GitLab's refusal text for each class; its order is the order GitLab checks in. */
export const BLOCKED_MESSAGES: Record<Exclude<AddressClass, 'public'>, string> = {
  localhost: 'Requests to localhost are not allowed',
  loopback: 'Requests to loopback addresses are not allowed',
  private: 'Requests to the local network are not allowed',
  'link-local': 'Requests to the link local network are not allowed',
  shared: 'Requests to the shared address space are not allowed',
  broadcast: 'Requests to the limited broadcast address are not allowed',
  multicast: 'Requests to multicast addresses are not allowed',
};
