import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually } from './eventually.ts';
import { mustRun, NetnsLab, requireTools, runCommand } from './netns.ts';
import type { LoggedProcess } from './processes.ts';

/**
 * A router and the BGP speaker on one shared subnet, each in its own namespace:
 *
 *   [spk] spk0 198.51.100.2/24, 2001:db8::2/64  ----  rtr0 198.51.100.1/24, 2001:db8::1/64 [rtr]
 *
 * The speaker announces third-party next hops on that subnet (the "nodes", .11 .12 .13 and
 * ::11 ::12 ::13, which need not exist for the routes to be accepted and installed: RFC 4271
 * 5.1.3, the next hop shares the subnet with the router). The router is BIRD 2, FRR or GoBGP,
 * started by hand in its namespace, one IPv4 and one IPv6 session with the speaker.
 */
export const ROUTER_ASN = 65000;
export const SPEAKER_ASN = 4200000001;
export const ROUTER4 = '198.51.100.1';
export const SPEAKER4 = '198.51.100.2';
export const ROUTER6 = '2001:db8::1';
export const SPEAKER6 = '2001:db8::2';
export const NODES4 = ['198.51.100.11', '198.51.100.12', '198.51.100.13'];
export const NODES6 = ['2001:db8::11', '2001:db8::12', '2001:db8::13'];

export const ROUTER_TOOLS = {
  bird: { '/usr/sbin/bird': 'bird2', '/usr/sbin/birdc': 'bird2', '/usr/sbin/ip': 'iproute2' },
  frr: { '/usr/lib/frr/zebra': 'frr', '/usr/lib/frr/bgpd': 'frr', '/usr/bin/vtysh': 'frr', '/usr/sbin/ip': 'iproute2' },
  gobgp: { '/usr/bin/gobgpd': 'gobgpd', '/usr/bin/gobgp': 'gobgpd', '/usr/sbin/ip': 'iproute2' },
} as const;

export type RouterKind = keyof typeof ROUTER_TOOLS;

export interface RouterOptions {
  /** Graceful restart helper: keep the speaker's routes while it restarts. */
  gracefulRestart?: boolean;
  /** TCP-MD5 password on both sessions. */
  password?: string;
  /** The speakers' addresses, one IPv4 and one IPv6 session each; default the one speaker at SPEAKER4 / SPEAKER6. */
  speakers?: SpeakerAddresses[];
  /**
   * Nodes with their own sessions (edge-ccm speaker, loadBalancers.announceFrom: nodes), one
   * IPv4 and one IPv6 each, every session tied to a BFD session (BIRD `bfd on` with `protocol
   * bfd`, FRR `neighbor X bfd profile` with bfdd), as docs/networking/bgp.md configures them.
   */
  bfdNodes?: {
    nodes: SpeakerAddresses[];
    intervalMs: number;
    multiplier: number;
    /** Accept the nodes by range (BIRD `neighbor range`, FRR `bgp listen range`: sessions made as nodes connect) instead of listing them. */
    dynamic?: { v4: string; v6: string };
    /** IPv4 sessions only (BIRD): the router has no IPv6 address on the nodes' LAN (the soak's L2 lab). */
    ipv4Only?: boolean;
  };
}

export interface SpeakerAddresses {
  v4: string;
  v6: string;
}

function speakersOf(o: RouterOptions): SpeakerAddresses[] {
  return o.speakers ?? [{ v4: SPEAKER4, v6: SPEAKER6 }];
}

/** BIRD's protocol name of a session: speaker4/speaker6 for the first speaker, speaker4_N/speaker6_N for the others, node4_N/node6_N for BFD nodes. */
function birdProtocol(o: RouterOptions, address: string): string {
  const family = address.includes(':') ? 6 : 4;
  const node = (o.bfdNodes?.nodes ?? []).findIndex((s) => s.v4 === address || s.v6 === address);
  if (node >= 0) return `node${family}_${node}`;
  const i = speakersOf(o).findIndex((s) => s.v4 === address || s.v6 === address);
  return i <= 0 ? `speaker${family}` : `speaker${family}_${i}`;
}

/** Paths (next hops) per prefix in the router's BGP table. */
export type PathTable = Map<string, string[]>;

export interface BgpRouter {
  readonly kind: RouterKind;
  paths(family: 4 | 6): Promise<PathTable>;
  /** The router's session with `address` is Established. */
  sessionUp(address: string): Promise<boolean>;
  /** The router's BFD session with `address` is Up (BIRD and FRR, with bfdNodes). */
  bfdUp?(address: string): Promise<boolean>;
  stop(): Promise<void>;
}

export async function createBgpLab(label: string, kind: RouterKind): Promise<NetnsLab> {
  requireTools(ROUTER_TOOLS[kind]);
  const lab = NetnsLab.create(label);
  await lab.addNamespace('spk');
  await lab.addNamespace('rtr');
  await lab.addVeth({ from: 'spk', fromName: 'spk0', to: 'rtr', toName: 'rtr0' });
  await lab.ip('spk', 'addr', 'add', `${SPEAKER4}/24`, 'dev', 'spk0');
  await lab.ip('spk', 'addr', 'add', `${SPEAKER6}/64`, 'dev', 'spk0', 'nodad');
  await lab.ip('rtr', 'addr', 'add', `${ROUTER4}/24`, 'dev', 'rtr0');
  await lab.ip('rtr', 'addr', 'add', `${ROUTER6}/64`, 'dev', 'rtr0', 'nodad');
  return lab;
}

/** Kernel routes in `role`'s namespace installed by a routing daemon: prefix -> sorted next hops. */
export async function kernelRoutes(lab: NetnsLab, role: string, family: 4 | 6): Promise<PathTable> {
  const out = await lab.ip(role, '-j', `-${family}`, 'route', 'show');
  const table: PathTable = new Map();
  for (const r of JSON.parse(out || '[]') as { dst: string; gateway?: string; nexthops?: { gateway?: string }[]; protocol?: string }[]) {
    if (r.protocol === 'kernel' || !r.dst || r.dst === 'default') continue;
    const hops = r.nexthops ? r.nexthops.map((h) => h.gateway ?? '') : r.gateway ? [r.gateway] : [];
    if (hops.length === 0) continue;
    const dst = r.dst.includes('/') ? r.dst : `${r.dst}/${family === 4 ? 32 : 128}`;
    table.set(dst, hops.sort());
  }
  return table;
}

export function speakerConfig(options: { gracefulRestartSeconds?: number; password?: string } = {}) {
  const peer = { asn: ROUTER_ASN, holdTimeSeconds: 9, connectRetry: { minSeconds: 0.2, maxSeconds: 2 }, ...(options.password ? { password: options.password } : {}) };
  return {
    localAsn: SPEAKER_ASN,
    routerId: SPEAKER4,
    ...(options.gracefulRestartSeconds ? { gracefulRestart: { restartTimeSeconds: options.gracefulRestartSeconds } } : {}),
    peers: [
      { ...peer, address: ROUTER4, sourceAddress: SPEAKER4, families: [4 as const] },
      { ...peer, address: ROUTER6, sourceAddress: SPEAKER6, families: [6 as const] },
    ],
  };
}

export async function startRouter(lab: NetnsLab, kind: RouterKind, options: RouterOptions = {}): Promise<BgpRouter> {
  switch (kind) {
    case 'bird':
      return Bird.start(lab, options);
    case 'frr':
      return Frr.start(lab, options);
    case 'gobgp':
      return GoBgp.start(lab, options);
  }
}

function sortTable(t: PathTable): PathTable {
  for (const [k, v] of t) t.set(k, v.sort());
  return t;
}

// ---- BIRD 2 ----

class Bird implements BgpRouter {
  readonly kind = 'bird';
  private constructor(
    private readonly lab: NetnsLab,
    private readonly proc: LoggedProcess,
    private readonly socket: string,
    private readonly options: RouterOptions,
  ) {}

  static async start(lab: NetnsLab, o: RouterOptions): Promise<Bird> {
    const conf = join(lab.dir, 'bird.conf');
    const socket = join(lab.dir, 'bird.ctl');
    const session = (name: string, local: string, neighbor: string, channel: string) => `
protocol bgp ${name} {
  local ${local} as ${ROUTER_ASN};
  neighbor ${neighbor} as ${SPEAKER_ASN};
  hold time 9;
  ${o.gracefulRestart ? 'graceful restart on;' : 'graceful restart off;'}
  ${o.password ? `password "${o.password}";` : ''}
  ${channel} { import all; export none; add paths rx; };
}`;
    const b = o.bfdNodes;
    // A node's sessions: BFD on, no graceful restart (its paths leave with it).
    const nodeSession = (name: string, local: string, neighbor: string, channel: string) => `
protocol bgp ${name} {
  local ${local} as ${ROUTER_ASN};
  neighbor ${neighbor} as ${SPEAKER_ASN};
  hold time 9;
  graceful restart off;
  bfd on;
  # A node back after a failure is taken again within seconds, not after the default 60 s; a
  # failure more than 5 s after the last starts from 1 s again (the bench takes links down in a row).
  error wait time 1, 30;
  error forget time 5;
  ${o.password ? `password "${o.password}";` : ''}
  ${channel} { import all; export none; add paths rx; };
}`;
    const nodes = b?.dynamic
      ? `${nodeSession('nodes4', ROUTER4, `range ${b.dynamic.v4}`, 'ipv4')}\n${nodeSession('nodes6', ROUTER6, `range ${b.dynamic.v6}`, 'ipv6')}`
      : (b?.nodes ?? []).map((n) => [nodeSession(birdProtocol(o, n.v4), ROUTER4, n.v4, 'ipv4'), ...(b?.ipv4Only ? [] : [nodeSession(birdProtocol(o, n.v6), ROUTER6, n.v6, 'ipv6')])].join('\n')).join('\n');
    const bfd = b ? `protocol bfd { interface "*" { interval ${b.intervalMs} ms; multiplier ${b.multiplier}; }; }\n${nodes}` : '';
    writeFileSync(
      conf,
      `# edge-ccm BGP test router
log stderr all;
router id ${ROUTER4};
protocol device { scan time 10; }
protocol kernel kernel4 { ipv4 { export all; }; merge paths on; }
protocol kernel kernel6 { ipv6 { export all; }; merge paths on; }
${speakersOf(o).map((sp) => `${session(birdProtocol(o, sp.v4), ROUTER4, sp.v4, 'ipv4')}\n${session(birdProtocol(o, sp.v6), ROUTER6, sp.v6, 'ipv6')}`).join('\n')}
${bfd}
`,
    );
    const proc = lab.spawnLogged('rtr', 'bird', ['/usr/sbin/bird', '-f', '-c', conf, '-s', socket, '-P', join(lab.dir, 'bird.pidfile')]);
    const bird = new Bird(lab, proc, socket, o);
    await eventually(`BIRD up (log: ${proc.logPath})`, async () => {
      if (!proc.running) throw new Error(`bird exited: ${proc.logTail()}`);
      return (await bird.birdc('show status')).code === 0;
    });
    return bird;
  }

  birdc(command: string) {
    return this.lab.exec('rtr', ['/usr/sbin/birdc', '-s', this.socket, ...command.split(' ')]);
  }

  /**
   * `show route table masterN` as prefix -> next hops. BIRD prints a prefix once, then each
   * of its routes as a "unicast [...]" line followed by "via ADDR on IF".
   */
  async paths(family: 4 | 6): Promise<PathTable> {
    const r = await this.birdc(`show route table master${family}`);
    if (r.code !== 0) throw new Error(`birdc: ${r.stderr || r.stdout}`);
    const table: PathTable = new Map();
    let prefix: string | undefined;
    for (const line of r.stdout.split('\n')) {
      const head = /^(\S+\/\d+)\s+unicast/.exec(line);
      if (head) prefix = head[1];
      const via = /^\s+via (\S+) on /.exec(line);
      if (via && prefix) table.set(prefix, [...(table.get(prefix) ?? []), via[1]!]);
    }
    return sortTable(table);
  }

  async sessionUp(address: string): Promise<boolean> {
    if (this.options.bfdNodes?.dynamic && this.options.bfdNodes.nodes.some((n) => n.v4 === address || n.v6 === address)) {
      // Sessions spawned from a range have made-up names: find the one with this neighbor.
      const r = await this.birdc('show protocols all');
      return r.code === 0 && r.stdout.split(/\n(?=\S)/).some((block) => new RegExp(`Neighbor address:\\s+${address.replace(/\./g, '\\.')}\\b`).test(block) && /BGP state:\s+Established/.test(block));
    }
    const r = await this.birdc(`show protocols ${birdProtocol(this.options, address)}`);
    return r.code === 0 && /\bEstablished\b/.test(r.stdout);
  }

  async bfdUp(address: string): Promise<boolean> {
    const r = await this.birdc('show bfd sessions');
    return r.code === 0 && r.stdout.split('\n').some((l) => l.trim().split(/\s+/)[0] === address && /\bUp\b/.test(l));
  }

  async stop(): Promise<void> {
    await this.proc.kill();
  }
}

// ---- FRR 8.4 (zebra + bgpd started by hand) ----

class Frr implements BgpRouter {
  readonly kind = 'frr';
  private constructor(
    private readonly lab: NetnsLab,
    private readonly procs: LoggedProcess[],
    private readonly dir: string,
  ) {}

  static async start(lab: NetnsLab, o: RouterOptions): Promise<Frr> {
    const { dir, uid, gid } = await frrDirectory(lab);
    const speakers = speakersOf(o);
    const each = (f: (sp: SpeakerAddresses) => string[]) => speakers.flatMap(f);
    const pw = o.password ? each((sp) => [` neighbor ${sp.v4} password ${o.password}`, ` neighbor ${sp.v6} password ${o.password}`]) : [];
    const bfdNodes = o.bfdNodes?.nodes ?? [];
    // A node's sessions: tied to BFD (profile "nodes" of bfdd).
    const dynamic = o.bfdNodes?.dynamic;
    // Listed: one neighbor per node address. Dynamic: peer groups NODES and NODES6 taking their ranges.
    const nodeTargets = dynamic ? ['NODES', 'NODES6'] : bfdNodes.flatMap((n) => [n.v4, n.v6]);
    // A listen range takes a peer group that has its remote-as already (bgpd refuses the line before it).
    const nodeNeighbors = [
      ...(dynamic ? [' neighbor NODES peer-group', ' neighbor NODES6 peer-group'] : []),
      ...nodeTargets.flatMap((a) => [` neighbor ${a} remote-as ${SPEAKER_ASN}`, ` neighbor ${a} timers 3 9`, ` neighbor ${a} bfd profile nodes`, ...(o.password ? [` neighbor ${a} password ${o.password}`] : [])]),
      ...(dynamic ? [` bgp listen range ${dynamic.v4} peer-group NODES`, ` bgp listen range ${dynamic.v6} peer-group NODES6`] : []),
    ];
    const [nodes4, nodes6] = dynamic ? [['NODES'], ['NODES6']] : [bfdNodes.map((n) => n.v4), bfdNodes.map((n) => n.v6)];
    const conf = join(dir, 'bgpd.conf');
    writeFileSync(
      conf,
      [
        'frr defaults traditional',
        'hostname rtr',
        'log stdout debugging',
        `router bgp ${ROUTER_ASN}`,
        ` bgp router-id ${ROUTER4}`,
        ' no bgp ebgp-requires-policy',
        ' no bgp network import-check',
        o.gracefulRestart ? ' bgp graceful-restart' : ' bgp graceful-restart-disable',
        ...each((sp) => [` neighbor ${sp.v4} remote-as ${SPEAKER_ASN}`, ` neighbor ${sp.v4} timers 3 9`, ` neighbor ${sp.v6} remote-as ${SPEAKER_ASN}`, ` neighbor ${sp.v6} timers 3 9`]),
        ...pw,
        ...nodeNeighbors,
        ' address-family ipv4 unicast',
        '  maximum-paths 8',
        ...each((sp) => [`  neighbor ${sp.v4} activate`, `  neighbor ${sp.v4} addpath-rx-paths-limit 8`, `  no neighbor ${sp.v6} activate`]),
        ...nodes4.map((a) => `  neighbor ${a} activate`),
        ...nodes6.map((a) => `  no neighbor ${a} activate`),
        ' exit-address-family',
        ' address-family ipv6 unicast',
        '  maximum-paths 8',
        ...each((sp) => [`  neighbor ${sp.v6} activate`, `  neighbor ${sp.v6} addpath-rx-paths-limit 8`]),
        ...nodes6.map((a) => `  neighbor ${a} activate`),
        ' exit-address-family',
        '',
      ].join('\n'),
    );
    writeFileSync(join(dir, 'zebra.conf'), 'hostname rtr\nlog stdout debugging\n');
    chownSync(conf, uid, gid);
    chownSync(join(dir, 'zebra.conf'), uid, gid);
    const common = ['-z', join(dir, 'zserv.api'), '--vty_socket', dir];
    const zebra = lab.spawnLogged('rtr', 'zebra', ['/usr/lib/frr/zebra', ...common, '-i', join(dir, 'zebra.pid'), '-f', join(dir, 'zebra.conf')]);
    const procs = [zebra];
    const frr = new Frr(lab, procs, dir);
    await eventually(`zebra up (log: ${zebra.logPath})`, async () => {
      if (!zebra.running) throw new Error(`zebra exited: ${zebra.logTail()}`);
      return (await frr.vtysh('show version')).code === 0;
    });
    if (o.bfdNodes) {
      const b = o.bfdNodes;
      const bfdConf = join(dir, 'bfdd.conf');
      writeFileSync(bfdConf, ['hostname rtr', 'log stdout debugging', 'bfd', ' profile nodes', `  detect-multiplier ${b.multiplier}`, `  receive-interval ${b.intervalMs}`, `  transmit-interval ${b.intervalMs}`, ' exit', 'exit', ''].join('\n'));
      chownSync(bfdConf, uid, gid);
      const bfdd = lab.spawnLogged('rtr', 'bfdd', ['/usr/lib/frr/bfdd', ...common, '-i', join(dir, 'bfdd.pid'), '-f', bfdConf]);
      procs.push(bfdd);
      await eventually(`bfdd up (log: ${bfdd.logPath})`, async () => {
        if (!bfdd.running) throw new Error(`bfdd exited: ${bfdd.logTail()}`);
        return (await frr.vtysh('show bfd peers json')).code === 0;
      });
    }
    const bgpd = lab.spawnLogged('rtr', 'bgpd', ['/usr/lib/frr/bgpd', ...common, '-i', join(dir, 'bgpd.pid'), '-f', conf]);
    procs.push(bgpd);
    await eventually(`bgpd up (log: ${bgpd.logPath})`, async () => {
      if (!bgpd.running) throw new Error(`bgpd exited: ${bgpd.logTail()}`);
      return (await frr.vtysh('show bgp summary json')).code === 0;
    });
    return frr;
  }

  vtysh(command: string) {
    return this.lab.exec('rtr', ['/usr/bin/vtysh', '--vty_socket', this.dir, '-c', command]);
  }

  async paths(family: 4 | 6): Promise<PathTable> {
    const r = await this.vtysh(`show bgp ipv${family} unicast json`);
    if (r.code !== 0) throw new Error(`vtysh: ${r.stderr || r.stdout}`);
    const routes = (JSON.parse(r.stdout).routes ?? {}) as Record<string, { nexthops: { ip: string; scope?: string }[] }[]>;
    const table: PathTable = new Map();
    for (const [prefix, paths] of Object.entries(routes)) {
      table.set(prefix, paths.map((p) => p.nexthops.find((h) => h.scope !== 'link-local')?.ip ?? p.nexthops[0]!.ip));
    }
    return sortTable(table);
  }

  async sessionUp(address: string): Promise<boolean> {
    const r = await this.vtysh(`show bgp neighbors ${address} json`);
    if (r.code !== 0) return false;
    return JSON.parse(r.stdout)[address]?.bgpState === 'Established';
  }

  async bfdUp(address: string): Promise<boolean> {
    const r = await this.vtysh('show bfd peers json');
    if (r.code !== 0) return false;
    return (JSON.parse(r.stdout) as { peer: string; status: string }[]).some((p) => p.peer === address && p.status === 'up');
  }

  async stop(): Promise<void> {
    for (const p of this.procs.reverse()) await p.kill();
  }
}

// ---- GoBGP ----

/** One path in GoBGP's RIB: which neighbour sent it, and whether graceful restart keeps it as stale. */
export interface RibPath {
  prefix: string;
  nextHop: string;
  neighbor: string;
  stale: boolean;
}

export class GoBgp implements BgpRouter {
  readonly kind = 'gobgp';
  private constructor(
    private readonly lab: NetnsLab,
    private readonly proc: LoggedProcess,
  ) {}

  static async start(lab: NetnsLab, o: RouterOptions): Promise<GoBgp> {
    const conf = join(lab.dir, 'gobgpd.toml');
    const neighbor = (address: string, family: string) => `
[[neighbors]]
  [neighbors.config]
    neighbor-address = "${address}"
    peer-as = ${SPEAKER_ASN}
    ${o.password ? `auth-password = "${o.password}"` : ''}
  [neighbors.timers.config]
    hold-time = 9
    keepalive-interval = 3
  [neighbors.graceful-restart.config]
    enabled = ${o.gracefulRestart ? 'true' : 'false'}
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "${family}"
    [neighbors.afi-safis.add-paths.config]
      receive = true
    [neighbors.afi-safis.mp-graceful-restart.config]
      enabled = ${o.gracefulRestart ? 'true' : 'false'}
`;
    const neighbors = speakersOf(o).map((sp) => `${neighbor(sp.v4, 'ipv4-unicast')}${neighbor(sp.v6, 'ipv6-unicast')}`).join('');
    writeFileSync(conf, `[global.config]\n  as = ${ROUTER_ASN}\n  router-id = "${ROUTER4}"\n${neighbors}`);
    const proc = lab.spawnLogged('rtr', 'gobgpd', ['/usr/bin/gobgpd', '-f', conf, '-p', '--api-hosts', '127.0.0.1:50051', '--pprof-disable']);
    const g = new GoBgp(lab, proc);
    await eventually(`gobgpd up (log: ${proc.logPath})`, async () => {
      if (!proc.running) throw new Error(`gobgpd exited: ${proc.logTail()}`);
      return (await g.gobgp(['neighbor', '-j'])).code === 0;
    });
    return g;
  }

  gobgp(args: string[]) {
    return this.lab.exec('rtr', ['/usr/bin/gobgp', '-u', '127.0.0.1', '-p', '50051', ...args]);
  }

  async paths(family: 4 | 6): Promise<PathTable> {
    const r = await this.gobgp(['global', 'rib', '-a', `ipv${family}`, '-j']);
    if (r.code !== 0) throw new Error(`gobgp: ${r.stderr || r.stdout}`);
    const table: PathTable = new Map();
    const rib = JSON.parse(r.stdout || '{}') as Record<string, { attrs: { type: number; nexthop?: string }[] }[]>;
    for (const [prefix, paths] of Object.entries(rib)) {
      table.set(prefix, paths.map((p) => p.attrs.find((a) => a.type === 3 || a.type === 14)?.nexthop ?? '?'));
    }
    return sortTable(table);
  }

  /** Every path of the family's RIB with its source; throws when gobgpd does not answer (down). */
  async ribPaths(family: 4 | 6): Promise<RibPath[]> {
    const r = await this.gobgp(['global', 'rib', '-a', `ipv${family}`, '-j']);
    if (r.code !== 0) throw new Error(`gobgp: ${r.stderr || r.stdout}`);
    const rib = JSON.parse(r.stdout || '{}') as Record<string, { attrs: { type: number; nexthop?: string }[]; 'neighbor-ip'?: string; stale?: boolean }[]>;
    return Object.entries(rib).flatMap(([prefix, paths]) => paths.map((p) => ({
      prefix,
      nextHop: p.attrs.find((a) => a.type === 3 || a.type === 14)?.nexthop ?? '?',
      neighbor: p['neighbor-ip'] ?? '?',
      stale: p.stale === true,
    })));
  }

  /** `gobgp neighbor ADDRESS reset|disable|enable`: a session reset (NOTIFICATION Cease), or the neighbour shut down and back. */
  async neighbor(address: string, action: 'reset' | 'disable' | 'enable'): Promise<void> {
    const r = await this.gobgp(['neighbor', address, action]);
    if (r.code !== 0) throw new Error(`gobgp neighbor ${address} ${action}: ${r.stderr || r.stdout}`);
  }

  /** The neighbour's FSM state as GoBGP numbers it (1 idle ... 6 established); undefined when gobgpd does not answer. */
  async sessionState(address: string): Promise<number | undefined> {
    const r = await this.gobgp(['neighbor', address, '-j']);
    if (r.code !== 0) return undefined;
    return JSON.parse(r.stdout)?.state?.session_state;
  }

  /** The daemon's pid (for a SIGKILL that is a crash). */
  get pid(): number {
    return this.proc.pid;
  }

  get running(): boolean {
    return this.proc.running;
  }

  async sessionUp(address: string): Promise<boolean> {
    const r = await this.gobgp(['neighbor', address, '-j']);
    if (r.code !== 0) return false;
    return JSON.parse(r.stdout)?.state?.session_state === 6; // ESTABLISHED
  }

  async stop(): Promise<void> {
    await this.proc.kill();
  }
}

export { runCommand };

/**
 * The folder FRR's daemons run from, owned by user frr: they drop to it, so the folder and every
 * parent must be traversable by it. Files written into it must be chowned to uid:gid too.
 */
export async function frrDirectory(lab: NetnsLab): Promise<{ dir: string; uid: number; gid: number }> {
  chmodSync(lab.dir, 0o711);
  const dir = join(lab.dir, 'frr');
  mkdirSync(dir);
  const uid = Number((await mustRun(['id', '-u', 'frr'])).trim());
  const gid = Number((await mustRun(['id', '-g', 'frr'])).trim());
  chownSync(dir, uid, gid);
  return { dir, uid, gid };
}
