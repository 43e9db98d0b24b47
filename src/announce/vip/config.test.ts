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
