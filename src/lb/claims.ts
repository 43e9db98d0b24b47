import { formatIP, type IP } from '../net/ip.ts';

/**
 * Addresses kept for one service although it does not hold them now, so the allocator hands
 * them to nobody else automatically:
 *
 * - reservations (`loadBalancer.reservations`: a service key -> its addresses): the address is
 *   that service's whenever it asks, before and after it exists; nobody else is given it.
 * - a release hold (`loadBalancer.releaseHoldSeconds`): an address a service gave up stays with
 *   that service's key that long, so a service deleted and re-created (a Helm reinstall, an
 *   Argo CD sync) gets its address back, and another service does not get it meanwhile.
 *
 * Holds live in this process's memory: a restart or a change of leader forgets them (the
 * addresses in use are rebuilt from the services' status, which released ones are not in).
 */

export interface Reservation {
  /** namespace/name */
  service: string;
  /** At most one per IP family. */
  addresses: IP[];
}

export interface AllocationPolicy {
  reservations?: readonly Reservation[];
  /** 0: a released address is free at once. */
  releaseHoldMs?: number;
}

export const ipKey = (ip: IP): string => `${ip.family}/${ip.value}`;

export interface KeptFor {
  service: string;
  /** reserved: in the config, binding even for a request; held: after a release, for automatic picks only. */
  kind: 'reserved' | 'held';
  why: string;
}

export class AddressClaims {
  private reserved = new Map<string, string>();
  private byService = new Map<string, IP[]>();
  private holdMs = 0;
  private readonly released = new Map<string, { service: string; ip: IP; until: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  configure(policy: AllocationPolicy): void {
    this.reserved = new Map();
    this.byService = new Map();
    for (const r of policy.reservations ?? []) {
      this.byService.set(r.service, [...r.addresses]);
      for (const ip of r.addresses) this.reserved.set(ipKey(ip), r.service);
    }
    this.holdMs = policy.releaseHoldMs ?? 0;
  }

  /** Who else this address is kept for, and why; undefined when `service` may have it. */
  keptFor(ip: IP, service: string): KeptFor | undefined {
    const owner = this.reserved.get(ipKey(ip));
    if (owner !== undefined && owner !== service) return { service: owner, kind: 'reserved', why: `reserved for service ${owner} in loadBalancer.reservations` };
    const hold = this.activeHold(ip);
    if (hold && hold.service !== service) {
      return { service: hold.service, kind: 'held', why: `released by service ${hold.service} and held for it until ${new Date(hold.until).toISOString()} (loadBalancer.releaseHoldSeconds)` };
    }
    return undefined;
  }

  /** The addresses reserved for the service. */
  reservationOf(service: string): readonly IP[] {
    return this.byService.get(service) ?? [];
  }

  /** Addresses the service released that are still held for it. */
  heldFor(service: string): IP[] {
    return [...this.released.values()].filter((h) => h.service === service && h.until > this.now()).map((h) => h.ip);
  }

  /** A service gave these addresses up (nobody else holds them): hold them for it, if holds are on. */
  noteReleased(service: string, ips: readonly IP[]): void {
    if (this.holdMs <= 0) return;
    const until = this.now() + this.holdMs;
    for (const ip of ips) this.released.set(ipKey(ip), { service, ip, until });
  }

  /** The address is held by a service again: no hold applies any more. */
  noteTaken(ip: IP): void {
    this.released.delete(ipKey(ip));
  }

  /** Addresses kept for someone now (reserved or held), except those `skip` leaves out (in use, other pools): for pool status. */
  keptCount(skip: (ip: IP) => boolean): number {
    const keys = new Set<string>();
    for (const [k, service] of this.reserved) {
      const ip = this.byService.get(service)!.find((x) => ipKey(x) === k)!;
      if (!skip(ip)) keys.add(k);
    }
    for (const [k, h] of this.released) if (h.until > this.now() && !skip(h.ip)) keys.add(k);
    return keys.size;
  }

  private activeHold(ip: IP): { service: string; until: number } | undefined {
    const hold = this.released.get(ipKey(ip));
    if (!hold) return undefined;
    if (hold.until > this.now()) return hold;
    this.released.delete(ipKey(ip));
    return undefined;
  }
}
