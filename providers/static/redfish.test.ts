import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { loadStaticConfig } from './config-load.ts';
import { StaticInstances } from './instances.ts';
import { Inventory } from './inventory.ts';
import { RedfishClient, RedfishClientPool, isShutdown, type RedfishConnection } from './redfish.ts';
import { createLogger, type Logger } from '../../src/log.ts';
import { RedfishResponder } from '../../test/fakes/redfish-responder.ts';
import { createCertificateAuthority, issueCertificate, type CertificateAuthority } from '../../test/harness/certs.ts';

const responders: RedfishResponder[] = [];
const clients: RedfishClient[] = [];

function responder(opts: Parameters<typeof RedfishResponder.start>[0] = {}): RedfishResponder {
  const r = RedfishResponder.start(opts);
  responders.push(r);
  return r;
}

function client(endpoint: string, o: Partial<RedfishConnection> = {}, logger?: Logger): RedfishClient {
  const c = new RedfishClient({
    endpoint,
    auth: 'basic',
    username: 'admin',
    password: 'secret',
    insecureSkipVerify: false,
    timeoutMs: 5000,
    cacheMs: 0,
    ...o,
  }, logger);
  clients.push(c);
  return c;
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const r of responders.splice(0)) r.stop();
});

describe('redfish client', () => {
  test('basic auth: reads On and Off', async () => {
    const bmc = responder({ systems: { '1': 'On' } });
    const c = client(bmc.url);
    expect(await c.powerState('1')).toBe('On');
    bmc.setPowerState('1', 'Off');
    expect(await c.powerState('1')).toBe('Off');
    expect(bmc.requestsTo('/redfish/v1/Systems/1').map((r) => r.auth)).toEqual(['basic', 'basic']);
  });

  test('basic auth with a wrong password: unknown', async () => {
    const bmc = responder();
    expect(await client(bmc.url, { password: 'wrong' }).powerState('1')).toBeUndefined();
  });

  test('session auth: one session, reused; re-opened once when the BMC forgets it; closed at the end', async () => {
    const bmc = responder({ systems: { 'System.Embedded.1': 'PoweringOff' } });
    const c = client(bmc.url, { auth: 'session' });
    expect(await c.powerState('System.Embedded.1')).toBe('PoweringOff');
    expect(await c.powerState('System.Embedded.1')).toBe('PoweringOff');
    expect(bmc.requestsTo('/redfish/v1/SessionService/Sessions').filter((r) => r.method === 'POST')).toHaveLength(1);
    expect(bmc.requestsTo('/redfish/v1/Systems/').map((r) => r.auth)).toEqual(['session', 'session']);
    bmc.expireSessions();
    bmc.setPowerState('System.Embedded.1', 'On');
    expect(await c.powerState('System.Embedded.1')).toBe('On');
    expect(bmc.requestsTo('/redfish/v1/SessionService/Sessions').filter((r) => r.method === 'POST')).toHaveLength(2);
    expect(bmc.sessionCount).toBe(1);
    await c.close();
    expect(bmc.sessionCount).toBe(0);
  });

  test('session auth with wrong credentials: unknown', async () => {
    const bmc = responder();
    expect(await client(bmc.url, { auth: 'session', password: 'nope' }).powerState('1')).toBeUndefined();
    expect(bmc.sessionCount).toBe(0);
  });

  test('unreachable BMC: unknown', async () => {
    const bmc = responder();
    const url = bmc.url;
    bmc.stop();
    expect(await client(url).powerState('1')).toBeUndefined();
  });

  test('slow BMC: unknown once the timeout passes', async () => {
    const bmc = responder();
    bmc.delayMs = 30_000;
    expect(await client(bmc.url, { timeoutMs: 300 }).powerState('1')).toBeUndefined();
  });

  test('failing BMC (HTTP 500) and a missing system: unknown', async () => {
    const bmc = responder();
    expect(await client(bmc.url).powerState('2')).toBeUndefined();
    bmc.failStatus = 500;
    expect(await client(bmc.url).powerState('1')).toBeUndefined();
  });

  test('an unknown PowerState value: unknown', async () => {
    const bmc = responder({ systems: { '1': 'Exploding' } });
    expect(await client(bmc.url).powerState('1')).toBeUndefined();
  });

  test('no systemId: the Systems collection\'s only member; several members: unknown', async () => {
    const one = responder({ systems: { 'Self': 'Off' } });
    expect(await client(one.url).powerState()).toBe('Off');
    const two = responder({ systems: { a: 'On', b: 'On' } });
    expect(await client(two.url).powerState()).toBeUndefined();
  });

  test('answers are cached for cacheMs, and concurrent reads share one request', async () => {
    const bmc = responder();
    const c = client(bmc.url, { cacheMs: 60_000 });
    const [a, b] = await Promise.all([c.powerState('1'), c.powerState('1')]);
    expect([a, b]).toEqual(['On', 'On']);
    bmc.setPowerState('1', 'Off');
    expect(await c.powerState('1')).toBe('On');
    expect(bmc.requestsTo('/redfish/v1/Systems/1')).toHaveLength(1);
  });

  test('power states map to shutdown', () => {
    expect([isShutdown('Off'), isShutdown('PoweringOff'), isShutdown('On'), isShutdown('PoweringOn'), isShutdown('Paused'), isShutdown(undefined)])
      .toEqual([true, true, false, false, false, undefined]);
  });
});

describe('redfish follows only its own origin', () => {
  /** A BMC whose links point at `elsewhere`, a second responder that records what reaches it. */
  function spoofed(auth: 'basic' | 'session', spoof: (elsewhere: string) => RedfishResponder['spoof']) {
    const elsewhere = responder();
    const bmc = responder();
    bmc.spoof = spoof(elsewhere.url);
    const lines: string[] = [];
    const c = client(bmc.url, { auth }, createLogger({ write: (l) => lines.push(l) }));
    return { elsewhere, bmc, c, lines, host: new URL(elsewhere.url).host };
  }

  test('Links.Sessions on another origin: no session posted there, unknown, the log names its host', async () => {
    const { elsewhere, c, lines, host } = spoofed('session', (url) => ({ sessionsLink: `${url}/redfish/v1/SessionService/Sessions` }));
    expect(await c.powerState('1')).toBeUndefined();
    expect(elsewhere.requests).toEqual([]);
    expect(lines.join('\n')).toContain(host);
  });

  test('a Systems member on another origin: not read with the basic credentials, unknown, the log names its host', async () => {
    const { elsewhere, c, lines, host } = spoofed('basic', (url) => ({ systemMembers: [`${url}/redfish/v1/Systems/1`] }));
    expect(await c.powerState()).toBeUndefined();
    expect(elsewhere.requests).toEqual([]);
    expect(lines.join('\n')).toContain(host);
    // Protocol-relative is another origin too.
    const relative = spoofed('basic', (url) => ({ systemMembers: [`//${new URL(url).host}/redfish/v1/Systems/1`] }));
    expect(await relative.c.powerState()).toBeUndefined();
    expect(relative.elsewhere.requests).toEqual([]);
    expect(relative.lines.join('\n')).toContain(relative.host);
  });

  test('a session Location on another origin: the token is never sent there, unknown, the log names its host', async () => {
    const { elsewhere, c, lines, host } = spoofed('session', (url) => ({ sessionLocation: `${url}/redfish/v1/SessionService/Sessions/1` }));
    expect(await c.powerState('1')).toBeUndefined();
    await c.close();
    expect(elsewhere.requests).toEqual([]);
    expect(lines.join('\n')).toContain(host);
  });

  test('absolute links to the BMC itself are followed', async () => {
    const bmc = responder({ systems: { '1': 'Off' } });
    bmc.spoof = {
      sessionsLink: `${bmc.url}/redfish/v1/SessionService/Sessions`,
      systemMembers: [`${bmc.url}/redfish/v1/Systems/1`],
      sessionLocation: `${bmc.url}/redfish/v1/SessionService/Sessions/1`,
    };
    const c = client(bmc.url, { auth: 'session' });
    expect(await c.powerState()).toBe('Off');
    expect(bmc.sessionCount).toBe(1);
    await c.close();
    expect(bmc.sessionCount).toBe(0);
  });
});

describe('redfish over TLS', () => {
  let dir: string;
  let ca: CertificateAuthority;
  let tls: { cert: string; key: string };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'edge-ccm-redfish-'));
    ca = await createCertificateAuthority(dir, 'ca', 'bmc-test-ca');
    const cert = await issueCertificate(ca, dir, 'bmc', { commonName: '127.0.0.1', usage: 'server', ipAddresses: ['127.0.0.1'] });
    tls = { cert: cert.certPem, key: cert.keyPem };
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('verified against the configured CA; an untrusted certificate is unknown unless verification is off', async () => {
    const bmc = responder({ tls });
    expect(bmc.url.startsWith('https://')).toBe(true);
    expect(await client(bmc.url, { ca: ca.certPem }).powerState('1')).toBe('On');
    expect(await client(bmc.url).powerState('1')).toBeUndefined();
    expect(await client(bmc.url, { insecureSkipVerify: true }).powerState('1')).toBe('On');
  });
});

describe('instanceShutdown through Redfish', () => {
  test('power: off wins; otherwise the BMC decides; a BMC with no answer is unknown', async () => {
    const bmc = responder({ systems: { '1': 'Off' } });
    const r = loadStaticConfig(`
inventory:
  defaults:
    redfish: { username: admin, password: secret, cacheSeconds: 0, timeoutSeconds: 0.3, allowInsecureHTTP: true }
  machines:
    - id: bmc-off
      redfish: { endpoint: "${bmc.url}", systemId: "1" }
    - id: forced-off
      power: off
      redfish: { endpoint: "${bmc.url}", systemId: "1" }
    - id: no-bmc
`);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const pool = new RedfishClientPool();
    const instances = new StaticInstances(() => new Inventory(r.config.inventory), pool);
    const node = (name: string): V1Node => ({ metadata: { name } });
    try {
      expect(await instances.instanceShutdown(node('bmc-off'))).toBe(true);
      bmc.setPowerState('1', 'On');
      expect(await instances.instanceShutdown(node('bmc-off'))).toBe(false);
      expect(await instances.instanceShutdown(node('forced-off'))).toBe(true);
      expect(await instances.instanceShutdown(node('no-bmc'))).toBe(false);
      bmc.delayMs = 30_000;
      expect(await instances.instanceShutdown(node('bmc-off'))).toBeUndefined();
    } finally {
      await pool.close();
    }
  });
});
