import { readFileSync } from 'node:fs';
import { NODES, type NodeName } from './l2-lab.ts';
import { VIP_BGP, type VipLab } from './vip-lab.ts';

/** One request through a VIP: when it started, and whether it got a 200. */
export interface VipRequest {
  t: number;
  ok: boolean;
}

/** https://ADDRESS:6443/readyz from the lab's client every 100 ms (0.3 s timeout), each outcome kept. */
export class VipRequests {
  readonly list: VipRequest[] = [];
  private on = true;
  private readonly loop: Promise<void>;

  constructor(vip: VipLab, address: string) {
    this.loop = (async () => {
      while (this.on) {
        const t = Date.now();
        const ok = await vip.readyz('client', address, 0.3);
        this.list.push({ t, ok });
        await Bun.sleep(Math.max(0, 100 - (Date.now() - t)));
      }
    })();
  }

  /** From `faultAt`: the first request after `after` that succeeded, and how many failed before it. */
  firstGood(faultAt: number, after: number): { ms: number; failed: number } {
    const firstOk = this.list.find((r) => r.t >= faultAt && r.ok && r.t > after)!;
    return { ms: firstOk.t - faultAt, failed: this.list.filter((r) => r.t >= faultAt && r.t < firstOk.t && !r.ok).length };
  }

  async stop(): Promise<void> {
    this.on = false;
    await this.loop;
  }
}

/** The lab router's (BIRD's) paths for VIP_BGP every 100 ms: when, and the next hops; more than one is two holders. */
export class VipPathSampler {
  readonly samples: { t: number; hops: string[] }[] = [];
  private on = true;
  private readonly loop: Promise<void>;

  constructor(vip: VipLab) {
    this.loop = (async () => {
      while (this.on) {
        const t = Date.now();
        const hops = (await vip.router!.paths(4)).get(`${VIP_BGP}/32`) ?? [];
        this.samples.push({ t, hops });
        await Bun.sleep(Math.max(0, 100 - (Date.now() - t)));
      }
    })();
  }

  doubles(): { t: number; hops: string[] }[] {
    return this.samples.filter((s) => s.hops.length > 1);
  }

  /** From `faultAt`: the first sample whose only path is not through `oldHop`, and the first without it. */
  movedFrom(oldHop: string, faultAt: number): { moved?: { t: number; hops: string[] }; gone?: { t: number } } {
    return {
      moved: this.samples.find((s) => s.t >= faultAt && s.hops.length === 1 && s.hops[0] !== oldHop),
      gone: this.samples.find((s) => s.t >= faultAt && !s.hops.includes(oldHop)),
    };
  }

  async stop(): Promise<void> {
    this.on = false;
    await this.loop;
  }
}

/**
 * Takes while another host still held the VIP, from the vip processes' own logs (every take and
 * release is logged, to the ms, on one clock): a take by one host between another's take and
 * its next release. A release for a pause does not count (the paused process answered nothing),
 * nor a holder whose process was killed (it logs no release). Catches overlaps shorter than the
 * prober's 100 ms.
 */
export function holderOverlaps(vip: VipLab, from: number, to: number): { count: number; maxMs: number; list: string[] } {
  type Event = { t: number; node: NodeName; taken: boolean; reason: string };
  const events: Event[] = NODES.flatMap((node) => readFileSync(vip.vips.get(node)!.logPath, 'utf8').split('\n').flatMap((line) => {
    const m = /^(\S+Z) INFO "vip (taken|released)".*reason=(\S+)/.exec(line);
    return m ? [{ t: Date.parse(m[1]!), node, taken: m[2] === 'taken', reason: m[3]! }] : [];
  })).sort((a, b) => a.t - b.t);
  const list: string[] = [];
  let maxMs = 0;
  for (const take of events.filter((e) => e.taken && e.t >= from && e.t <= to)) {
    for (const other of NODES.filter((n) => n !== take.node)) {
      const before = events.filter((e) => e.node === other && e.t <= take.t).at(-1);
      const after = events.find((e) => e.node === other && e.t > take.t);
      if (!before?.taken || !after || after.taken || after.reason === 'paused') continue;
      const ms = after.t - take.t;
      maxMs = Math.max(maxMs, ms);
      list.push(`${new Date(take.t).toISOString()} ${take.node} took (${take.reason}), ${other} released ${ms} ms later (${after.reason})`);
    }
  }
  return { count: list.length, maxMs, list };
}

/** One line for a bench report. */
export function describeOverlaps(o: { count: number; maxMs: number; list: string[] }): string {
  return `takes while another host still held it (vip logs) ${o.count}${o.count ? `, longest ${o.maxMs} ms: ${o.list.join('; ')}` : ''}`;
}
