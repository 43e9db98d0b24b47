import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { L2Lab } from './l2-lab.ts';
import type { LoggedProcess } from './processes.ts';

/**
 * A client on the switch asking for one address every 100 ms with a raw ARP request, or a
 * Neighbor Solicitation for an IPv6 address (test/fakes/arp-prober-main.ts), recording which
 * MACs answered each probe: the ground truth of an L2 failover (two MACs on one probe: two
 * holders; none: unanswered).
 */
export const PROBE_INTERVAL_MS = 100;
const PROBER = join(import.meta.dir, '..', 'fakes', 'arp-prober-main.ts');

export interface Probe {
  i: number;
  /** Date.now() when the request left. */
  t: number;
  macs: string[];
}

export class ArpProber {
  private constructor(private readonly proc: LoggedProcess) {}

  static start(site: L2Lab, address: string, name: string): ArpProber {
    const ours = address.includes(':') ? site.client.lanIPv6 : site.client.lanIPv4;
    return new ArpProber(site.lab.spawnLogged('client', name, [process.execPath, PROBER, 'eth0', ours, address, String(PROBE_INTERVAL_MS)]));
  }

  probes(): Probe[] {
    let text = '';
    try {
      text = readFileSync(this.proc.logPath, 'utf8');
    } catch {
      return [];
    }
    return text.split('\n').filter((l) => l.startsWith('{') && l.endsWith('}')).map((l) => JSON.parse(l) as Probe);
  }

  get log(): string {
    return this.proc.logTail(20);
  }

  async stop(): Promise<Probe[]> {
    await this.proc.terminate(2000);
    return this.probes();
  }
}

export interface FailoverFigures {
  /** From the fault to the first probe the new holder answered (the probe's send time; resolution 100 ms). */
  gapMs: number | undefined;
  /** Probes sent after the fault that nobody answered. */
  unanswered: number;
  /** Probes answered by two MACs or more, over the whole recording. */
  doubles: Probe[];
  /** Probes answered by a MAC that is neither the old nor the new holder. */
  strangers: Probe[];
}

export function failoverFigures(probes: readonly Probe[], faultAt: number, oldMac: string, newMac: string): FailoverFigures {
  const after = probes.filter((p) => p.t >= faultAt);
  const first = after.find((p) => p.macs.includes(newMac));
  return {
    gapMs: first ? first.t - faultAt : undefined,
    unanswered: after.filter((p) => p.macs.length === 0).length,
    doubles: probes.filter((p) => p.macs.length > 1),
    strangers: probes.filter((p) => p.macs.some((m) => m !== oldMac && m !== newMac)),
  };
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
