import { describe, expect, it } from 'vitest';
import {
  checkOutboundUrl,
  classifyIp,
  DEFAULT_OUTBOUND_OPTIONS,
  type Lookup,
  OutboundBlockedError,
  type OutboundOptions,
  outboundOptionsFromSettings,
  parseAllowlist,
  parseIp,
  splitAllowlist,
} from '../../src/lib/outbound/index.js';
import { formatIp } from '../../src/lib/outbound/ip.js';

/** A resolver that answers fixed addresses and counts its calls; it never touches DNS. */
function fixedLookup(answers: Record<string, string[]>) {
  const calls: string[] = [];
  const lookup: Lookup = async (hostname) => {
    calls.push(hostname);
    const list = answers[hostname];
    if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { lookup, calls };
}

function options(overrides: Partial<OutboundOptions> = {}): OutboundOptions {
  return { ...DEFAULT_OUTBOUND_OPTIONS, ...overrides };
}

async function refusal(url: string, opts: OutboundOptions): Promise<string> {
  const error = await checkOutboundUrl(url, opts).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OutboundBlockedError);
  return (error as Error).message;
}

describe('address classification', () => {
  it.each([
    ['0.0.0.0', 'localhost'],
    ['0.1.2.3', 'localhost'],
    ['::', 'localhost'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fec0::1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['169.254.0.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['255.255.255.255', 'broadcast'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    // IPv4 inside IPv6: mapped, compatible, NAT64, 6to4.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['::ffff:10.1.2.3', 'private'],
    ['::ffff:0.0.0.0', 'localhost'],
    ['::10.0.0.1', 'private'],
    ['64:ff9b::192.168.0.1', 'private'],
    ['2002:a9fe:a9fe::1', 'link-local'],
    // Public neighbours of the ranges above.
    ['8.8.8.8', 'public'],
    ['172.32.0.1', 'public'],
    ['172.15.255.255', 'public'],
    ['100.128.0.1', 'public'],
    ['100.63.255.255', 'public'],
    ['169.255.0.1', 'public'],
    ['11.0.0.1', 'public'],
    ['2001:4860:4860::8888', 'public'],
    ['::ffff:8.8.8.8', 'public'],
    ['fbff::1', 'public'],
  ])('%s is %s', (address, kind) => {
    expect(classifyIp(address)).toBe(kind);
  });

  it('parses and prints IPv6 canonically', () => {
    expect(formatIp(parseIp('2001:db8:0:0:0:0:0:1')!)).toBe('2001:db8::1');
    expect(formatIp(parseIp('[::1]')!)).toBe('::1');
    expect(formatIp(parseIp('2001:db8::1.2.3.4')!)).toBe('2001:db8::102:304');
    expect(formatIp(parseIp('1:0:0:2:0:0:0:3')!)).toBe('1:0:0:2::3');
    expect(parseIp('example.com')).toBeUndefined();
    expect(parseIp('1.2.3.4.5')).toBeUndefined();
    expect(parseIp('2130706433')).toBeUndefined();
  });
});

describe('URL checks', () => {
  const noDns = fixedLookup({});

  it.each([
    // Odd IPv4 spellings are read as the URL parser reads them, the same parse we connect with.
    ['http://2130706433/', 'Requests to localhost are not allowed'],
    ['http://0x7f.1/', 'Requests to localhost are not allowed'],
    ['http://0x7f000001/', 'Requests to localhost are not allowed'],
    ['http://017700000001/', 'Requests to localhost are not allowed'],
    ['http://0177.0.0.1/', 'Requests to localhost are not allowed'],
    ['http://127.1/', 'Requests to localhost are not allowed'],
    ['http://%31%32%37.0.0.1/', 'Requests to localhost are not allowed'],
    ['http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/', 'Requests to localhost are not allowed'],
    ['http://169.254.43518/', 'Requests to the link local network are not allowed'],
    ['http://0/', 'Requests to localhost are not allowed'],
    ['http://[::]/', 'Requests to localhost are not allowed'],
    ['http://[::ffff:127.0.0.1]/', 'Requests to localhost are not allowed'],
    ['http://[::ffff:169.254.169.254]/', 'Requests to the link local network are not allowed'],
    ['http://169.254.169.254/latest/meta-data/', 'Requests to the link local network are not allowed'],
    ['http://2852039166/', 'Requests to the link local network are not allowed'],
    ['http://10.0.0.1/', 'Requests to the local network are not allowed'],
    ['http://0xa.0.0.1/', 'Requests to the local network are not allowed'],
    ['http://192.168.0.1:3000/hook', 'Requests to the local network are not allowed'],
    ['http://[fd00::1]/', 'Requests to the local network are not allowed'],
    ['http://[fe80::1]/', 'Requests to the link local network are not allowed'],
    ['http://100.64.0.1/', 'Requests to the shared address space are not allowed'],
    ['http://255.255.255.255/', 'Requests to the limited broadcast address are not allowed'],
    ['http://224.0.0.251/', 'Requests to multicast addresses are not allowed'],
    ['http://[ff02::1]/', 'Requests to multicast addresses are not allowed'],
    // The user part does not hide the host.
    ['http://example.com@127.0.0.1/', 'Requests to localhost are not allowed'],
    ['http://example.com:80@10.0.0.1/', 'Requests to the local network are not allowed'],
    ['http://example.com\\@10.0.0.1/', 'Host cannot be resolved or invalid'],
    // Form.
    ['ftp://example.com/', 'Only allowed schemes are http, https'],
    ['file:///etc/passwd', 'Only allowed schemes are http, https'],
    ['gopher://example.com/', 'Only allowed schemes are http, https'],
    ['http://example.com\n.evil/', 'URI is invalid'],
    ['http://exam\tple.com/', 'URI is invalid'],
    ['not a url', 'URI is invalid'],
    ['http://example.com:0/', 'URI is invalid'],
    ['http://example.com:65536/', 'URI is invalid'],
    ['http://1.1.1.1.1/', 'URI is invalid'],
    ['http://-oProxyCommand=x@example.com/', 'Username needs to start with an alphanumeric character'],
    ['http://-example.com/', 'Hostname or IP address invalid'],
    ['http://unknown.test/', 'Host cannot be resolved or invalid'],
  ])('%s is refused: %s', async (url, message) => {
    expect(await refusal(url, options({ lookup: noDns.lookup }))).toBe(message);
  });

  it('refuses every class a hostname resolves to, naming it as GitLab does', async () => {
    const cases: Array<[string, string]> = [
      ['127.0.0.2', 'Requests to loopback addresses are not allowed'],
      ['10.1.2.3', 'Requests to the local network are not allowed'],
      ['172.20.0.1', 'Requests to the local network are not allowed'],
      ['192.168.10.10', 'Requests to the local network are not allowed'],
      ['fd00::10', 'Requests to the local network are not allowed'],
      ['169.254.169.254', 'Requests to the link local network are not allowed'],
      ['fe80::10', 'Requests to the link local network are not allowed'],
      ['100.100.100.100', 'Requests to the shared address space are not allowed'],
      ['255.255.255.255', 'Requests to the limited broadcast address are not allowed'],
      ['0.0.0.0', 'Requests to localhost are not allowed'],
      ['::', 'Requests to localhost are not allowed'],
      ['::ffff:10.0.0.1', 'Requests to the local network are not allowed'],
      ['239.1.1.1', 'Requests to multicast addresses are not allowed'],
    ];
    for (const [address, message] of cases) {
      const { lookup } = fixedLookup({ 'hook.example.test': [address] });
      expect(await refusal('http://hook.example.test/', options({ lookup })), address).toBe(message);
    }
  });

  it("refuses loopback, as localhost when it is one of this machine's addresses (as GitLab words it)", async () => {
    const { lookup } = fixedLookup({ 'hook.example.test': ['::1'], 'v4.example.test': ['127.0.0.1'] });
    const either = ['Requests to localhost are not allowed', 'Requests to loopback addresses are not allowed'];
    for (const url of [
      'http://[::1]:8080/',
      'http://hook.example.test/',
      'http://v4.example.test/',
      'http://127.0.0.1/',
    ]) {
      expect(either).toContain(await refusal(url, options({ lookup })));
    }
  });

  it('refuses a host when any of its addresses is local, and pins the first when all are public', async () => {
    const mixed = fixedLookup({ 'hook.example.test': ['203.0.113.10', '10.0.0.5'] });
    expect(await refusal('http://hook.example.test/', options({ lookup: mixed.lookup }))).toBe(
      'Requests to the local network are not allowed',
    );
    const publicOnly = fixedLookup({ 'hook.example.test': ['203.0.113.10', '2001:db8::10'] });
    const target = await checkOutboundUrl('https://hook.example.test/x', options({ lookup: publicOnly.lookup }));
    expect(target.pinned).toEqual({ address: '203.0.113.10', family: 4 });
    expect(target.hostname).toBe('hook.example.test');
    expect(target.port).toBe(443);
    expect(publicOnly.calls).toEqual(['hook.example.test']);
  });

  it('lets local targets through when local requests are allowed', async () => {
    const { lookup } = fixedLookup({ 'hook.example.test': ['10.0.0.5'] });
    const target = await checkOutboundUrl('http://hook.example.test/', options({ lookup, allowLocal: true }));
    expect(target.pinned).toEqual({ address: '10.0.0.5', family: 4 });
    expect((await checkOutboundUrl('http://2130706433:81/', options({ allowLocal: true }))).pinned).toEqual({
      address: '127.0.0.1',
      family: 4,
    });
  });

  it('without DNS rebinding protection checks the addresses but does not pin them', async () => {
    const { lookup } = fixedLookup({ 'hook.example.test': ['203.0.113.10'], 'local.example.test': ['10.0.0.1'] });
    const target = await checkOutboundUrl(
      'http://hook.example.test/',
      options({ lookup, dnsRebindingProtection: false }),
    );
    expect(target.pinned).toBeUndefined();
    expect(await refusal('http://local.example.test/', options({ lookup, dnsRebindingProtection: false }))).toBe(
      'Requests to the local network are not allowed',
    );
    // GitLab lets an unresolvable host through when it would not pin it anyway.
    expect(
      (await checkOutboundUrl('http://gone.test/', options({ lookup, dnsRebindingProtection: false }))).pinned,
    ).toBe(undefined);
  });

  it('restricts ports below 1024 to the given list, GitLab-style', async () => {
    const { lookup } = fixedLookup({ 'hook.example.test': ['203.0.113.10'] });
    const opts = options({ lookup, ports: [80, 443] });
    expect(await refusal('http://hook.example.test:22/', opts)).toBe(
      'Only allowed ports are 80, 443, and any over 1024',
    );
    await expect(checkOutboundUrl('http://hook.example.test:8080/', opts)).resolves.toBeDefined();
    await expect(checkOutboundUrl('http://hook.example.test/', opts)).resolves.toBeDefined();
  });

  it("allows Depot's own URL (scheme, host and port) although it is local, as GitLab allows its own", async () => {
    const { lookup } = fixedLookup({ 'depot.internal': ['10.0.0.2'] });
    const opts = options({ lookup, internalUrls: ['http://depot.internal:8080'] });
    await expect(checkOutboundUrl('http://depot.internal:8080/api/v4/projects', opts)).resolves.toMatchObject({
      pinned: { address: '10.0.0.2', family: 4 },
    });
    expect(await refusal('http://depot.internal:8081/', opts)).toBe('Requests to the local network are not allowed');
    expect(await refusal('https://depot.internal:8080/', opts)).toBe('Requests to the local network are not allowed');
  });

  it('refuses everything off the allowlist when deny_all_requests_except_allowed is on', async () => {
    const { lookup } = fixedLookup({ 'hook.example.test': ['203.0.113.10'], 'ok.example.test': ['203.0.113.11'] });
    const opts = options({ lookup, denyAllExceptAllowed: true, allowlist: ['ok.example.test'] });
    expect(await refusal('http://hook.example.test/', opts)).toBe(
      'Requests to hosts and IP addresses not on the Allow List are denied',
    );
    await expect(checkOutboundUrl('http://ok.example.test/', opts)).resolves.toBeDefined();
  });
});

describe('allowlist (outbound_local_requests_whitelist)', () => {
  const lookup = fixedLookup({
    'hooks.internal': ['10.0.0.7'],
    'other.internal': ['10.0.0.8'],
    'a.example.test': ['10.0.0.9'],
    'v6.internal': ['fd00::7'],
  }).lookup;
  const allowed = (allowlist: string[], url: string) =>
    checkOutboundUrl(url, options({ lookup, allowlist })).then(
      () => true,
      (e: unknown) => {
        if (!(e instanceof OutboundBlockedError)) throw e;
        return false;
      },
    );

  it('takes IP addresses, ranges, hostnames and ports', async () => {
    expect(await allowed(['10.0.0.7'], 'http://hooks.internal/')).toBe(true);
    expect(await allowed(['10.0.0.7'], 'http://other.internal/')).toBe(false);
    expect(await allowed(['10.0.0.0/24'], 'http://other.internal:9000/')).toBe(true);
    expect(await allowed(['10.0.1.0/24'], 'http://other.internal/')).toBe(false);
    expect(await allowed(['127.0.0.0/8'], 'http://2130706433/')).toBe(true);
    expect(await allowed(['169.254.169.254'], 'http://169.254.169.254/')).toBe(true);
    expect(await allowed(['fd00::/8'], 'http://v6.internal/')).toBe(true);
    expect(await allowed(['fd00::7'], 'http://v6.internal/')).toBe(true);
    expect(await allowed(['::ffff:10.0.0.0/104'], 'http://hooks.internal/')).toBe(true);
    expect(await allowed(['hooks.internal'], 'http://hooks.internal:1234/')).toBe(true);
    expect(await allowed(['HOOKS.internal.'], 'http://Hooks.Internal/')).toBe(true);
    expect(await allowed(['hooks.internal'], 'http://other.internal/')).toBe(false);
    // host:port, ip:port and [v6]:port allow that port only.
    expect(await allowed(['hooks.internal:8080'], 'http://hooks.internal:8080/')).toBe(true);
    expect(await allowed(['hooks.internal:8080'], 'http://hooks.internal:8081/')).toBe(false);
    expect(await allowed(['hooks.internal:80'], 'http://hooks.internal/')).toBe(true);
    expect(await allowed(['10.0.0.7:443'], 'https://hooks.internal/')).toBe(true);
    expect(await allowed(['10.0.0.7:443'], 'http://hooks.internal/')).toBe(false);
    expect(await allowed(['[fd00::7]:8443'], 'https://v6.internal:8443/')).toBe(true);
    expect(await allowed(['[fd00::7]:8443'], 'https://v6.internal/')).toBe(false);
    expect(await allowed(['[::1]:8080'], 'http://[::1]:8080/')).toBe(true);
  });

  it('does not take wildcards, as GitLab documents', async () => {
    expect(await allowed(['*.example.test'], 'http://a.example.test/')).toBe(false);
  });

  it('splits the setting on commas, semicolons and whitespace', () => {
    expect(splitAllowlist('a.test, 10.0.0.0/8;[::1]:80\nb.test  c.test')).toEqual([
      'a.test',
      '10.0.0.0/8',
      '[::1]:80',
      'b.test',
      'c.test',
    ]);
    expect(splitAllowlist(['a.test', 'b.test;c.test'])).toEqual(['a.test', 'b.test', 'c.test']);
    expect(splitAllowlist(null)).toEqual([]);
    const list = parseAllowlist(['', '  ', 'ok.test']);
    expect(list.allowsHost('ok.test', 80)).toBe(true);
  });
});

describe('options from GitLab settings', () => {
  it('takes GitLab defaults: web hooks refused local requests, system hooks allowed', () => {
    const hooks = outboundOptionsFromSettings({});
    expect(hooks).toMatchObject({ allowLocal: false, allowlist: [], dnsRebindingProtection: true });
    expect(outboundOptionsFromSettings({}, 'system_hooks').allowLocal).toBe(true);
  });

  it('maps each setting', () => {
    const settings = {
      allow_local_requests_from_web_hooks_and_services: true,
      allow_local_requests_from_system_hooks: false,
      outbound_local_requests_whitelist: ['hooks.internal', '10.0.0.0/8'],
      dns_rebinding_protection_enabled: false,
      deny_all_requests_except_allowed: true,
    };
    expect(outboundOptionsFromSettings(settings)).toMatchObject({
      allowLocal: true,
      allowlist: ['hooks.internal', '10.0.0.0/8'],
      dnsRebindingProtection: false,
      denyAllExceptAllowed: true,
    });
    expect(outboundOptionsFromSettings(settings, 'system_hooks').allowLocal).toBe(false);
    expect(outboundOptionsFromSettings(settings, 'web_hooks_and_services', { maxBytes: 10 }).maxBytes).toBe(10);
  });
});
