import { describe, expect, test } from 'bun:test';
import { loadProxmoxConfig } from '../../../providers/proxmox/config-load.ts';
import type { SecretSource } from '../../config-file/secrets.ts';
import type { ConfigError } from '../../config-file/yaml-load.ts';
import { loadStaticConfig } from '../../../providers/static/config-load.ts';

/** The `bgp` section, shared by every provider: shape, cross-checks with paths, password files, pools' announce. */

const files: Record<string, string> = { '/creds/bgp-rtr1': 'md5-secret\n', '/creds/empty': '\n' };
const secrets: SecretSource = {
  readFile: (p) => {
    const text = files[p];
    if (text === undefined) throw new Error(`ENOENT: no such file ${p}`);
    return text;
  },
  env: (name) => (name === 'CREDENTIALS_DIRECTORY' ? '/creds' : undefined),
};

const dedent = (s: string) => s.replace(/^\n/, '').replace(/^ {4}/gm, '');

const POOLS = dedent(`
    loadBalancer:
      pools:
        - name: public
          addresses: [203.0.113.0/28]
          announce: bgp
        - name: other
          addresses: [203.0.113.32/28]
    `);

/** An error as [path, line, message], for long expected lists. */
const located = (e: ConfigError) => [e.path, e.line, e.message];

function errorsOf(yaml: string): ConfigError[] {
  const r = loadStaticConfig(yaml, secrets);
  if (r.ok) throw new Error('expected the config to be rejected');
  return r.errors;
}

describe('bgp section', () => {
  test('a full section resolves to the speaker configuration, the password read from ${CREDENTIALS_DIRECTORY}', () => {
    const r = loadStaticConfig(POOLS + dedent(`
    bgp:
      localASN: 4200000001
      routerID: 198.51.100.2
      gracefulRestart: { restartTimeSeconds: 90 }
      peers:
        - address: 198.51.100.1
          asn: 65000
          holdTimeSeconds: 30
          passwordFile: \${CREDENTIALS_DIRECTORY}/bgp-rtr1
          sourceAddress: 198.51.100.2
          families: [4]
        - address: 2001:db8::1
          asn: 65000
          multihop: 3
          addPath: false
      podCIDRs: { communities: ["65000:10"], localPref: 150 }
      pools:
        - name: public
          communities: [no-export, "65000:20"]
          localPref: 200
    `), secrets);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const bgp = r.config.bgp!;
    expect(bgp.speaker).toEqual({
      localAsn: 4200000001,
      routerId: '198.51.100.2',
      listen: false,
      gracefulRestart: { restartTimeSeconds: 90 },
      peers: [
        { address: '198.51.100.1', asn: 65000, holdTimeSeconds: 30, password: 'md5-secret', sourceAddress: '198.51.100.2', families: [4] },
        { address: '2001:db8::1', asn: 65000, multihop: 3, addPath: false },
      ],
    });
    expect(bgp.podCIDRs).toEqual({ announce: true, communities: ['65000:10'], localPref: 150 });
    expect([...bgp.pools]).toEqual([['public', { communities: ['no-export', '65000:20'], localPref: 200 }]]);
    expect(r.config.loadBalancer.pools.find((p) => p.name === 'public')?.announce).toBe('bgp');
    expect(r.config.loadBalancer.pools.find((p) => p.name === 'other')?.announce).toBe('none');
  });

  test('defaults: graceful restart 120 s, no listener, pod CIDRs announced; no section: no bgp', () => {
    const r = loadStaticConfig('bgp: { localASN: 64512, routerID: 198.51.100.2, peers: [{ address: 198.51.100.1, asn: 64512 }] }\n', secrets);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.config.bgp?.speaker.gracefulRestart).toEqual({ restartTimeSeconds: 120 });
    expect(r.config.bgp?.speaker.listen).toBe(false);
    expect(r.config.bgp?.podCIDRs.announce).toBe(true);
    const none = loadStaticConfig('inventory: { machines: [] }\n', secrets);
    expect(none.ok && none.config.bgp).toBeUndefined();
  });

  test('every problem at once, each with its path and line', () => {
    expect(errorsOf(POOLS + dedent(`
    bgp:
      localASN: 0
      routerID: 0.0.0.0
      gracefulRestart: { restartTimeSeconds: 5000 }
      peers:
        - address: 198.51.100.1
          asn: 65000
          passwordFile: /creds/missing
        - address: 198.51.100.1
          asn: 65000
          sourceAddress: 2001:db8::2
        - address: not-an-ip
          asn: 65000
          password: inline
        - address: 198.51.100.9
          asn: 65000
          holdTimeSeconds: 2
          communities: ["1:2"]
      podCIDRs: { communities: ["70000:1"] }
      pools:
        - name: other
        - name: nosuch
    `)).map(located)).toEqual([
      ['bgp.localASN', 9, 'must be an AS number (1..4294967295)'],
      ['bgp.routerID', 10, '"0.0.0.0" is not a non-zero dotted IPv4 address (the BGP identifier)'],
      ['bgp.gracefulRestart.restartTimeSeconds', 11, 'must be a restart time (1..4095)'],
      ['bgp.peers[0].passwordFile', 15, 'cannot read /creds/missing: ENOENT: no such file /creds/missing'],
      ['bgp.peers[1].address', 16, 'peer 198.51.100.1 is already bgp.peers[0]'],
      ['bgp.peers[1].sourceAddress', 18, "2001:db8::2 is not of the family of the peer's address 198.51.100.1"],
      ['bgp.peers[2].address', 19, '"not-an-ip" is not an IP address'],
      ['bgp.peers[2].password', 21, 'unknown key "password"'],
      ['bgp.peers[3].holdTimeSeconds', 24, 'must be 0 (no keepalives) or 3..65535 seconds (RFC 4271 4.2)'],
      ['bgp.peers[3].communities', 25, 'unknown key "communities"'],
      ['bgp.podCIDRs.communities[0]', 26, '"70000:1" is not a community (ASN:VALUE, both 0..65535, or no-export, no-advertise, no-export-subconfed)'],
      ['bgp.pools[0].name', 28, 'pool "other" is not announced over BGP (its announce is none; set announce: bgp)'],
      ['bgp.pools[1].name', 29, 'unknown pool "nosuch" (not in loadBalancer.pools)'],
    ]);
  });

  test('a password file that cannot be read, or holds no usable key, is named without its content', () => {
    const errors = errorsOf(dedent(`
    bgp:
      localASN: 64512
      routerID: 198.51.100.2
      peers:
        - { address: 198.51.100.1, asn: 65000, passwordFile: /creds/missing }
        - { address: 198.51.100.3, asn: 65000, passwordFile: /creds/empty }
    `));
    expect(errors).toEqual([
      expect.objectContaining({ path: 'bgp.peers[0].passwordFile', message: 'cannot read /creds/missing: ENOENT: no such file /creds/missing' }),
      expect.objectContaining({ path: 'bgp.peers[1].passwordFile', message: 'the TCP-MD5 key in /creds/empty must be 1..80 bytes (it has 0)' }),
    ]);
  });

  test('a pool announced over BGP needs the section', () => {
    expect(errorsOf(POOLS)).toEqual([
      expect.objectContaining({ path: 'loadBalancer.pools[0].announce', line: 5, message: 'pool "public" is announced over BGP, but the file has no bgp section (its peers)' }),
    ]);
  });

  test('the proxmox provider reads the same section', () => {
    const r = loadProxmoxConfig(dedent(`
    clusters:
      - region: fra1
        url: https://pve.example:8006
        tokenId: ccm@pve!ccm
        tokenSecretFile: /creds/bgp-rtr1
    bgp:
      localASN: 64512
      routerID: 198.51.100.2
      peers: [{ address: 198.51.100.1, asn: 65000, passwordFile: /creds/bgp-rtr1 }]
    `), secrets);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.config.bgp?.speaker.peers[0]?.password).toBe('md5-secret');
  });
});

describe('bgp.loadBalancers (who announces the addresses; BFD of the per-node sessions)', () => {
  const section = (extra: string, peer = '{ address: 198.51.100.1, asn: 65000 }') => POOLS + dedent(`
    bgp:
      localASN: 4200000001
      routerID: 198.51.100.2
      peers:
        - ${peer}
    ${extra}`);

  test('leader by default; nodes with BFD 3 x 200 ms by default, or as set, or off', () => {
    const bgpOf = (yaml: string) => {
      const r = loadStaticConfig(yaml, secrets);
      if (!r.ok) throw new Error(JSON.stringify(r.errors));
      return r.config.bgp!.loadBalancers;
    };
    expect(bgpOf(section(''))).toEqual({ announceFrom: 'leader' });
    expect(bgpOf(section('  loadBalancers: { announceFrom: nodes }'))).toEqual({ announceFrom: 'nodes', bfd: { desiredMinTxMs: 200, requiredMinRxMs: 200, detectMult: 3 } });
    expect(bgpOf(section('  loadBalancers: { announceFrom: nodes, bfd: { transmitIntervalMilliseconds: 300, receiveIntervalMilliseconds: 250, detectMultiplier: 4 } }'))).toEqual({ announceFrom: 'nodes', bfd: { desiredMinTxMs: 300, requiredMinRxMs: 250, detectMult: 4 } });
    expect(bgpOf(section('  loadBalancers: { announceFrom: nodes, bfd: { enabled: false } }', '{ address: 198.51.100.1, asn: 65000, multihop: 3 }'))).toEqual({ announceFrom: 'nodes' });
  });

  test('every problem named with its path', () => {
    expect(errorsOf(section('  loadBalancers: { announceFrom: everyone, bfd: { transmitIntervalMilliseconds: 10, detectMultiplier: 0 } }')).map(located)).toEqual([
      ['bgp.loadBalancers.announceFrom', 13, 'must be leader or nodes'],
      ['bgp.loadBalancers.bfd.detectMultiplier', 13, 'must be a detect multiplier (1..255)'],
      ['bgp.loadBalancers.bfd.transmitIntervalMilliseconds', 13, 'must be an interval in milliseconds (50..60000)'],
    ]);
    expect(errorsOf(section('  loadBalancers: { bfd: {} }')).map(located)).toEqual([
      ['bgp.loadBalancers.bfd', 13, 'BFD runs on the per-node sessions only: set announceFrom: nodes, or remove bfd'],
    ]);
    expect(errorsOf(section('  loadBalancers: { announceFrom: nodes }', '{ address: 198.51.100.1, asn: 65000, multihop: 2, passive: true }')).map(located)).toEqual([
      ['bgp.peers[0].multihop', 12, 'BFD of the per-node sessions is single hop (RFC 5881): the peer must share a subnet with the nodes; set loadBalancers.bfd.enabled: false for a multihop peer'],
      ['bgp.peers[0].passive', 12, 'with loadBalancers.announceFrom: nodes the nodes connect to every peer (they do not listen): passive cannot be set'],
    ]);
  });
});
