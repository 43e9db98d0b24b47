/**
 * What the L2 speakers' heartbeat mesh and election cost one speaker at N nodes (issue 29):
 *
 * - the speaker under test (one real Liveness, the default interval and timeout, in its own
 *   process) sends to N-1 peers and hears N-1 peers, which run in a second process on loopback
 *   addresses 127.0.1.x (each peer hears only the speaker under test, so the machine carries one
 *   speaker's traffic, not the whole mesh's); its CPU and packets per second over a window;
 * - one election pass over M addresses and N nodes (what a speaker computes at every change), and
 *   the same with a disagreeing peer (the takeover check elects again under the peer's view).
 *
 *   bun bench/l2-heartbeat-cost.ts [--nodes=100] [--addresses=1000] [--seconds=20]
 */
import { randomBytes } from 'node:crypto';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { loadSpeakerConfig } from '../src/announce/config.ts';
import { electAddresses } from '../src/announce/l2/election.ts';
import { Liveness } from '../src/announce/l2/liveness.ts';
import { decodeView, electionView, viewDigest } from '../src/announce/l2/view.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';

const args = Object.fromEntries(process.argv.slice(2).filter((a) => a.startsWith('--') && a.includes('=')).map((a) => a.slice(2).split('=') as [string, string]));
const nodes = Number(args.nodes ?? 100);
const addresses = Number(args.addresses ?? 1000);
const seconds = Number(args.seconds ?? 20);
const role = args.role;
const peerAddress = (i: number) => `127.0.1.${i}`;
const names = Array.from({ length: nodes }, (_, i) => `node-${String(i).padStart(4, '0')}`);

if (role === 'speaker' || role === 'peers') {
  const key = Buffer.from(args.key!, 'hex');
  const port = Number(args.port);
  const everyone = new Map(names.map((n, i) => [n, [i === 0 ? '127.0.0.1' : peerAddress(i)]]));
  if (role === 'speaker') {
    const l = new Liveness({ node: names[0]!, key, port, bindAddress: '127.0.0.1', peers: () => everyone });
    await l.start();
    l.setState('ready', viewDigest(names));
    await Bun.sleep(3000); // every peer heard
    const before = { cpu: process.cpuUsage(), stats: l.stats(), at: performance.now() };
    await Bun.sleep(seconds * 1000);
    const cpu = process.cpuUsage(before.cpu);
    const stats = l.stats();
    const wall = (performance.now() - before.at) / 1000;
    console.log(JSON.stringify({
      heard: l.alive().size - 1,
      cpuMsPerSecond: (cpu.user + cpu.system) / 1000 / wall,
      sentPerSecond: (stats.sent - before.stats.sent) / wall,
      receivedPerSecond: (stats.received - before.stats.received) / wall,
      errors: stats.errors,
    }));
    l.stop();
    process.exit(0);
  }
  const speaker = new Map([[names[0]!, ['127.0.0.1']]]);
  const peers: Liveness[] = [];
  for (let i = 1; i < nodes; i++) {
    const l = new Liveness({ node: names[i]!, key, port, bindAddress: peerAddress(i), peers: () => speaker });
    await l.start();
    l.setState('ready', viewDigest(names));
    peers.push(l);
  }
  console.log('peers up');
  await Bun.sleep((seconds + 6) * 1000);
  for (const l of peers) l.stop();
  process.exit(0);
}

// The election pass, in this process.
function electionCost(): { firstPassMs: number; passMs: number; withDisagreementMs: number } {
  const loaded = loadSpeakerConfig(`loadBalancer:\n  pools:\n    - { name: lan, addresses: ["2001:db8:1::1-2001:db8:1::${addresses.toString(16)}"], announce: l2 }\n`);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  const nodeObjects: V1Node[] = names.map((name, i) => ({ metadata: { name }, spec: {}, status: { conditions: [{ type: 'Ready', status: 'True' }], addresses: [{ type: 'InternalIP', address: `198.51.100.${i % 250}` }] } }));
  const services: V1Service[] = Array.from({ length: addresses }, (_, i) => ({
    metadata: { name: `svc-${i}`, namespace: 'default' },
    spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Cluster' },
    status: { loadBalancer: { ingress: [{ ip: `2001:db8:1::${(i + 1).toString(16)}` }] } },
  }));
  const cluster = { pools: loaded.config.pools, services, nodes: nodeObjects, endpointSlices: [] };
  const peers = new Map(names.slice(1).map((n) => [n, { heard: true, state: 'ready' as const, view: '', refused: false }]));
  const rounds = 5;
  // The first pass hashes every node#address (remembered after: src/net/l2/election.ts).
  let t = performance.now();
  electAddresses({ ...cluster, alive: new Set(names) });
  const firstPassMs = performance.now() - t;
  t = performance.now();
  for (let r = 0; r < rounds; r++) {
    const view = electionView({ self: names[0]!, selfReady: true, readyNodes: new Set(names), peers });
    electAddresses({ ...cluster, alive: view.alive });
  }
  const passMs = (performance.now() - t) / rounds;
  t = performance.now();
  for (let r = 0; r < rounds; r++) {
    const view = electionView({ self: names[0]!, selfReady: true, readyNodes: new Set(names), peers });
    electAddresses({ ...cluster, alive: view.alive });
    // A peer one node behind: decode its view (up to N digests) and elect under it.
    const behind = new Set(view.alive);
    behind.delete(names[nodes - 1]!);
    const decoded = decodeView(viewDigest(behind), view.alive, names)!;
    electAddresses({ ...cluster, alive: decoded });
  }
  return { firstPassMs, passMs, withDisagreementMs: (performance.now() - t) / rounds };
}

const [port] = await freeLoopbackPorts(1);
const key = randomBytes(32).toString('hex');
const common = [`--nodes=${nodes}`, `--seconds=${seconds}`, `--port=${port}`, `--key=${key}`];
const peerProc = Bun.spawn({ cmd: [process.execPath, import.meta.path, '--role=peers', ...common], stdout: 'pipe', stderr: 'inherit' });
try {
  const reader = peerProc.stdout.getReader();
  let seen = '';
  while (!seen.includes('peers up')) {
    const { value, done } = await reader.read();
    if (done) throw new Error('the peers process ended before it was up');
    seen += new TextDecoder().decode(value);
  }
  const speaker = Bun.spawn({ cmd: [process.execPath, import.meta.path, '--role=speaker', ...common], stdout: 'pipe', stderr: 'inherit' });
  const out = await new Response(speaker.stdout).text();
  if ((await speaker.exited) !== 0) throw new Error(`speaker failed: ${out}`);
  const mesh = JSON.parse(out.trim().split('\n').at(-1)!);
  const election = electionCost();
  console.log(JSON.stringify({ nodes, addresses, seconds, ...mesh, election }, null, 1));
} finally {
  peerProc.kill();
  await peerProc.exited;
}
