import { LogLimiter } from '../../util/log-limiter.ts';

/**
 * Why the L2 responder refuses a frame: two fixed sets of reasons, so a counter per reason has
 * the same size whatever a host on the LAN sends (issue 34: a reason text carrying the sender's
 * numbers made a map key per frame). What varies from frame to frame (a length, a field's value)
 * is the `detail`, which only a rate-limited log line carries: never a key, never a metric label.
 */

/** The frame breaks its protocol's format or a validity check a receiver must apply. */
export const MALFORMED_REASONS = [
  'ethernet-short',
  'arp-short',
  'arp-not-ethernet-ipv4',
  'arp-operation',
  'ipv6-short',
  'ipv6-version',
  'ipv6-payload-length',
  'icmpv6-short',
  'ndp-hop-limit',
  'ndp-code',
  'ndp-short',
  'ndp-checksum',
  'ndp-multicast-target',
  'ndp-option',
  'ndp-dad-destination',
  'ndp-dad-option',
  'ndp-solicited-to-multicast',
] as const;
export type MalformedReason = (typeof MALFORMED_REASONS)[number];

/**
 * Well formed, but from a sender no station can be (Linux drops these "martians" too): nothing is
 * answered to them, and no claim is believed from them.
 */
export const MARTIAN_REASONS = [
  /** ARP sender hardware address (or the frame's source) broadcast, multicast or all zeros. */
  'arp-sender-mac',
  /** ARP sender address multicast, 255.255.255.255, loopback (127/8) or 0/8 other than an ARP probe's 0.0.0.0. */
  'arp-sender-ip',
  /** IPv6 source multicast (RFC 4291 2.7), loopback or IPv4-mapped (Linux's ip6_rcv drops all three). */
  'ipv6-source',
  /** A Neighbor Solicitation whose link-layer address to answer (option or frame source) is multicast or zero. */
  'ndp-sender-mac',
] as const;
export type MartianReason = (typeof MARTIAN_REASONS)[number];

export type Refusal = { kind: 'malformed'; reason: MalformedReason; detail: string } | { kind: 'martian'; reason: MartianReason; detail: string };

/** A counter per reason, every one present from the start: the record's shape never changes. */
export function countsByReason<R extends string>(reasons: readonly R[]): Record<R, number> {
  return Object.fromEntries(reasons.map((r) => [r, 0])) as Record<R, number>;
}

/**
 * Refused frames counted by reason, and whether this one's detail is to be reported: at most once
 * per reason per window. Its size is fixed by the reasons, whatever arrives.
 */
export class RefusalTally {
  malformedFrames = 0;
  martianFrames = 0;
  readonly malformedReasons = countsByReason(MALFORMED_REASONS);
  readonly martianReasons = countsByReason(MARTIAN_REASONS);
  /** Keyed by reason: as bounded as the reasons. */
  private readonly reports: LogLimiter;

  constructor(reportWindowMs: number, now?: () => number) {
    this.reports = new LogLimiter(reportWindowMs, now);
  }

  /** Counts `refusal`; when its detail is to be reported now, how many of its reason were not reported since the last time. */
  count(refusal: Refusal): { notReportedSince: number } | undefined {
    if (refusal.kind === 'malformed') {
      this.malformedFrames += 1;
      this.malformedReasons[refusal.reason] += 1;
    } else {
      this.martianFrames += 1;
      this.martianReasons[refusal.reason] += 1;
    }
    const report = this.reports.allow(refusal.reason);
    return report && { notReportedSince: report.suppressed };
  }
}
