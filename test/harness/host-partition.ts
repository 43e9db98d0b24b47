import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NetnsLab } from './netns.ts';

/**
 * Cuts one host off from its peers with nftables in the host's own namespace, leaving its other
 * traffic (a client's) alone: everything from the peers' addresses dropped on input, everything
 * to them on output, and everything to `groups` (multicast the peers listen to, e.g. VRRP's
 * 224.0.0.18) on output too, since dropping the peers' unicast addresses would not stop it.
 */
const TABLE = 'hostpartition';

export async function partitionHost(lab: NetnsLab, host: string, peers: string[], groups: string[] = []): Promise<void> {
  const path = join(lab.dir, `partition-${host}.nft`);
  writeFileSync(path, `table inet ${TABLE} {\n chain input {\n  type filter hook input priority 0; policy accept;\n  ip saddr { ${peers.join(', ')} } drop\n }\n chain output {\n  type filter hook output priority 0; policy accept;\n  ip daddr { ${[...peers, ...groups].join(', ')} } drop\n }\n}\n`);
  const r = await lab.exec(host, ['nft', '-f', path]);
  if (r.code !== 0) throw new Error(`nft -f ${path} in ${host}: ${r.stderr}`);
}

export async function healHostPartition(lab: NetnsLab, host: string): Promise<void> {
  const r = await lab.exec(host, ['nft', 'delete', 'table', 'inet', TABLE]);
  if (r.code !== 0) throw new Error(`nft delete table in ${host}: ${r.stderr}`);
}
