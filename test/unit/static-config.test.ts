import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatConfigErrors, loadStaticConfig, validateStaticConfig, type ConfigError } from '../../providers/static/config-load.ts';
import type { SecretSource } from '../../providers/static/config-resolve.ts';

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

describe('static config: each kind of bad input', () => {
  test('unknown key', () => {
    expect(errorsOf(dedent(`
    inventory:
      machines:
        - id: a
          zoen: z1
    `))).toEqual([{ path: 'inventory.machines[0].zoen', line: 4, message: 'unknown key "zoen"' }]);
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
      { path: 'loadBalancer.pools[0].addresses', line: 6, message: 'missing required key "addresses"' },
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
      { path: 'inventory.defaults.labels["bad key!"]', line: 5, message: 'invalid label "bad key!": "x": labels may hold only letters, digits, "-", "_", "." and one "/" in the key' },
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
