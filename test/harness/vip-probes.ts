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
