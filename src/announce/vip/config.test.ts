import { describe, expect, test } from 'bun:test';
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
