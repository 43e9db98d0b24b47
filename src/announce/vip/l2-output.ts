import type { Logger } from '../../log.ts';
import type { IP } from '../../net/ip.ts';
import { probeAddress } from '../../net/l2/probe.ts';
import { L2Responder, type ResponderEvent } from '../../net/l2/responder.ts';
import type { LogLimiter } from '../../util/log-limiter.ts';
import { subnetInterface as hostSubnetInterface } from '../l2/interfaces.ts';
import type { ControlPlaneEndpointConfig } from './config-model.ts';
import type { VipOutput } from './output.ts';

/** Bootstrap probe of the VIP: two ARP probes / DAD solicitations 250 ms apart (a holder answers both). */
const BOOTSTRAP_PROBE = { count: 2, intervalMs: 250 };

export interface VipL2OutputOptions {
  config: ControlPlaneEndpointConfig;
  log: Logger;
  logLimit: LogLimiter;
  /** False just after a pause, before the liveness check has judged it: answer nothing. */
  mayAnswer: () => boolean;
  /** Whether this host holds the VIP now (a claim by another station is logged only then). */
  holding: () => boolean;
  /** The interface holding an address's subnet (default: this host's interfaces). */
  subnetInterface?: (ip: IP) => string | undefined;
  floodPauseMs?: number;
}

/** announce: l2: ARP replies / Neighbor Advertisements from the holder (the L2 speaker's responder), gratuitous ARP / unsolicited NA at each take. */
export class VipL2Output implements VipOutput {
  private readonly responder: L2Responder;

  constructor(private readonly o: VipL2OutputOptions) {
    this.responder = new L2Responder({
      floodPauseMs: o.floodPauseMs,
      onEvent: (e) => this.onResponderEvent(e),
      mayAnswer: o.mayAnswer,
    });
  }

  async start(): Promise<void> {}

  hold(on: boolean): void {
    const problems = this.responder.setAnnouncements(this.table(on));
    for (const p of problems) {
      const logged = this.o.logLimit.allow(`problem ${p.interface} ${p.address ?? ''}`);
      if (logged) this.o.log.warn('cannot announce the VIP', { interface: p.interface, address: p.address, problem: p.message });
    }
  }

  /** An ARP probe / DAD solicitation of each address on each of its interfaces: free when nobody answers any. */
  async bootstrapCheck(signal: AbortSignal): Promise<boolean> {
    const targets = [...this.table(true)].flatMap(([iface, addresses]) => addresses.map((address) => ({ iface, address })));
    const results = await Promise.all(targets.map(async (t) => ({ ...t, ...(await probeAddress(t.iface, t.address, { ...BOOTSTRAP_PROBE, signal })) })));
    const held = results.find((r) => r.holder);
    if (held && !signal.aborted) this.o.log.warn('bootstrap probe: another station answers for the VIP; not taking it', { address: held.address, interface: held.iface, mac: held.holder });
    return !held && results.length > 0;
  }

  async close(): Promise<void> {
    this.hold(false);
    this.responder.close();
  }

  /** Interface -> the VIP's addresses there (empty lists: kept on standby, for a fast first answer). */
  private table(withAddresses: boolean): Map<string, string[]> {
    const table = new Map<string, string[]>();
    for (const { address, ip } of this.o.config.addresses) {
      const interfaces = this.o.config.interfaces ?? [(this.o.subnetInterface ?? hostSubnetInterface)(ip)].filter((i): i is string => !!i);
      if (interfaces.length === 0) {
        const logged = this.o.logLimit.allow(`unplaced ${address}`);
        if (logged) this.o.log.warn('no interface of this host is on the VIP\'s subnet and controlPlaneEndpoint lists no interfaces', { address });
      }
      for (const iface of interfaces) table.set(iface, [...(table.get(iface) ?? []), ...(withAddresses ? [address] : [])]);
    }
    return table;
  }

  private onResponderEvent(event: ResponderEvent): void {
    if (event.type === 'error') this.o.log.warn('responder error', { interface: event.interface, error: event.message });
    else if (event.type === 'claim' && this.o.holding()) {
      const logged = this.o.logLimit.allow(`claim ${event.address}`);
      if (logged) this.o.log.warn('another station claims the VIP', { address: event.address, interface: event.interface, mac: event.mac });
    }
  }
}
