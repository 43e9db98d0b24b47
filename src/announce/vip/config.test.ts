import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate } from '../../../test/harness/certs.ts';
import { processSecrets } from '../../config-file/secrets.ts';
import { loadProxmoxConfig } from '../../../providers/proxmox/config-load.ts';
import { loadStaticConfig } from '../../../providers/static/config-load.ts';
import { loadVipConfig } from './config.ts';
import { DEFAULT_VIP_TIMINGS } from './config-model.ts';

/** The `controlPlaneEndpoint` section: what `edge-ccm vip` reads, and every provider's file validates alike. */

const dedent = (s: string) => s.replace(/^\n/, '').replace(/^ {4}/gm, '');

const GOOD = dedent(`
    controlPlaneEndpoint:
      addresses: [198.51.100.10, "2001:DB8::10"]
      announce: l2
      hosts:
        - {name: cp1, address: 198.51.100.11}
        - {name: cp2, address: 198.51.100.12}
        - {name: cp3, address: "2001:db8::13"}
    `);

function errors(text: string): string[] {
  const r = loadVipConfig(text);
  if (r.ok) throw new Error('expected errors');
  return r.errors.map((e) => `${e.line}: ${e.path}: ${e.message}`);
}

describe('controlPlaneEndpoint', () => {
  test('a minimal section gets the defaults; addresses are canonical', () => {
    const r = loadVipConfig(GOOD);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.config.addresses.map((a) => a.address)).toEqual(['198.51.100.10', '2001:db8::10']);
    expect(r.config.healthURL).toBe('https://127.0.0.1:6443/readyz');
    expect(r.config.heartbeatPort).toBe(7948);
    expect(r.config.timings).toEqual(DEFAULT_VIP_TIMINGS);
    expect([...r.config.hosts]).toEqual([['cp1', '198.51.100.11'], ['cp2', '198.51.100.12'], ['cp3', '2001:db8::13']]);
    expect(r.config.interfaces).toBeUndefined();
  });

  test('timings, interfaces, URL and port are read', () => {
    const r = loadVipConfig(`${GOOD}  interfaces: [eth0]\n  healthURL: https://127.0.0.1:6444/livez\n  heartbeatPort: 8000\n  timings: {healthIntervalMilliseconds: 500, healthTimeoutMilliseconds: 300, unhealthyAfter: 2, healthyAfter: 1, heartbeatIntervalMilliseconds: 100, livenessTimeoutMilliseconds: 500}\n`);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.config.interfaces).toEqual(['eth0']);
    expect(r.config.healthURL).toBe('https://127.0.0.1:6444/livez');
    expect(r.config.heartbeatPort).toBe(8000);
    expect(r.config.timings).toEqual({ healthIntervalMs: 500, healthTimeoutMs: 300, unhealthyAfter: 2, healthyAfter: 1, heartbeatIntervalMs: 100, livenessTimeoutMs: 500 });
  });

  test('the vip subcommand needs the section', () => {
    expect(errors('loadBalancer: {pools: []}\n')).toEqual(['1: controlPlaneEndpoint: required by edge-ccm vip (the address, the hosts)']);
  });

  test('shape errors and cross-checks, each with its path and line, all at once', () => {
    const text = dedent(`
    controlPlaneEndpoint:
      addresses: [198.51.100.10, 198.51.100.20]
      announce: bgp
      healthURL: "https://user:pw@127.0.0.1:6443/readyz"
      hosts:
        - {name: cp1, address: 198.51.100.11}
        - {name: cp1, address: 198.51.100.12}
        - {name: cp3, address: 198.51.100.11}
        - {name: cp4, address: 198.51.100.10}
        - {name: cp5, address: nope}
      timings: {healthIntervalMilliseconds: 100, healthTimeoutMilliseconds: 200, heartbeatIntervalMilliseconds: 500, livenessTimeoutMilliseconds: 500, unhealthyAfter: 0}
    `);
    const found = errors(text);
    expect(found.some((e) => e.includes('controlPlaneEndpoint.healthURL') && !e.includes('pw'))).toBe(true);
    expect(found).toContain('2: controlPlaneEndpoint.addresses[1]: 198.51.100.20: a second IPv4 address (198.51.100.10 is listed): one address per family');
    expect(found).toContain('3: controlPlaneEndpoint.announce: bgp is not supported yet by edge-ccm vip (issue 28): use l2');
    expect(found).toContain('7: controlPlaneEndpoint.hosts[1].name: host "cp1" is listed twice');
    expect(found).toContain('8: controlPlaneEndpoint.hosts[2].address: 198.51.100.11 is already host "cp1"\'s address');
    expect(found).toContain("9: controlPlaneEndpoint.hosts[3].address: 198.51.100.10 is the control-plane address itself: give the host's own address (the heartbeats must not depend on the VIP)");
    expect(found).toContain('10: controlPlaneEndpoint.hosts[4].address: "nope" is not an IP address');
    expect(found.some((e) => e.includes('timings.unhealthyAfter: must be a count (1..100)'))).toBe(true);
  });

  test('timings that do not fit each other', () => {
    const found = errors(`${GOOD}  timings: {healthIntervalMilliseconds: 100, healthTimeoutMilliseconds: 200, heartbeatIntervalMilliseconds: 500, livenessTimeoutMilliseconds: 500}\n`);
    expect(found).toEqual([
      '8: controlPlaneEndpoint.timings.healthTimeoutMilliseconds: 200 ms must be at most healthIntervalMilliseconds (100 ms): checks would overlap',
      '8: controlPlaneEndpoint.timings.livenessTimeoutMilliseconds: 500 ms must be longer than heartbeatIntervalMilliseconds (500 ms)',
    ]);
  });

  test('an unknown key is named', () => {
    expect(errors(`${GOOD}  interface: [eth0]\n`).join('\n')).toContain('controlPlaneEndpoint.interface');
  });

  test("every provider's file validates the section alike", () => {
    const bad = `${GOOD.replace('announce: l2', 'announce: bgp')}`;
    for (const load of [loadStaticConfig, loadProxmoxConfig]) {
      const r = load(bad);
      const text = r.ok ? '' : r.errors.map((e) => `${e.path}: ${e.message}`).join('\n');
      expect(text).toContain('controlPlaneEndpoint.announce: bgp is not supported yet');
    }
  });
});

describe('controlPlaneEndpoint.healthCheck', () => {
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-vip-config-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string) => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };
  const SECRET = 'SECRET-TOKEN-never-printed';
  const pki = (async () => {
    const ca = await createCertificateAuthority(dir, 'ca', 'test-ca');
    const [a, b] = await Promise.all([
      issueCertificate(ca, dir, 'client-a', { commonName: 'a', usage: 'client' }),
      issueCertificate(ca, dir, 'client-b', { commonName: 'b', usage: 'client' }),
    ]);
    return { ca, a, b };
  })();
  const section = (lines: string[]) => `${GOOD}  healthCheck:\n${lines.map((l) => `    ${l}\n`).join('')}`;

  test('the files are read at load: CA, client certificate and key; the name to check', async () => {
    const { ca, a } = await pki;
    const r = loadVipConfig(section([`caFile: ${ca.certPath}`, 'serverName: kubernetes', `clientCertificateFile: ${a.certPath}`, `clientKeyFile: ${a.keyPath}`]));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.config.healthRequest.tls).toEqual({ rejectUnauthorized: true, ca: ca.certPem, serverName: 'kubernetes', cert: a.certPem, key: a.keyPem });
    expect(r.config.healthRequest.headers).toEqual({});
  });

  test('no section: anonymous, not verified (kubeadm: anonymous-auth is on)', () => {
    const r = loadVipConfig(GOOD);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.config.healthRequest).toEqual({ tls: { rejectUnauthorized: false }, headers: {} });
  });

  test('a token, from ${CREDENTIALS_DIRECTORY} (systemd LoadCredential=), trimmed', async () => {
    const { ca } = await pki;
    file('health-token', `${SECRET}\n`);
    const text = section([`caFile: ${ca.certPath}`, 'tokenFile: ${CREDENTIALS_DIRECTORY}/health-token']);
    const r = loadVipConfig(text, { ...processSecrets, env: (name) => (name === 'CREDENTIALS_DIRECTORY' ? dir : undefined) });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.config.healthRequest.headers).toEqual({ authorization: `Bearer ${SECRET}` });
    expect(errors(text).join('\n')).toContain('10: controlPlaneEndpoint.healthCheck.tokenFile: ${CREDENTIALS_DIRECTORY}/health-token: CREDENTIALS_DIRECTORY is not set');
  });

  test('each unreadable or wrong file is named with its key, line and reason; no content is shown', async () => {
    const { ca, a, b } = await pki;
    const found = errors(section([
      `caFile: ${join(dir, 'missing.crt')}`,
      `clientCertificateFile: ${a.certPath}`,
      `clientKeyFile: ${b.keyPath}`,
    ]));
    expect(found).toEqual([
      `9: controlPlaneEndpoint.healthCheck.caFile: ${join(dir, 'missing.crt')}: ENOENT: no such file or directory, open '${join(dir, 'missing.crt')}'`,
      `11: controlPlaneEndpoint.healthCheck.clientKeyFile: ${b.keyPath}: not the key of ${a.certPath}'s certificate`,
    ]);
    const wrongKinds = errors(section([
      `caFile: ${dir}`,
      `clientCertificateFile: ${file('not-a-cert', SECRET)}`,
      `clientKeyFile: ${file('not-a-key', SECRET)}`,
    ]));
    expect(wrongKinds).toEqual([
      `9: controlPlaneEndpoint.healthCheck.caFile: ${dir}: ${dir} is a directory, not a regular file`,
      `10: controlPlaneEndpoint.healthCheck.clientCertificateFile: ${join(dir, 'not-a-cert')}: holds no PEM certificate`,
      `11: controlPlaneEndpoint.healthCheck.clientKeyFile: ${join(dir, 'not-a-key')}: holds no PEM private key`,
    ]);
    const token = errors(section([`caFile: ${ca.certPath}`, `tokenFile: ${file('two-tokens', `${SECRET}\n${SECRET}\n`)}`]));
    expect(token).toEqual([`10: controlPlaneEndpoint.healthCheck.tokenFile: ${join(dir, 'two-tokens')}: must hold one token: one line of printable characters, no spaces`]);
    expect([...wrongKinds, ...token].join('\n')).not.toContain(SECRET);
  });

  test('keys that go together, one credential, https only; paths absolute', () => {
    expect(errors(section(['clientCertificateFile: /a.crt', 'tokenFile: /t', 'serverName: kubernetes']))).toEqual([
      '8: controlPlaneEndpoint.healthCheck.caFile: is needed with tokenFile: a bearer token goes only to a server whose certificate is verified',
      '8: controlPlaneEndpoint.healthCheck.clientKeyFile: is needed with clientCertificateFile',
      '10: controlPlaneEndpoint.healthCheck.tokenFile: give one credential: a client certificate or a token, not both',
      '11: controlPlaneEndpoint.healthCheck.serverName: needs caFile: the name is checked only when the certificate is verified',
    ]);
    expect(errors(`${GOOD}  healthURL: http://127.0.0.1:8080/readyz\n  healthCheck: {caFile: /ca.crt}\n`)).toEqual([
      '9: controlPlaneEndpoint.healthCheck.caFile: needs an https healthURL (this one is plain http)',
    ]);
    expect(errors(section(['caFile: ca.crt', 'serverName: "a b"']))).toEqual([
      '9: controlPlaneEndpoint.healthCheck.caFile: must be an absolute path or ${CREDENTIALS_DIRECTORY}/NAME',
      '10: controlPlaneEndpoint.healthCheck.serverName: must be a host name or IP address',
    ]);
  });

  test('the controller validates the section without reading the files (only edge-ccm vip runs the check)', () => {
    const r = loadStaticConfig(section([`caFile: ${join(dir, 'missing.crt')}`]));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
  });
});
