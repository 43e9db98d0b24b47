import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { registerProxmoxProvider } from './index.ts';
import { loadProxmoxConfig } from './config-load.ts';
import { createProxmoxProvider } from './provider.ts';
import type { ConfigError } from '../../src/config-file/yaml-load.ts';
import { ProviderRegistry } from '../../src/cloud/registry.ts';
import { PASSWORD, SECRETS, TOKEN_ID, TOKEN_SECRET, loadOrThrow, quietLogger, tokenConfig } from '../../test/fakes/proxmox-fixtures.ts';

function errorsOf(yaml: string): ConfigError[] {
  const r = loadProxmoxConfig(yaml, SECRETS);
  if (r.ok) throw new Error('expected the config to be rejected');
  return r.errors;
}

const URL_ = 'https://pve1.example.com:8006';

describe('proxmox config: valid files', () => {
  test('the example file is valid', () => {
    const text = readFileSync(join(import.meta.dir, '../../examples/proxmox.yaml'), 'utf8');
    // Its files are credentials (${CREDENTIALS_DIRECTORY}/NAME), as systemd or the Deployment provide them.
    const read: string[] = [];
    const config = loadOrThrow(text, { readFile: (path) => (read.push(path), 'PEM'), env: (name) => (name === 'CREDENTIALS_DIRECTORY' ? '/run/credentials/edge-ccm.service' : undefined) });
    expect(read.sort()).toEqual(['pve-ams1-password', 'pve-fra1-ca.pem', 'pve-fra1-token'].map((f) => `/run/credentials/edge-ccm.service/${f}`));
    expect(config.clusters.map((c) => [c.region, c.zoneFrom, c.auth.kind])).toEqual([['fra1', 'host', 'token'], ['ams1', 'haGroup', 'password']]);
    expect(config.topologyLabelResync).toBe(true);
    expect(config.loadBalancer.pools.map((p) => p.name)).toEqual(['public', 'internal']);
  });

  test('a minimal token cluster gets the documented defaults', () => {
    const config = loadOrThrow(`clusters:\n  - region: fra1\n    url: ${URL_}/\n    tokenId: ${TOKEN_ID}\n    tokenSecretFile: /secrets/token\n`);
    expect(config.clusters[0]).toEqual({
      region: 'fra1',
      url: URL_,
      tls: { ca: undefined, fingerprint: undefined, insecureSkipVerify: false },
      auth: { kind: 'token', tokenId: TOKEN_ID, secret: TOKEN_SECRET },
      zoneFrom: 'host',
      timeoutMs: 5000,
      cacheMs: 5000,
      configCacheMs: 60000,
      qps: 10,
      burst: 20,
      maxBackoffMs: 30000,
    });
    expect(config.matchBy).toEqual(['providerID', 'name', 'systemUUID']);
    expect(config.instanceType).toEqual({ format: '{cores}VCPU-{memory}', tagPrefix: 'instance-type.' });
    expect(config.addresses).toMatchObject({ include: [], exclude: [], families: [4, 6], guestAgent: true, hostname: true });
    expect(config.topologyLabelResync).toBe(false);
    expect(config.loadBalancer).toEqual({ classes: [], pools: [] });
  });

  test('user and password from an environment variable, fingerprint normalised', () => {
    const config = loadOrThrow(`clusters:\n  - region: r\n    url: ${URL_}\n    username: ccm@pve\n    passwordEnv: PVE_PASSWORD\n    ticketRenewSeconds: 600\n    fingerprint: ${'ab'.repeat(32)}\n`);
    expect(config.clusters[0]!.auth).toEqual({ kind: 'password', username: 'ccm@pve', password: PASSWORD, renewMs: 600_000 });
    expect(config.clusters[0]!.tls.fingerprint).toBe(Array(32).fill('AB').join(':'));
  });
});

describe('proxmox config: every problem with its path and line', () => {
  test('unknown keys, bad values and static load-balancer checks in one run', () => {
    const errors = errorsOf([
      'clusters:', //                                  1
      '  - region: fra1', //                           2
      `    url: ${URL_}`, //                           3
      '    tokenId: ccm@pve', //                       4  no !TOKENID
      '    tokenSecretFile: /secrets/token', //        5
      '    zoen: pve1', //                             6  typo
      '  - region: ams1', //                           7
      '    url: not a url', //                         8
      '    username: ccm@pve', //                      9
      '    password: x', //                            10
      '    fingerprint: "AB:CD"', //                   11
      'matchBy: [providerID, hostname]', //            12
      'addresses:', //                                 13
      '  include: [10.0.0.1/8]', //                    14 host bits
      'loadBalancer:', //                              15
      '  pools:', //                                   16
      '    - name: a', //                              17
      '      addresses: [192.0.2.0/28]', //            18
      '    - name: b', //                              19
      '      addresses: [192.0.2.8/29]', //            20 overlaps a
    ].join('\n'));
    expect(errors.map((e) => [e.line, e.path])).toEqual([
      [4, 'clusters[0].tokenId'],
      [6, 'clusters[0].zoen'],
      [8, 'clusters[1].url'],
      [11, 'clusters[1].fingerprint'],
      [12, 'matchBy[1]'],
      [14, 'addresses.include[0]'],
      [20, 'loadBalancer.pools[1].addresses'],
    ]);
    expect(errors[1]!.message).toBe('unknown key "zoen"');
    expect(errors[5]!.message).toContain('host bits are set (did you mean 10.0.0.0/8?)');
    expect(errors[6]!.message).toContain('overlaps pool "a"');
  });

  test('authentication: none, both, two secret sources, unset variable, unreadable file', () => {
    const errors = errorsOf([
      'clusters:',
      '  - region: a', //                               2 none
      `    url: ${URL_}`,
      '  - region: b', //                               4 both
      `    url: ${URL_}`,
      `    tokenId: ${TOKEN_ID}`,
      '    tokenSecretFile: /secrets/token',
      '    username: ccm@pve',
      '    password: x',
      '  - region: c', //                               10 two sources
      `    url: ${URL_}`,
      `    tokenId: ${TOKEN_ID}`,
      '    tokenSecret: s',
      '    tokenSecretEnv: PVE_TOKEN',
      '  - region: d',
      `    url: ${URL_}`,
      '    username: ccm@pve',
      '    passwordEnv: NOT_SET', //                     18
      '  - region: e',
      `    url: ${URL_}`,
      `    tokenId: ${TOKEN_ID}`,
      '    tokenSecretFile: /nope', //                   22
      '    caFile: /nope-ca', //                         23
    ].join('\n'));
    expect(errors.map((e) => [e.line, e.path, e.message])).toEqual([
      [2, 'clusters[0]', expect.stringContaining('authentication is required')],
      [4, 'clusters[1]', expect.stringContaining('choose one authentication')],
      [10, 'clusters[2]', 'exactly one of tokenSecret, tokenSecretFile or tokenSecretEnv is required (found 2)'],
      [18, 'clusters[3].passwordEnv', 'environment variable NOT_SET (passwordEnv) is not set'],
      [22, 'clusters[4].tokenSecretFile', expect.stringContaining('cannot read tokenSecretFile /nope: ENOENT')],
      [23, 'clusters[4].caFile', expect.stringContaining('cannot read caFile /nope-ca')],
    ]);
  });

  test('duplicate regions, TLS settings that exclude each other, unknown placeholders, bad URL path', () => {
    const errors = errorsOf(
      tokenConfig(URL_, { region: 'r1', cluster: ['insecureSkipVerify: true', `fingerprint: "${'0'.repeat(64)}"`] }) + //  lines 1-9
        ['  - region: r1', `    url: ${URL_}/api2/json`, `    tokenId: ${TOKEN_ID}`, '    tokenSecretEnv: PVE_TOKEN', 'instanceType:', '  format: "{vcpus}-{memory}"'].join('\n'),
    );
    expect(errors.map((e) => [e.line, e.path, e.message])).toEqual([
      [8, 'clusters[0].insecureSkipVerify', 'cannot be combined with caFile or fingerprint (they verify the certificate)'],
      [10, 'clusters[1].region', expect.stringContaining('duplicate region "r1" (also clusters[0])')],
      [11, 'clusters[1].url', expect.stringContaining('must be the server only')],
      [15, 'instanceType.format', 'unknown placeholder {vcpus} (known: {cores}, {memory}, {memoryGiB}, {memoryMiB})'],
    ]);
  });

  test('plain http is refused unless allowInsecureHTTP; region and instance types are label values', () => {
    const errors = errorsOf([
      'clusters:', //                                          1
      '  - region: fra1', //                                   2
      '    url: http://pve1.example.com:8006', //              3
      `    tokenId: ${TOKEN_ID}`, //                           4
      '    tokenSecretFile: /secrets/token', //                5
      '  - region: ams1', //                                   6
      '    url: http://pve2.example.com:8006', //              7
      '    allowInsecureHTTP: true', //                        8
      `    tokenId: ${TOKEN_ID}`, //                           9
      '    tokenSecretFile: /secrets/token', //                10
      `  - region: ${'r'.repeat(64)}`, //                      11
      `    url: ${URL_}`, //                                   12
      `    tokenId: ${TOKEN_ID}`, //                           13
      '    tokenSecretFile: /secrets/token', //                14
      'instanceType:', //                                      15
      '  format: "{cores} vCPU / {memory}"', //                16
    ].join('\n'));
    expect(errors.map((e) => [e.line, e.path, e.message])).toEqual([
      [3, 'clusters[0].url', 'http://pve1.example.com:8006 is plain HTTP, which would send the API token or password unencrypted: use https, or set allowInsecureHTTP: true'],
      [11, 'clusters[2].region', 'must be at most 63 characters (it is a label value; got 64)'],
      [16, 'instanceType.format', 'gives instance types such as "1 vCPU / 1GB", which is not a label value: must be empty or letters, digits, "-", "_" or ".", starting and ending with a letter or digit (it is a label value)'],
    ]);
  });

  test('no clusters, a YAML syntax error', () => {
    expect(errorsOf('clusters: []\n')).toEqual([{ path: 'clusters', line: 1, message: 'must list at least one Proxmox VE cluster' }]);
    expect(errorsOf('')).toEqual([{ path: 'clusters', line: 1, message: 'missing required key "clusters"' }]);
    const [syntax] = errorsOf('clusters:\n  - region: [a\n');
    expect(syntax!.line).toBeGreaterThanOrEqual(2);
  });

  test('the registry validator and the factory report FILE:LINE: PATH: MESSAGE', async () => {
    const registry = new ProviderRegistry();
    registerProxmoxProvider(registry);
    const bad = 'clusters:\n  - region: a\n    url: https://x:8006\n    tokenId: ccm@pve!t\n    tokenSecret: s\n    qps: 0\n';
    expect(registry.validator('proxmox')!(bad, 'px.yaml')).toEqual([{ path: 'clusters[0].qps', line: 6, message: 'must be more than 0' }]);
    expect(registry.validator('proxmox')!(bad.replace('qps: 0', 'qps: 5'), 'px.yaml')).toEqual([]);
    await expect(registry.create('proxmox', { config: bad, configPath: 'px.yaml', logger: quietLogger })).rejects.toThrow('px.yaml:6: clusters[0].qps: must be more than 0');
    expect(() => createProxmoxProvider({ config: undefined, configPath: undefined, logger: quietLogger })).toThrow('needs --cloud-config');
  });
});
