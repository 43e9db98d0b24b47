import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SecretSource } from '../../src/config-file/secrets.ts';
import { formatConfigErrors, type ConfigError } from '../../src/config-file/yaml-load.ts';
import { loadStaticConfig, validateStaticConfig } from './config-load.ts';
import { isKubernetesNamespacedLabel } from '../../src/controllers/node/labels.ts';
import { formatIP } from '../../src/net/ip.ts';

const noSecrets: SecretSource = {
  readFile: (p) => {
    throw new Error(`ENOENT: no such file ${p}`);
  },
  env: () => undefined,
};

function errorsOf(yaml: string, secrets: SecretSource = noSecrets): ConfigError[] {
  const r = loadStaticConfig(yaml, secrets);
  if (r.ok) throw new Error('expected the config to be rejected');
  return r.errors;
}

/** Lines are given relative to the template below, for readability. */
const dedent = (s: string) => s.replace(/^\n/, '').replace(/^ {4}/gm, '');

describe('static config: valid files', () => {
  test('the example inventory is valid', () => {
    const text = readFileSync(join(import.meta.dir, '../../examples/inventory.yaml'), 'utf8');
    const r = loadStaticConfig(text, { readFile: () => 'pw', env: () => 'pw' });
    if (!r.ok) throw new Error(formatConfigErrors('examples/inventory.yaml', r.errors));
    expect(r.config.inventory.machines.map((m) => m.id)).toEqual(['node-a', 'node-b', 'node-c']);
    expect(r.config.loadBalancer.pools.length).toBeGreaterThanOrEqual(2);
  });

  test('an empty file is an empty, non-authoritative inventory', () => {
    const r = loadStaticConfig('');
    expect(r.ok && r.config.inventory).toEqual({ authoritative: false, matchBy: ['providerID', 'nodeName', 'hostname', 'address'], machines: [] });
  });

  test('validateStaticConfig answers ok or the errors', () => {
    expect(validateStaticConfig('inventory: {}\n', 'x.yaml')).toEqual({ ok: true });
    expect(validateStaticConfig('inventory: 3\n', 'x.yaml')).toEqual({
      ok: false,
      errors: [{ path: 'inventory', line: 1, message: 'wrong type: Expected Object but received 3' }],
    });
  });
});

describe('static config: every independent problem in one run', () => {
  test("a machine with a field error still has its rack, site and other addresses checked", () => {
    expect(errorsOf(dedent(`
    inventory:
      sites: { s1: {} }
      machines:
        - { id: a, rack: r9, site: s9, zone: 7, addresses: [{ type: InternalIP, address: 10.0.0.300 }, { type: InternalIP, address: 10.0.0.2 }] }
        - { id: b, rack: r8, addresses: [{ type: InternalIP, address: 10.0.0.2 }] }
        - { id: c, zoen: z, rack: r7 }
    `))).toEqual([
      { path: 'inventory.machines[0].addresses[0].address', line: 4, message: 'invalid IP address "10.0.0.300"' },
      { path: 'inventory.machines[0].rack', line: 4, message: 'unknown rack "r9" (not in inventory.racks)' },
      { path: 'inventory.machines[0].site', line: 4, message: 'unknown site "s9" (not in inventory.sites)' },
      { path: 'inventory.machines[0].zone', line: 4, message: 'wrong type: Expected string but received 7' },
      { path: 'inventory.machines[1].addresses[0].address', line: 5, message: 'duplicate address "10.0.0.2" (also in inventory.machines[0])' },
      { path: 'inventory.machines[1].rack', line: 5, message: 'unknown rack "r8" (not in inventory.racks)' },
      { path: 'inventory.machines[2].rack', line: 6, message: 'unknown rack "r7" (not in inventory.racks)' },
      { path: 'inventory.machines[2].zoen', line: 6, message: 'unknown key "zoen" (did you mean "zone"?)' },
    ]);
  });

  test('pinned pod CIDRs: CIDRs, one per family, no overlap between machines in service; canonical text', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - { id: a, podCIDRs: [10.244.1.0/24, "2001:db8:0:1::/64"] }
        - { id: b, podCIDRs: [10.244.1.128/25] }
        - { id: c, podCIDRs: [10.244.2.0/24, 10.244.3.0/24] }
        - { id: d, podCIDRs: [10.244.4.1/24] }
        - { id: e, podCIDRs: [] }
        - { id: f, podCIDRs: [10.244.1.0/24], decommissioned: true }
    `))).toEqual([
      { path: 'inventory.machines[1].podCIDRs[0]', line: 4, message: 'pod CIDR 10.244.1.128/25 overlaps 10.244.1.0/24 (also in inventory.machines[0])' },
      { path: 'inventory.machines[2].podCIDRs[1]', line: 5, message: 'two IPv4 pod CIDRs: give at most one IPv4 and one IPv6 CIDR' },
      { path: 'inventory.machines[3].podCIDRs[0]', line: 6, message: 'invalid CIDR "10.244.4.1/24" (a network address and its length, host bits zero, such as 10.244.3.0/24)' },
      { path: 'inventory.machines[4].podCIDRs', line: 7, message: 'must list at least one CIDR (or leave podCIDRs out)' },
    ]);
    const loaded = loadStaticConfig('inventory:\n  machines:\n    - { id: a, podCIDRs: ["2001:DB8:0:1:0::/64"] }\n', noSecrets);
    expect(loaded.ok && loaded.config.inventory.machines[0]!.podCIDRs).toEqual(['2001:db8:0:1::/64']);
  });

  test('a machine whose own redfish block is broken is not also told its merged redfish settings are incomplete', () => {
    expect(errorsOf(dedent(`
    inventory:
      defaults: { redfish: { endpoint: "https://10.0.1.1" } }
      machines:
        - { id: a, redfish: { usrname: admin }, rack: r9 }
    `))).toEqual([
      { path: 'inventory.machines[0].rack', line: 4, message: 'unknown rack "r9" (not in inventory.racks)' },
      { path: 'inventory.machines[0].redfish.usrname', line: 4, message: 'unknown key "usrname" (did you mean "username"?)' },
    ]);
  });
});

describe('static config: each kind of bad input', () => {
  test('unknown key', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - id: a
          zoen: z1
    `))).toEqual([{ path: 'inventory.machines[0].zoen', line: 4, message: 'unknown key "zoen" (did you mean "zone"?)' }]);
  });

  test('an unknown key far from every known one gets no suggestion', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - id: a
          location: z1
    `))).toEqual([{ path: 'inventory.machines[0].location', line: 4, message: 'unknown key "location"' }]);
  });

  test('wrong type', () => {
    expect(errorsOf(dedent(`
    inventory:
      authoritative: "yes"
    loadBalancer:
      pools:
        - name: p
          priority: 1.5
          addresses: [10.0.0.0/30]
    `))).toEqual([
      { path: 'inventory.authoritative', line: 2, message: 'wrong type: Expected boolean but received "yes"' },
      { path: 'loadBalancer.pools[0].priority', line: 6, message: 'must be an integer' },
    ]);
  });

  test('bad CIDR, range and address', () => {
    expect(errorsOf(dedent(`
    loadBalancer:
      pools:
        - name: p
          addresses:
            - 10.0.0.0/33
            - 10.0.0.4/29
            - 10.0.1.9-10.0.1.1
          exclude: [bogus]
    inventory:
      machines:
        - id: a
          addresses:
            - type: InternalIP
              address: 10.0.0.256
    `))).toEqual([
      { path: 'loadBalancer.pools[0].addresses[0]', line: 5, message: 'invalid CIDR "10.0.0.0/33"' },
      { path: 'loadBalancer.pools[0].addresses[1]', line: 6, message: 'invalid CIDR "10.0.0.4/29": host bits are set (did you mean 10.0.0.0/29?)' },
      { path: 'loadBalancer.pools[0].addresses[2]', line: 7, message: 'invalid address range "10.0.1.9-10.0.1.1": the first address is after the last' },
      { path: 'loadBalancer.pools[0].exclude[0]', line: 8, message: 'invalid address "bogus": expected a CIDR, a range FIRST-LAST or one address' },
      { path: 'inventory.machines[0].addresses[0].address', line: 14, message: 'invalid IP address "10.0.0.256"' },
    ]);
  });

  test('duplicate machine id, node name and address', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - id: a
          addresses: [{ type: InternalIP, address: "2001:db8::1" }]
        - id: b
          nodeName: a
        - id: a
        - id: c
          addresses: [{ type: InternalIP, address: "2001:0db8:0:0::1" }]
        - id: d
          decommissioned: true
          addresses: [{ type: InternalIP, address: "2001:db8::1" }]
    `))).toEqual([
      { path: 'inventory.machines[1].nodeName', line: 6, message: 'duplicate node name "a" (also in inventory.machines[0])' },
      { path: 'inventory.machines[2].id', line: 7, message: 'duplicate machine id "a" (also in inventory.machines[0])' },
      { path: 'inventory.machines[3].addresses[0].address', line: 9, message: 'duplicate address "2001:db8::1" (also in inventory.machines[0])' },
    ]);
  });

  test('duplicate YAML key', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - id: a
          zone: z1
          zone: z2
    `))).toEqual([{ path: 'inventory.machines[0].zone', line: 5, message: 'duplicate key' }]);
  });

  test('missing required key', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - nodeName: a
    loadBalancer:
      pools:
        - name: p
    `))).toEqual([
      { path: 'inventory.machines[0].id', line: 3, message: 'missing required key "id"' },
      { path: 'loadBalancer.pools[0].addresses', line: 6, message: 'missing required key "addresses" (or nodeAddresses: InternalIP or ExternalIP, for a pool of the nodes\' own addresses)' },
    ]);
  });

  test('YAML syntax error: reported alone, with its line', () => {
    const errors = errorsOf('inventory:\n  machines: [\n');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.line).toBeGreaterThanOrEqual(2);
  });

  test('references, overlaps, selectors, labels and Redfish settings', () => {
    expect(errorsOf(dedent(`
    inventory:
      racks:
        r1: { site: nowhere }
      defaults:
        labels: { "bad key!": x }
        redfish: { username: admin, passwordFile: /run/secrets/bmc }
      machines:
        - id: a
          rack: r2
          redfish: { endpoint: "https://10.0.1.1" }
    loadBalancer:
      pools:
        - name: p
          addresses: [10.0.0.0/29]
          serviceSelector: "a in (b"
    `))).toEqual([
      { path: 'inventory.racks.r1.site', line: 3, message: 'unknown site "nowhere" (not in inventory.sites)' },
      { path: 'inventory.defaults.labels["bad key!"]', line: 5, message: 'invalid label key "bad key!": name part must be letters, digits, "-", "_" or ".", starting and ending with a letter or digit' },
      { path: 'inventory.machines[0].rack', line: 9, message: 'unknown rack "r2" (not in inventory.racks)' },
      { path: 'inventory.machines[0].redfish', line: 10, message: 'redfish: cannot read passwordFile /run/secrets/bmc: ENOENT: no such file /run/secrets/bmc' },
      { path: 'loadBalancer.pools[0].serviceSelector', line: 15, message: 'invalid label selector: invalid label key "a in (b" in "a in (b"' },
    ]);
  });

  test('pool overlaps and duplicate pool names (once the values are well formed)', () => {
    expect(errorsOf(dedent(`
    loadBalancer:
      pools:
        - name: p
          addresses: [10.0.0.0/29]
        - name: q
          addresses: [10.0.0.6-10.0.0.9]
        - name: p
          addresses: [10.0.0.128/30]
          exclude: [10.0.0.128/30]
    `))).toEqual([
      { path: 'loadBalancer.pools[1].addresses', line: 6, message: 'pool "q" overlaps pool "p" at 10.0.0.6' },
      { path: 'loadBalancer.pools[2].name', line: 7, message: 'duplicate pool name "p" (also loadBalancer.pools[0])' },
      { path: 'loadBalancer.pools[2].addresses', line: 8, message: 'pool "p" has no addresses left after exclusions' },
    ]);
  });

  test('shape errors and meaning errors are reported in one run', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - id: a
          power: maybe
        - id: b
          rack: nope
    loadBalancer:
      pools:
        - name: p
          addresses: [10.0.0.0/30]
        - name: q
          addresses: [10.0.0.2/31]
    `))).toEqual([
      { path: 'inventory.machines[0].power', line: 4, message: 'wrong type: Expected ("on" | "off") but received "maybe"' },
      { path: 'inventory.machines[1].rack', line: 6, message: 'unknown rack "nope" (not in inventory.racks)' },
      { path: 'loadBalancer.pools[1].addresses', line: 12, message: 'pool "q" overlaps pool "p" at 10.0.0.2' },
    ]);
  });

  test('formatConfigErrors prints FILE:LINE: PATH: MESSAGE', () => {
    expect(formatConfigErrors('inv.yaml', [{ path: 'inventory.x', line: 3, message: 'unknown key "x"' }])).toBe('inv.yaml:3: inventory.x: unknown key "x"');
  });
});

describe('static config: meaning', () => {
  test('group defaults: machine over rack over site over defaults; labels merged', () => {
    const r = loadStaticConfig(dedent(`
    inventory:
      defaults: { region: eu, instanceType: generic, labels: { tier: edge } }
      sites:
        paris: { zone: paris-1, labels: { city: paris } }
      racks:
        r7: { site: paris, instanceType: r7-box, power: off }
      machines:
        - id: m1
          rack: r7
          labels: { tier: core }
        - id: m2
          site: paris
          zone: paris-2
        - id: m3
    `));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const [m1, m2, m3] = r.config.inventory.machines;
    expect(m1).toMatchObject({ site: 'paris', rack: 'r7', region: 'eu', zone: 'paris-1', instanceType: 'r7-box', power: 'off', labels: { tier: 'core', city: 'paris' } });
    expect(m2).toMatchObject({ site: 'paris', zone: 'paris-2', instanceType: 'generic', power: 'on', labels: { tier: 'edge', city: 'paris' } });
    expect(m3).toMatchObject({ site: undefined, zone: '', region: 'eu', providerID: 'static://m3', nodeName: 'm3' });
  });

  test('Redfish settings merge across layers; secrets from files and the environment', () => {
    const secrets: SecretSource = {
      readFile: (p) => (p === '/pw' ? 'from-file\n' : p === '/ca.pem' ? 'PEM' : (() => { throw new Error('ENOENT'); })()),
      env: (n) => (n === 'BMC_PW' ? 'from-env' : undefined),
    };
    const r = loadStaticConfig(dedent(`
    inventory:
      defaults:
        redfish: { username: admin, passwordFile: /pw, caFile: /ca.pem, auth: session, cacheSeconds: 10 }
      sites:
        lab:
          redfish: { username: lab, passwordEnv: BMC_PW, passwordFile: null }
      machines:
        - id: a
          redfish: { endpoint: "https://bmc-a/", systemId: "System.Embedded.1" }
        - id: b
          site: lab
          redfish: { endpoint: "https://bmc-b", timeoutSeconds: 2 }
        - id: c
    `), secrets);
    // passwordFile: null is a wrong type, not a way to unset: the file must say which source wins.
    expect(r.ok).toBe(false);
    const fixed = loadStaticConfig(dedent(`
    inventory:
      defaults:
        redfish: { username: admin, caFile: /ca.pem, auth: session, cacheSeconds: 10 }
      sites:
        lab:
          redfish: { username: lab, passwordEnv: BMC_PW }
      machines:
        - id: a
          redfish: { endpoint: "https://bmc-a/", systemId: "System.Embedded.1", passwordFile: /pw }
        - id: b
          site: lab
          redfish: { endpoint: "https://bmc-b", timeoutSeconds: 2 }
        - id: c
    `), secrets);
    if (!fixed.ok) throw new Error(JSON.stringify(fixed.errors));
    const [a, b, c] = fixed.config.inventory.machines;
    expect(a!.redfish).toEqual({
      endpoint: 'https://bmc-a', systemId: 'System.Embedded.1', auth: 'session', username: 'admin', password: 'from-file',
      ca: 'PEM', insecureSkipVerify: false, timeoutMs: 5000, cacheMs: 10_000,
    });
    expect(b!.redfish).toMatchObject({ endpoint: 'https://bmc-b', username: 'lab', password: 'from-env', timeoutMs: 2000 });
    expect(c!.redfish).toBeUndefined();
  });

  test('Redfish without credentials, or with two password sources, is refused', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - id: a
          redfish: { endpoint: "https://bmc-a" }
        - id: b
          redfish: { endpoint: "https://bmc-b", username: u, password: p, passwordEnv: X }
    `)).map((e) => [e.path, e.message])).toEqual([
      ['inventory.machines[0].redfish', 'redfish: username is required (here or in the rack, site or inventory.defaults)'],
      ['inventory.machines[0].redfish', 'redfish: exactly one of password, passwordFile or passwordEnv is required (found 0)'],
      ['inventory.machines[1].redfish', 'redfish: exactly one of password, passwordFile or passwordEnv is required (found 2)'],
      ['inventory.machines[1].redfish', 'redfish: environment variable X (passwordEnv) is not set'],
    ]);
  });

  test('pools are ordered by priority, then file order', () => {
    const r = loadStaticConfig(dedent(`
    loadBalancer:
      pools:
        - { name: a, addresses: [10.0.0.0/30] }
        - { name: b, addresses: [10.0.1.0/30], priority: 5 }
        - { name: c, addresses: [10.0.2.0/30] }
    `));
    expect(r.ok && r.config.loadBalancer.pools.map((p) => p.name)).toEqual(['b', 'a', 'c']);
  });
});

describe('static config: what the daemon could not use is refused', () => {
  test('region, zone and instanceType are label values: syntax, 63 characters, UTF-8', () => {
    // Bytes that are not UTF-8 (0xff), read as Bun.file().text() and readFileSync(…, 'utf8') read them.
    const notUtf8 = new TextDecoder().decode(new Uint8Array([0x72, 0xff, 0x31]));
    expect(errorsOf(dedent(`
    inventory:
      defaults:
        region: "eu west"
      sites:
        s1: { zone: "-z" }
      machines:
        - id: a
          instanceType: ${'x'.repeat(64)}
        - id: b
          zone: "${notUtf8}"
        - id: c
          region: eu-west.1_a
          zone: ""
          instanceType: ${'y'.repeat(63)}
    `))).toEqual([
      { path: 'inventory.defaults.region', line: 3, message: 'must be empty or letters, digits, "-", "_" or ".", starting and ending with a letter or digit (it is a label value)' },
      { path: 'inventory.sites.s1.zone', line: 5, message: 'must be empty or letters, digits, "-", "_" or ".", starting and ending with a letter or digit (it is a label value)' },
      { path: 'inventory.machines[0].instanceType', line: 8, message: 'must be at most 63 characters (it is a label value; got 64)' },
      { path: 'inventory.machines[1].zone', line: 10, message: 'is not valid UTF-8' },
    ]);
  });

  test('labels in a namespace Kubernetes reserves are refused by the rule the node controller drops them with', () => {
    const yaml = dedent(`
    inventory:
      defaults:
        labels:
          node-role.kubernetes.io/worker: ""
          kubernetes.io/arch: amd64
          storage.k8s.io/tier: fast
          example.com/kubernetes.io: fine
          notkubernetes.io/x: fine
      machines:
        - id: a
    `);
    const reserved = (key: string) => `label key ${JSON.stringify(key)} is in a namespace Kubernetes reserves (kubernetes.io, k8s.io and their subdomains): the node controller never sets it`;
    expect(errorsOf(yaml)).toEqual([
      { path: 'inventory.defaults.labels["node-role.kubernetes.io/worker"]', line: 4, message: `${reserved('node-role.kubernetes.io/worker')} as an inventory label; set role labels with a nodeRules rule (docs/operations.md, "Node rules")` },
      { path: 'inventory.defaults.labels["kubernetes.io/arch"]', line: 5, message: reserved('kubernetes.io/arch') },
      { path: 'inventory.defaults.labels["storage.k8s.io/tier"]', line: 6, message: reserved('storage.k8s.io/tier') },
    ]);
    // The same rule as the controller's, not a copy of it.
    for (const key of ['node-role.kubernetes.io/worker', 'kubernetes.io/arch', 'storage.k8s.io/tier']) expect(isKubernetesNamespacedLabel(key)).toBe(true);
    for (const key of ['example.com/kubernetes.io', 'notkubernetes.io/x']) expect(isKubernetesNamespacedLabel(key)).toBe(false);
  });

  test.each([
    ['0.0.0.0/0', 'unspecified'],
    ['::/0', 'unspecified'],
    ['0.0.0.0', 'unspecified'],
    ['127.0.0.0/8', 'loopback'],
    ['::1', 'loopback'],
    ['224.0.0.0/4', 'multicast'],
    ['ff02::1-ff02::ff', 'multicast'],
    ['169.254.0.0/16', 'link-local'],
    ['fe80::/64', 'link-local'],
    ['255.255.255.255', 'broadcast'],
  ])('a pool holding %p (%s) is refused', (range, kind) => {
    const errors = errorsOf(`loadBalancer:\n  pools:\n    - name: p\n      addresses: ["${range}"]\n`);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ path: 'loadBalancer.pools[0].addresses', line: 4 });
    expect(errors[0]!.message).toContain(`${kind} address`);
    expect(errors[0]!.message).toContain('allowSpecialAddresses: true');
  });

  test('a special address excluded from the pool is fine; allowSpecialAddresses lets a pool hold them', () => {
    expect(loadStaticConfig('loadBalancer:\n  pools:\n    - { name: p, addresses: [169.254.1.0/24], allowSpecialAddresses: true }\n').ok).toBe(true);
    expect(loadStaticConfig('loadBalancer:\n  pools:\n    - { name: p, addresses: [10.0.0.0-10.0.0.3, 127.0.0.1], exclude: [127.0.0.1] }\n').ok).toBe(true);
  });

  test('an exclude entry with no address in its pool is refused (a typo); one inside, or reaching into it, is fine', () => {
    expect(errorsOf(dedent(`
    loadBalancer:
      pools:
        - name: p
          addresses: [203.0.113.0/28, 203.0.113.100]
          exclude: [203.0.113.1, 203.0.13.5, 203.0.113.8-203.0.113.40, 2001:db8::1]
    `))).toEqual([
      { path: 'loadBalancer.pools[0].exclude[1]', line: 5, message: '"203.0.13.5" is outside pool "p"\'s addresses (203.0.113.0/28, 203.0.113.100): it would exclude nothing' },
      { path: 'loadBalancer.pools[0].exclude[3]', line: 5, message: '"2001:db8::1" is outside pool "p"\'s addresses (203.0.113.0/28, 203.0.113.100): it would exclude nothing' },
    ]);
  });

  test('a CIDR pool keeps its network and broadcast addresses out unless includeNetworkAndBroadcast', () => {
    const ranges = (yaml: string) => {
      const r = loadStaticConfig(`loadBalancer:\n  pools:\n    - ${yaml}\n`);
      if (!r.ok) throw new Error(formatConfigErrors('x', r.errors));
      return r.config.loadBalancer.pools[0]!.ranges.map((x) => `${formatIP({ family: x.family, value: x.first })}-${formatIP({ family: x.family, value: x.last })}`);
    };
    expect(ranges('{ name: p, addresses: [10.0.0.0/29] }')).toEqual(['10.0.0.1-10.0.0.6']);
    expect(ranges('{ name: p, addresses: [10.0.0.0/29], includeNetworkAndBroadcast: true }')).toEqual(['10.0.0.0-10.0.0.7']);
    // A range or a single address says exactly what it means; /31 and /32 have no network or broadcast address.
    expect(ranges('{ name: p, addresses: [10.0.0.0-10.0.0.7] }')).toEqual(['10.0.0.0-10.0.0.7']);
    expect(ranges('{ name: p, addresses: [10.0.0.8/31, 10.0.0.11/32] }')).toEqual(['10.0.0.8-10.0.0.9', '10.0.0.11-10.0.0.11']);
    // IPv6 has no broadcast; the prefix's first address is the Subnet-Router anycast address.
    expect(ranges('{ name: p, addresses: ["2001:db8::/126"] }')).toEqual(['2001:db8::1-2001:db8::3']);
    expect(ranges('{ name: p, addresses: ["2001:db8::/127"] }')).toEqual(['2001:db8::-2001:db8::1']);
  });

  test('plain http to a BMC or a Proxmox API is refused unless allowInsecureHTTP', () => {
    expect(errorsOf(dedent(`
    inventory:
      defaults:
        redfish: { username: admin, password: secret }
      machines:
        - id: a
          redfish: { endpoint: "http://10.0.1.1" }
        - id: b
          redfish: { endpoint: "http://10.0.1.2", allowInsecureHTTP: true }
        - id: c
          redfish: { endpoint: "https://10.0.1.3" }
    `))).toEqual([
      { path: 'inventory.machines[0].redfish', line: 6, message: 'redfish: endpoint http://10.0.1.1 is plain HTTP, which would send the credentials unencrypted: use https, or set allowInsecureHTTP: true' },
    ]);
  });

  test('every unknown key of a mapping is reported, not only the first', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - id: a
          zoen: z1
          rgion: r1
          redfish: { endpoint: "https://10.0.1.1", usrname: admin, pasword: x }
      extra: 1
    `))).toEqual([
      { path: 'inventory.machines[0].zoen', line: 4, message: 'unknown key "zoen" (did you mean "zone"?)' },
      { path: 'inventory.machines[0].rgion', line: 5, message: 'unknown key "rgion" (did you mean "region"?)' },
      { path: 'inventory.machines[0].redfish.pasword', line: 6, message: 'unknown key "pasword" (did you mean "password"?)' },
      { path: 'inventory.machines[0].redfish.usrname', line: 6, message: 'unknown key "usrname" (did you mean "username"?)' },
      { path: 'inventory.extra', line: 7, message: 'unknown key "extra"' },
    ]);
  });

  test('a duplicate machine id is reported together with the type errors of its machine', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - id: a
        - id: a
          zone: 7
        - id: b
          power: maybe
        - id: b
    `))).toEqual([
      { path: 'inventory.machines[1].id', line: 4, message: 'duplicate machine id "a" (also in inventory.machines[0])' },
      { path: 'inventory.machines[1].zone', line: 5, message: 'wrong type: Expected string but received 7' },
      { path: 'inventory.machines[2].power', line: 7, message: 'wrong type: Expected ("on" | "off") but received "maybe"' },
      { path: 'inventory.machines[3].id', line: 8, message: 'duplicate machine id "b" (also in inventory.machines[2])' },
    ]);
  });
});
