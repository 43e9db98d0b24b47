/**
 * What the L2 responder costs when nothing arrives, and how soon it answers (issue 38). A process
 * announces one IPv4 and one IPv6 address on each of N veth interfaces (two packet sockets each)
 * and idles: CPU per second of wall time, the main thread's context switches (its wake-ups)
 * per second and RSS, against the same process with no responder. Then a prober on the peer end of the
 * first veth sends ARP requests one at a time, 50-60 ms apart, and times each reply (blocking in
 * poll(), so it costs the responder nothing). Runs in its own network namespace.
 *
 * Each variant is a responder module: this tree's by default; another tree's (the polling one of
 * an older commit, say) with --variant=NAME:PATH/TO/src/net/l2/responder.ts. Variants are run in
 * turn, interleaved when --rounds > 1, so a loaded machine weighs on each alike.
 *
 *   bun bench/l2-poll-cost.ts [--interfaces=1,4] [--seconds=10] [--probes=200] [--rounds=1]
 *                             [--variant=NAME:RESPONDER_TS ...]
 */
import { dlopen, FFIType, ptr } from 'bun:ffi';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ARP_REPLY, ARP_REQUEST, parseArp, serializeArp } from '../src/net/l2/arp.ts';
import { BROADCAST_MAC, ETHERTYPE_ARP, ZERO_MAC, buildEthernet } from '../src/net/l2/ethernet.ts';
import { ipToBytes, parseIP } from '../src/net/ip.ts';
import { ETH_P_ARP, PacketSocket } from '../src/net/l2/packet-socket.ts';
import { NetnsLab, mustRun, requireRoot } from '../test/harness/netns.ts';

const argv = process.argv.slice(2).filter((a) => a.startsWith('--') && a.includes('='));
const args = Object.fromEntries(argv.map((a) => a.slice(2).split(/=(.*)/s).slice(0, 2) as [string, string]));
/** Set for the children only: they never build a lab of their own. */
const CHILD_ENV = 'EDGE_CCM_L2_BENCH_CHILD';
const THIS_TREE = join(import.meta.dir, '..', 'src', 'net', 'l2', 'responder.ts');
const TARGET = '198.51.100.1';

/** The main thread's voluntary + involuntary context switches: how often it was put to sleep or off the CPU. */
function mainThreadSwitches(): number {
  const status = readFileSync(`/proc/self/task/${process.pid}/status`, 'utf8');
  return [...status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

if (process.env[CHILD_ENV] === 'responder') {
  // Inside the namespace: announce, idle, report; then answer the prober until stdin closes.
  const count = Number(args.interfaces);
  let responder: { setAnnouncements(t: Map<string, string[]>): unknown[]; close(): void } | undefined;
  if (args.module) {
    const { L2Responder } = (await import(args.module)) as { L2Responder: new (o: object) => NonNullable<typeof responder> };
    responder = new L2Responder({});
  }
  const problems = responder?.setAnnouncements(new Map(Array.from({ length: count }, (_, i) => [`d${i}`, [`198.51.100.${i + 1}`, `2001:db8::${i + 1}`]])));
  if (problems?.length) throw new Error(JSON.stringify(problems));
  // Keeps the process alive with no wake-up of its own (a timer would be one).
  process.stdin.resume();
  await Bun.sleep(3_000); // the takeover repeats are over
  const start = process.cpuUsage();
  const switches = mainThreadSwitches();
  const startedAt = performance.now();
  await Bun.sleep(Number(args.seconds) * 1000);
  const used = process.cpuUsage(start);
  const wall = (performance.now() - startedAt) / 1000;
  const wakeups = (mainThreadSwitches() - switches) / wall;
  console.log(JSON.stringify({ cpuMsPerSecond: (used.user + used.system) / 1000 / wall, switchesPerSecond: wakeups, rssMiB: process.memoryUsage().rss / 2 ** 20 }));
  process.stdin.on('end', () => {
    responder?.close();
    process.exit(0);
  });
} else if (process.env[CHILD_ENV] === 'prober') {
  // On p0, the peer of the responder's d0: one ARP request at a time, the reply awaited in poll().
  const sys = dlopen('libc.so.6', { poll: { args: [FFIType.ptr, FFIType.u64, FFIType.i32], returns: FFIType.i32 } }).symbols;
  const socket = PacketSocket.open('p0', ETH_P_ARP);
  const fd = (socket as unknown as { fd: number }).fd;
  const mac = socket.mac();
  const request = buildEthernet(BROADCAST_MAC, mac, ETHERTYPE_ARP, serializeArp({ operation: ARP_REQUEST, senderMac: mac, senderIp: ipToBytes(parseIP('198.51.100.254')!), targetMac: ZERO_MAC, targetIp: ipToBytes(parseIP(TARGET)!) }));
  const pollfd = new Uint8Array(8);
  new DataView(pollfd.buffer).setInt32(0, fd, true);
  new DataView(pollfd.buffer).setInt16(4, 1 /* POLLIN */, true);
  const buffer = new Uint8Array(2048);
  const latencies: number[] = [];
  let lost = 0;
  for (let i = 0; i < Number(args.probes); i++) {
    while (socket.receive(buffer)); // nothing stale
    const sentAt = performance.now();
    socket.send(request);
    let answered = false;
    while (!answered) {
      const left = 200 - (performance.now() - sentAt);
      if (left <= 0 || sys.poll(ptr(pollfd), 1, Math.ceil(left)) <= 0) break;
      for (let got = socket.receive(buffer); got; got = socket.receive(buffer)) {
        const arp = parseArp(buffer.subarray(14, got.length));
        if (arp.ok && arp.packet.operation === ARP_REPLY && arp.packet.senderIp.join('.') === TARGET) answered = true;
      }
    }
    if (answered) latencies.push(performance.now() - sentAt);
    else lost += 1;
    // 50-60 ms apart, at random: a fixed gap would lock the requests to a polling tick's phase.
    await Bun.sleep(50 + Math.random() * 10);
  }
  socket.close();
  console.log(JSON.stringify({ latencies, lost }));
  process.exit(0);
} else {
  requireRoot();
  const interfaceCounts = (args.interfaces ?? '1,4').split(',').map(Number);
  const seconds = Number(args.seconds ?? 10);
  const probes = Number(args.probes ?? 200);
  const rounds = Number(args.rounds ?? 1);
  const given = argv.filter((a) => a.startsWith('--variant=')).map((a) => a.slice('--variant='.length));
  const variants: [string, string][] = [['none', ''], ...(given.length ? given : [`this tree:${THIS_TREE}`]).map((v) => v.split(/:(.*)/s).slice(0, 2) as [string, string])];
  const maxInterfaces = Math.max(...interfaceCounts);
  const lab = NetnsLab.create('l2bench');
  const results = new Map<string, { cpu: number[]; switches: number[]; rss: number[]; latencies: number[]; lost: number }>();
  try {
    await lab.addNamespace('host');
    for (let i = 0; i < maxInterfaces; i++) {
      // veth pairs: this kernel has no dummy interfaces; the peer ends stay silent but for the prober.
      await lab.ip('host', 'link', 'add', `d${i}`, 'type', 'veth', 'peer', 'name', `p${i}`);
      await lab.ip('host', 'link', 'set', `d${i}`, 'up');
      await lab.ip('host', 'link', 'set', `p${i}`, 'up');
    }
    const child = (role: string, extra: string[]) => ['ip', 'netns', 'exec', lab.ns('host'), 'env', `${CHILD_ENV}=${role}`, process.execPath, import.meta.path, ...extra];
    for (let round = 0; round < rounds; round++) {
      for (const count of interfaceCounts) {
        for (const [name, module] of variants) {
          const key = `${name}|${count}`;
          const r = results.get(key) ?? { cpu: [], switches: [], rss: [], latencies: [], lost: 0 };
          results.set(key, r);
          const proc = Bun.spawn({ cmd: child('responder', [`--module=${module}`, `--interfaces=${count}`, `--seconds=${seconds}`]), stdin: 'pipe', stdout: 'pipe', stderr: 'inherit' });
          try {
            const reader = proc.stdout.getReader();
            let text = '';
            while (!text.includes('\n')) {
              const { value, done } = await reader.read();
              if (done) throw new Error(`the ${name} responder exited ${await proc.exited}`);
              text += new TextDecoder().decode(value);
            }
            const idle = JSON.parse(text.trim().split('\n')[0]!) as { cpuMsPerSecond: number; switchesPerSecond: number; rssMiB: number };
            r.rss.push(idle.rssMiB);
            r.cpu.push(idle.cpuMsPerSecond);
            r.switches.push(idle.switchesPerSecond);
            if (module && count === interfaceCounts[0]) {
              const out = await mustRun(child('prober', [`--probes=${probes}`]), (probes * 0.3 + 30) * 1000);
              const probed = JSON.parse(out.trim().split('\n').at(-1)!) as { latencies: number[]; lost: number };
              r.latencies.push(...probed.latencies);
              r.lost += probed.lost;
            }
          } finally {
            proc.stdin.end();
            const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
            await proc.exited;
            clearTimeout(timer);
          }
        }
      }
    }
  } finally {
    await lab.destroy();
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const pct = (xs: number[], p: number) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
  };
  console.log(`idle ${seconds} s per run, ${rounds} round(s); load average at the end: ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
  console.log('| responder | interfaces (ARP + NDP socket each) | CPU ms per s | main-thread context switches per s | RSS after the idle (MiB) |');
  console.log('|---|---|---|---|---|');
  for (const [key, r] of results) {
    const [name, count] = key.split('|');
    console.log(`| ${name} | ${count} | ${mean(r.cpu).toFixed(2)} | ${mean(r.switches).toFixed(1)} | ${mean(r.rss).toFixed(1)} |`);
  }
  console.log(`\nARP answer latency, ${probes} requests per round on d0 (${interfaceCounts[0]} interface(s) announced), ms:`);
  console.log('| responder | p50 | p90 | p99 | max | unanswered |');
  console.log('|---|---|---|---|---|---|');
  for (const [key, r] of results) {
    if (r.latencies.length === 0) continue;
    const f = (x: number) => x.toFixed(3);
    console.log(`| ${key.split('|')[0]} | ${f(pct(r.latencies, 50))} | ${f(pct(r.latencies, 90))} | ${f(pct(r.latencies, 99))} | ${f(Math.max(...r.latencies))} | ${r.lost} |`);
  }
}
