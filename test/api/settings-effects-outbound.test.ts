import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Dial, type Lookup, OutboundBlockedError, outboundRequest } from '../../src/lib/outbound/index.js';
import { outboundOptions } from '../../src/services/outbound.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { makeAdmin, makeToken, putSettings, resetSettings } from '../support/factories.js';

// The guard reads the application settings as they are now: an administrator's PUT changes what
// the next outbound request may reach, against a server this file starts on loopback.

let app: TestApp;
let adminToken: string;
let server: http.Server;
let port: number;

beforeAll(async () => {
  app = await startTestApp();
  adminToken = await makeToken(app, await makeAdmin(app));
  server = http.createServer((_req, res) => res.end('reached'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await app?.close();
});
beforeEach(async () => {
  await resetSettings(app);
});

const put = (body: Record<string, unknown>) => putSettings(app, adminToken, body);

/** 'reached', or the guard's refusal message. */
async function attempt(purpose: 'web_hooks_and_services' | 'system_hooks', url = `http://127.0.0.1:${port}/`) {
  try {
    const response = await outboundRequest(url, {}, await outboundOptions(app.deps, purpose));
    return response.body.toString();
  } catch (error) {
    if (error instanceof OutboundBlockedError) return `blocked: ${error.message}`;
    throw error;
  }
}

describe('outbound requests follow the application settings', () => {
  it('refuses loopback for web hooks and allows it for system hooks by default', async () => {
    expect(await attempt('web_hooks_and_services')).toMatch(/^blocked: Requests to localhost are not allowed/);
    expect(await attempt('system_hooks')).toBe('reached');
  });

  it('allow_local_requests_from_web_hooks_and_services and _system_hooks switch local requests', async () => {
    await put({
      allow_local_requests_from_web_hooks_and_services: true,
      allow_local_requests_from_system_hooks: false,
    });
    expect(await attempt('web_hooks_and_services')).toBe('reached');
    expect(await attempt('system_hooks')).toMatch(/^blocked:/);
    await put({ allow_local_requests_from_web_hooks_and_services: false });
    expect(await attempt('web_hooks_and_services')).toMatch(/^blocked:/);
  });

  it('outbound_local_requests_whitelist lets a listed address and port through, and only it', async () => {
    await put({ outbound_local_requests_whitelist: [`127.0.0.1:${port}`] });
    expect(await attempt('web_hooks_and_services')).toBe('reached');
    await put({ outbound_local_requests_whitelist: [`127.0.0.1:${port + 1}`] });
    expect(await attempt('web_hooks_and_services')).toMatch(/^blocked:/);
  });

  it('dns_rebinding_protection_enabled decides whether the connection goes to the checked address', async () => {
    const lookup: Lookup = async () => [{ address: '127.0.0.1', family: 4 }];
    const targets: string[] = [];
    const dial: Dial = ({ host, port: p }) => {
      targets.push(host);
      return net.connect({ host: '127.0.0.1', port: p });
    };
    const url = `http://hook.depot.test:${port}/`;
    await put({ allow_local_requests_from_web_hooks_and_services: true });
    await outboundRequest(url, {}, await outboundOptions(app.deps, 'web_hooks_and_services', { lookup, dial }));
    await put({ dns_rebinding_protection_enabled: false });
    await outboundRequest(url, {}, await outboundOptions(app.deps, 'web_hooks_and_services', { lookup, dial }));
    expect(targets).toEqual(['127.0.0.1', 'hook.depot.test']);
  });

  it("always reaches Depot's own BASE_URL", async () => {
    expect(await attempt('web_hooks_and_services', `${app.baseUrl}/-/liveness`)).not.toMatch(/^blocked:/);
  });
});
