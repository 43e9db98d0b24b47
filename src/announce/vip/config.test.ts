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
    expect(r.config.preferredHost).toBeUndefined();
  });

  test('preferredHost: one of the hosts, named when it is not', () => {
    const r = loadVipConfig(`${GOOD}  preferredHost: cp2\n`);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.config.preferredHost).toBe('cp2');
    expect(errors(`${GOOD}  preferredHost: cp9\n`)).toEqual(['8: controlPlaneEndpoint.preferredHost: "cp9" is not in hosts (cp1, cp2, cp3): name one of them, or leave it out (a healthy holder keeps the VIP)']);
    expect(errors(`${GOOD}  preferredHost: "a b"\n`).join('\n')).toContain('controlPlaneEndpoint.preferredHost');
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
    expect(found).toContain('3: controlPlaneEndpoint.announce: bgp needs the routers to announce to: add a controlPlaneEndpoint.bgp section (localASN, peers)');
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
      expect(text).toContain('controlPlaneEndpoint.announce: bgp needs the routers to announce to');
    }
  });

  describe('announce: bgp', () => {
    const BGP = dedent(`
    controlPlaneEndpoint:
      addresses: [203.0.113.10, "2001:db8:9::10"]
      announce: bgp
      bgp:
        localASN: 64512
        peers:
          - {address: 198.51.100.1, asn: 64500, holdTimeSeconds: 9}
          - {address: "2001:db8::1", asn: 64500}
        communities: ["64512:10"]
      hosts:
        - {name: cp1, address: 198.51.100.11, nextHops: [198.51.100.11, "2001:DB8::11"]}
        - {name: cp2, address: 198.51.100.12, nextHops: [198.51.100.12, "2001:db8::12"]}
    `);

    test('peers, BFD on by default (3 x 200 ms), each host\'s next hop per family', () => {
      const r = loadVipConfig(BGP);
      if (!r.ok) throw new Error(JSON.stringify(r.errors));
      expect(r.config.announce).toBe('bgp');
      const bgp = r.config.bgp!;
      expect(bgp.localAsn).toBe(64512);
      expect(bgp.peers).toEqual([{ address: '198.51.100.1', asn: 64500, holdTimeSeconds: 9 }, { address: '2001:db8::1', asn: 64500 }]);
      expect(bgp.bfd).toEqual({ desiredMinTxMs: 200, requiredMinRxMs: 200, detectMult: 3 });
      expect(bgp.communities).toEqual(['64512:10']);
      expect([...bgp.nextHops]).toEqual([['cp1', { 4: '198.51.100.11', 6: '2001:db8::11' }], ['cp2', { 4: '198.51.100.12', 6: '2001:db8::12' }]]);
    });

    test('a host\'s next hop defaults to its address; BFD may be turned off', () => {
      const r = loadVipConfig(dedent(`
      controlPlaneEndpoint:
        addresses: [203.0.113.10]
        announce: bgp
        bgp: {localASN: 64512, peers: [{address: 198.51.100.1, asn: 64500}], bfd: {enabled: false}}
        hosts:
          - {name: cp1, address: 198.51.100.11}
          - {name: cp2, address: 198.51.100.12}
      `));
      if (!r.ok) throw new Error(JSON.stringify(r.errors));
      expect([...r.config.bgp!.nextHops]).toEqual([['cp1', { 4: '198.51.100.11' }], ['cp2', { 4: '198.51.100.12' }]]);
      expect(r.config.bgp!.bfd).toBeUndefined();
    });

    test('what one file for every host cannot say, and a family nobody can carry, each with its path', () => {
      const text = dedent(`
      controlPlaneEndpoint:
        addresses: [203.0.113.10, "2001:db8:9::10"]
        announce: bgp
        interfaces: [eth0]
        bgp:
          localASN: 64512
          peers:
            - {address: 198.51.100.1, asn: 64500, sourceAddress: 198.51.100.11, passive: true, multihop: 2}
            - {address: 198.51.100.1, asn: 64500}
        hosts:
          - {name: cp1, address: 198.51.100.11, nextHops: [198.51.100.11, 198.51.100.21]}
          - {name: cp2, address: 198.51.100.12, nextHops: [203.0.113.10]}
      `);
      const found = errors(text);
      expect(found).toEqual(expect.arrayContaining([
        '4: controlPlaneEndpoint.interfaces: interfaces are where announce: l2 answers ARP/NDP; with announce: bgp the routers carry the VIP: remove interfaces',
        '8: controlPlaneEndpoint.bgp.peers[0].sourceAddress: each host connects from its own address (hosts[].nextHops, else hosts[].address): one file serves every host, so sourceAddress cannot be set here',
        '8: controlPlaneEndpoint.bgp.peers[0].passive: the hosts connect to every peer (they do not listen): passive cannot be set',
        '8: controlPlaneEndpoint.bgp.peers[0].multihop: BFD is single hop (RFC 5881): the peer must share a subnet with the hosts; set bgp.bfd.enabled: false for a multihop peer',
        '9: controlPlaneEndpoint.bgp.peers[1].address: peer 198.51.100.1 is already controlPlaneEndpoint.bgp.peers[0]',
        '2: controlPlaneEndpoint.addresses[1]: 2001:db8:9::10: no peer of IPv6 in bgp.peers to announce it to',
        '11: controlPlaneEndpoint.hosts[0].nextHops[1]: 198.51.100.21: a second IPv4 address (198.51.100.11 is listed): one per family',
        "12: controlPlaneEndpoint.hosts[1].nextHops[0]: 203.0.113.10 is the control-plane address itself: give the host's own address",
        '12: controlPlaneEndpoint.hosts[1].nextHops: host "cp2" has no IPv4 address to be the next hop of 203.0.113.10: list one in hosts[1].nextHops',
      ]));
    });

    test('bgp and nextHops are refused with announce: l2', () => {
      const found = errors(BGP.replace('announce: bgp', 'announce: l2'));
      expect(found).toContain('4: controlPlaneEndpoint.bgp: read only with announce: bgp: remove it, or set announce: bgp');
      expect(found).toContain('11: controlPlaneEndpoint.hosts[0].nextHops: read only with announce: bgp: remove it');
    });

    test('a peer\'s passwordFile is read by edge-ccm vip, named when unreadable, not read by the controller', () => {
      const text = BGP.replace('holdTimeSeconds: 9}', 'holdTimeSeconds: 9, passwordFile: /nonexistent/bgp-password}');
      expect(errors(text).join('\n')).toMatch(/^7: controlPlaneEndpoint\.bgp\.peers\[0\]\.passwordFile: cannot read \/nonexistent\/bgp-password: /m);
      const r = loadStaticConfig(text);
      const other = r.ok ? [] : r.errors.filter((e) => e.path.startsWith('controlPlaneEndpoint'));
      expect(other).toEqual([]);
    });
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
