/**
 * What BFD for N nodes costs a router (docs/networking/bgp.md, "Its cost at 100 and 1000 nodes"):
 * N BFD sessions (src/net/bfd, one endpoint per simulated node address, all in one process:
 * bench/bfd-sim-main.ts) with BIRD 2 (`protocol bfd` with a `neighbor` per node) or FRR 8.4's
 * bfdd (a `peer` per node), in two network namespaces on one veth link. Once every session is Up
 * on the router, a quiet window: CPU of the router's BFD daemon and of the simulating process,
 * packets per second on the router's link. BFD only: the per-node BGP sessions add a KEEPALIVE
 * every hold time / 3 each, negligible beside it.
 *
 *   bun bench/bfd-scale.ts [--nodes=100] [--routers=bird,frr] [--interval-ms=200] [--multiplier=3] [--steady-seconds=20]
 */
import { chownSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually } from '../test/harness/eventually.ts';
import { mustRun, NetnsLab } from '../test/harness/netns.ts';
import { frrDirectory } from '../test/harness/bgp-lab.ts';

const args = Object.fromEntries(process.argv.slice(2).filter((a) => a.startsWith('--') && a.includes('=')).map((a) => a.slice(2).split('=') as [string, string]));
const N = Number(args.nodes ?? 100);
const ROUTERS = (args.routers ?? 'bird,frr').split(',');
const INTERVAL = Number(args['interval-ms'] ?? 200);
const MULT = Number(args.multiplier ?? 3);
const STEADY_S = Number(args['steady-seconds'] ?? 20);
const SIM = join(import.meta.dir, 'bfd-sim-main.ts');
if (N > 200) throw new Error('--nodes: at most 200 (addresses .50-.249 of 198.51.100.0/24)');
const ROUTER = '198.51.100.1';
const nodes = Array.from({ length: N }, (_, i) => `198.51.100.${50 + i}`);

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const results: Record<string, unknown> = {};
for (const kind of ROUTERS) {
  const lab = NetnsLab.create('bfdscale');
  try {
    await lab.addNamespace('sim');
    await lab.addNamespace('rtr');
    await lab.addVeth({ from: 'sim', fromName: 'sim0', to: 'rtr', toName: 'rtr0' });
    await lab.ip('rtr', 'addr', 'add', `${ROUTER}/24`, 'dev', 'rtr0');
    for (const a of nodes) await lab.ip('sim', 'addr', 'add', `${a}/24`, 'dev', 'sim0');
    let daemon: string;
    if (kind === 'bird') {
      const conf = join(lab.dir, 'bird.conf');
      writeFileSync(conf, `router id ${ROUTER};\nprotocol device { }\nprotocol bfd {\n  interface "*" { interval ${INTERVAL} ms; multiplier ${MULT}; };\n${nodes.map((a) => `  neighbor ${a};`).join('\n')}\n}\n`);
      lab.spawnLogged('rtr', 'bird', ['/usr/sbin/bird', '-f', '-c', conf, '-s', join(lab.dir, 'bird.ctl'), '-P', join(lab.dir, 'bird.pidfile')]);
      daemon = 'bird';
    } else {
      const { dir, uid, gid } = await frrDirectory(lab);
      const conf = join(dir, 'bfdd.conf');
      writeFileSync(conf, ['hostname rtr', 'bfd', ...nodes.flatMap((a) => [` peer ${a} local-address ${ROUTER}`, `  detect-multiplier ${MULT}`, `  receive-interval ${INTERVAL}`, `  transmit-interval ${INTERVAL}`, ' exit']), 'exit', ''].join('\n'));
      writeFileSync(join(dir, 'zebra.conf'), 'hostname rtr\n');
      for (const f of ['bfdd.conf', 'zebra.conf']) chownSync(join(dir, f), uid, gid);
      const common = ['-z', join(dir, 'zserv.api'), '--vty_socket', dir];
      lab.spawnLogged('rtr', 'zebra', ['/usr/lib/frr/zebra', ...common, '-i', join(dir, 'zebra.pid'), '-f', join(dir, 'zebra.conf')]);
      await Bun.sleep(1000);
      lab.spawnLogged('rtr', 'bfdd', ['/usr/lib/frr/bfdd', ...common, '-i', join(dir, 'bfdd.pid'), '-f', conf]);
      daemon = 'bfdd';
    }
    const sim = lab.spawnPiped('sim', 'sim', [process.execPath, SIM, ROUTER, '3784', String(INTERVAL), String(MULT), ...nodes]);
    let upLine = '';
    void (async () => {
      for await (const chunk of sim.stdout) upLine = new TextDecoder().decode(chunk).trim().split('\n').pop() ?? upLine;
    })();
    await eventually(`all ${N} sessions Up (${kind})`, () => upLine === `up ${N}`, { timeoutMs: 60_000, explain: () => upLine });
    await Bun.sleep(3000); // past the Poll Sequences: every session at the fast rate
    const pids = (await mustRun(['ip', 'netns', 'pids', lab.ns('rtr')])).trim().split('\n').map(Number).filter((pid) => readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === daemon);
    const router = pids[0]!;
    const stats = async () => JSON.parse(await lab.ip('rtr', '-s', '-j', 'link', 'show', 'rtr0'))[0].stats64;
    const [r0, s0, p0, t0] = [cpuSeconds(router), cpuSeconds(sim.pid), await stats(), performance.now()];
    await Bun.sleep(STEADY_S * 1000);
    const [r1, s1, p1, t1] = [cpuSeconds(router), cpuSeconds(sim.pid), await stats(), performance.now()];
    const seconds = (t1 - t0) / 1000;
    const stillUp = upLine;
    results[kind] = {
      nodes: N, intervalMs: INTERVAL, multiplier: MULT, seconds: +seconds.toFixed(1), stillUp,
      routerDaemonCpuPercent: +((100 * (r1 - r0)) / seconds).toFixed(2),
      simProcessCpuPercent: +((100 * (s1 - s0)) / seconds).toFixed(2),
      routerPacketsPerSecond: { rx: +((p1.rx.packets - p0.rx.packets) / seconds).toFixed(1), tx: +((p1.tx.packets - p0.tx.packets) / seconds).toFixed(1) },
    };
    console.error(`[${kind}] ${JSON.stringify(results[kind])}`);
    sim.stdin.write('stop\n');
    sim.stdin.end();
    await sim.exited;
  } finally {
    await lab.destroy();
  }
}
console.log(JSON.stringify(results, null, 2));
