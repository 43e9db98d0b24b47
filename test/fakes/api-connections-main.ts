/**
 * How many connections a BunKubeTransport opens to a real API server for requests sent at once:
 * `bun api-connections-main.ts KUBECONFIG N`. Sends one GET of the namespace list, then N together, then
 * counts this process's established TCP connections to the server's port (its socket inodes in
 * /proc/self/fd matched against /proc/net/tcp) and prints one JSON line: the count and the HTTP
 * version the transport says it speaks. A process of its own, so no other client's sockets count.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { loadKubeConfig } from '../../src/app/kubeconfig.ts';
import { BunKubeTransport } from '../../src/kube/transport.ts';

const [kubeconfig, countText] = process.argv.slice(2);
const count = Number(countText);
if (!kubeconfig || !count) {
  console.error('usage: api-connections-main.ts KUBECONFIG N');
  process.exit(2);
}
const transport = new BunKubeTransport(loadKubeConfig({ kubeconfig }), { qps: 0 });
// One first, so the N below meet an open connection rather than racing to open their own.
await transport.request({ method: 'GET', path: '/api/v1/namespaces' });
await Promise.all(Array.from({ length: count }, () => transport.request({ method: 'GET', path: '/api/v1/namespaces' })));

const port = Number(new URL(transport.server).port);
const inodes = new Set<string>();
for (const fd of readdirSync('/proc/self/fd')) {
  try {
    const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
    if (m?.[1]) inodes.add(m[1]);
  } catch {
    // closed meanwhile
  }
}
const ESTABLISHED = '01';
let connections = 0;
for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
  const f = line.trim().split(/\s+/);
  const remotePort = Number.parseInt(f[2]?.split(':')[1] ?? '', 16);
  if (remotePort === port && f[3] === ESTABLISHED && inodes.has(f[9] ?? '')) connections++;
}
console.log(JSON.stringify({ connections, protocol: transport.protocol }));
process.exit(0);
