import { randomSeed } from './random.ts';

/**
 * The soak's command line and its two profiles. Timings are shortened from the defaults
 * (lease 15 s, grace period 5 min) so that faults, deletions and recoveries happen many times a
 * run; the rules they exercise are the same.
 */

export interface Profile {
  name: 'ci' | 'full';
  staticReplicas: number;
  proxmoxReplicas: number;
  staticMachines: number;
  proxmoxVms: number;
  maxServices: number;
  /** Mean time between two workload operations. */
  workloadMeanMs: number;
  /** Mean time between two faults, and how many may be active at once. */
  faultMeanMs: number;
  maxConcurrentFaults: number;
  /** Time with no faults and no workload at the end, after which every invariant must hold outright. */
  quietMs: number;
  /** The first deck deals the network faults first, so a short run has each of them. */
  networkFaultsFirst: boolean;
}

export const PROFILES: Record<Profile['name'], Profile> = {
  ci: {
    name: 'ci', staticReplicas: 2, proxmoxReplicas: 2, staticMachines: 8, proxmoxVms: 6, maxServices: 16,
    workloadMeanMs: 1500, faultMeanMs: 14_000, maxConcurrentFaults: 2, quietMs: 40_000, networkFaultsFirst: true,
  },
  full: {
    name: 'full', staticReplicas: 3, proxmoxReplicas: 2, staticMachines: 12, proxmoxVms: 10, maxServices: 28,
    workloadMeanMs: 1200, faultMeanMs: 20_000, maxConcurrentFaults: 2, quietMs: 60_000, networkFaultsFirst: false,
  },
};

/** Flags every replica gets (besides provider, config, kubeconfig and lease name). */
export const TIMING = {
  leaseDurationMs: 6_000,
  renewDeadlineMs: 4_000,
  retryPeriodMs: 1_000,
  nodeMonitorPeriodMs: 2_000,
  graceMs: 20_000,
  notFoundThreshold: 3,
  breakerWindowMs: 60_000,
  routeReconciliationMs: 3_000,
  /** The static group's bgp section: the router's hold time, and the graceful restart time it is told. */
  bgpHoldTimeSeconds: 9,
  bgpRestartTimeSeconds: 10,
  /** The L2 prober's period: one ARP request or Neighbor Solicitation per L2 address this often. */
  l2ProbePeriodMs: 100,
};

/**
 * Tolerances of the checkers, each for a stated reason (docs/reliability.md repeats them):
 * - termToleranceMs: a write is out of its replica's term only if received by the API server
 *   more than this after the term ended (lease taken over, released or expired). Covers a
 *   request the replica sent inside its term that the API server, on 2 shared cores, read later.
 * - presenceToleranceMs: a Node deleted at t is wrong if its machine was in the inventory at
 *   t - this: the provider's answer is at most one monitor period (2 s) plus the provider's cache
 *   (Proxmox cacheSeconds 1) plus the config watcher's debounce old when the controller judges.
 * - settleMs: an address conflict, a service without address and Warning, or a finalizer on a
 *   deleted service is a violation when it lasts this long (controllers need a sync, and after
 *   an outage a leader change and the service controller's retry backoff, 5 s doubling).
 * - recoveryLimitMs: a canary not served this long after a fault ended is a violation.
 * - bgpSettleMs: the router's RIB differs from what the cluster says (a prefix missing, one
 *   that should not be there, a path from a replica that does not hold the lease) for this long:
 *   a leader change (lease 6 s + retry 1 s, the new term's informers and route controller's first
 *   round, connect retry <= 2 s) and, for the old leader's paths, the router's hold time (9 s,
 *   a paused leader) plus the graceful restart time it keeps them as stale (10 s).
 * - l2SettleMs: an address held by a service answered by no speaker, by two, or one no service
 *   holds answered, for this long: the liveness timeout (3 s) and its check (every 0.75 s), a
 *   restarted speaker's warm-up (3 s), a new address's probes (3 x 1 s + 1 s), each probe round
 *   1 s, on two shared cores. (Judged on the prober's latest round, about every second.)
 * - l2TwoMacsToleranceMs: two MACs answering one probe of one address (any address, held or
 *   not): a split, which no failure may cause (issue 29). 0: the first such probe round is a
 *   violation. Not the l2-double condition above, which waits l2SettleMs and is kept for the
 *   figures: this one judges every probe, 10 a second.
 * - deadHopLimitMs: a node dead (its speaker killed or paused, its link down) is still a next
 *   hop in the nodes' router later than this plus one sampling period (DEAD_HOP_SAMPLE_MS) after
 *   its death: issue 29's "out of the routes within a second". BFD (3 x 200 ms) detects a silent
 *   node in 600 ms; a killed process's TCP session ends at once; SIGTERM withdraws first.
 *   No settle time: the first such sample is a violation.
 * The nodes' router's other conditions (an address without a path through a serving node, a
 *   stray prefix) use bgpSettleMs: a restarted speaker warms up and connects (retry <= 2 s).
 */
export const TOLERANCE = {
  termToleranceMs: 1_000,
  presenceToleranceMs: 10_000,
  settleMs: 90_000,
  recoveryLimitMs: 180_000,
  bgpSettleMs: 30_000,
  l2SettleMs: 15_000,
  l2TwoMacsToleranceMs: 0,
  deadHopLimitMs: 1_000,
  rssLimitBytes: 400 * 1024 * 1024,
  socketLimit: 128,
};

/** How often the soak reads the nodes' router for the dead-next-hop invariant (the "probe period" of issue 29). */
export const DEAD_HOP_SAMPLE_MS = 200;

export interface SoakOptions {
  seed: number;
  minutes: number;
  profile: Profile;
  /** Where to write the JSON report (optional). */
  reportPath?: string;
  /** Keep the run directory (logs, audit log) instead of removing it; printed at the end. */
  keep: boolean;
  /** The edge-ccm binary (default dist/edge-ccm). */
  binary?: string;
  /** Only these fault kinds (default: all). */
  faults?: string[];
  /** Two MACs answering one probe for longer than this is a violation (default TOLERANCE.l2TwoMacsToleranceMs, 0). */
  l2TwoMacsToleranceMs: number;
}

export const USAGE = `usage: scripts/soak [--seed N] [--minutes M] [--profile ci|full] [--report FILE] [--keep] [--binary PATH] [--faults K,K] [--l2-two-macs-tolerance-ms MS]
  --seed N         replay a run (printed at the start of every run); default: random
  --minutes M      how long the faults and the workload run, the quiet phase included (default 30)
  --profile P      ci (2+2 replicas, small cluster) or full (3+2 replicas) (default full)
  --report FILE    also write the figures as JSON to FILE (and as Markdown tables beside it, FILE with .md)
  --keep           keep the run's directory (replica logs, audit log) and print its path
  --binary PATH    the edge-ccm binary to run (default dist/edge-ccm)
  --faults K,K     only these fault kinds (default: every kind; see test/soak/faults.ts)
  --l2-two-macs-tolerance-ms MS
                   how long two MACs may answer one L2 address's probes before it is a violation
                   (default 0: never); raise it only to measure the rest against a speaker known to split, and say so`;

export function parseSoakArgs(argv: string[]): SoakOptions {
  let seed: number | undefined;
  let minutes = 30;
  let profile: Profile = PROFILES.full;
  let reportPath: string | undefined;
  let keep = false;
  let binary: string | undefined;
  let faults: string[] | undefined;
  let l2TwoMacsToleranceMs = TOLERANCE.l2TwoMacsToleranceMs;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value\n${USAGE}`);
      return v;
    };
    switch (flag) {
      case '--seed': {
        const v = value();
        if (!/^\d+$/.test(v) || Number(v) > 0xffffffff) throw new Error(`--seed: expected an integer 0..4294967295, got ${JSON.stringify(v)}`);
        seed = Number(v);
        break;
      }
      case '--minutes': {
        const v = value();
        minutes = Number(v);
        if (!Number.isFinite(minutes) || minutes < 1) throw new Error(`--minutes: expected a number >= 1, got ${JSON.stringify(v)}`);
        break;
      }
      case '--profile': {
        const v = value();
        if (v !== 'ci' && v !== 'full') throw new Error(`--profile: expected ci or full, got ${JSON.stringify(v)}`);
        profile = PROFILES[v];
        break;
      }
      case '--report':
        reportPath = value();
        break;
      case '--keep':
        keep = true;
        break;
      case '--binary':
        binary = value();
        break;
      case '--faults':
        faults = value().split(',').map((k) => k.trim()).filter(Boolean);
        break;
      case '--l2-two-macs-tolerance-ms': {
        const v = value();
        if (!/^\d+$/.test(v)) throw new Error(`--l2-two-macs-tolerance-ms: expected a whole number of ms >= 0, got ${JSON.stringify(v)}`);
        l2TwoMacsToleranceMs = Number(v);
        break;
      }
      case '--help':
      case '-h':
        throw new Error(USAGE);
      default:
        throw new Error(`unknown argument ${JSON.stringify(arg)}\n${USAGE}`);
    }
  }
  return { seed: seed ?? randomSeed(), minutes, profile, reportPath, keep, binary, faults, l2TwoMacsToleranceMs };
}
