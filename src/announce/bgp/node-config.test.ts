import { describe, expect, test } from 'bun:test';
import type { SecretSource } from '../../config-file/secrets.ts';
import { announcesFromNodes, loadNodeBgpConfig } from './node-config.ts';

/** What the speaker reads of the file for its own sessions. */

const noFiles: SecretSource = { readFile: (p) => { throw new Error(`ENOENT: no such file ${p}`); }, env: () => undefined };
const file = (loadBalancers: string) => `
loadBalancer:
  pools:
    - { name: public, addresses: [203.0.113.0/28], announce: bgp }
bgp:
  localASN: 64512
  routerID: 198.51.100.2
${loadBalancers}  peers:
    - { address: 198.51.100.1, asn: 65000, passwordFile: /creds/bgp }
`;

describe('the speaker\'s BGP configuration', () => {
  test('in the leader\'s mode the bgp section is not resolved: its password file, which the DaemonSet need not mount, is not read', () => {
    const r = loadNodeBgpConfig(file(''), noFiles);
    expect(r.ok).toBe(true);
    if (r.ok) expect(announcesFromNodes(r.config)).toBe(false);
  });

  test('with announceFrom: nodes it is, and an unreadable password file is an error naming it', () => {
    const r = loadNodeBgpConfig(file('  loadBalancers: { announceFrom: nodes }\n'), noFiles);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.path)).toEqual(['bgp.peers[0].passwordFile']);
    const ok = loadNodeBgpConfig(file('  loadBalancers: { announceFrom: nodes }\n'), { readFile: () => 'key\n', env: () => undefined });
    expect(ok.ok && announcesFromNodes(ok.config)).toBe(true);
  });
});
