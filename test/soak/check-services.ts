import type { V1Service } from '@kubernetes/client-node';
import type { NetworkConditionKind } from './check-network.ts';
import { CROSS_POOL, L2_POOL, POOL_PREFIX } from './world.ts';

/**
 * The service invariants, as conditions read from one snapshot of the API server (services and
 * Warning events). A condition is not yet a violation: the controllers need a sync to resolve
 * one (a spec edit that makes two sharers clash, a deleted service's finalizer), so the
 * Persistence tracker below turns a condition into a violation only when it lasts.
 *
 * The sharing rule is written here again from docs/providers/static.md, not imported from the
 * allocator: this is the oracle the allocator is checked against.
 */

export const LB_FINALIZER = 'service.kubernetes.io/load-balancer-cleanup';
export const SHARE_ANNOTATION = 'edge-ccm.io/allow-shared-ip';

export interface Condition {
  key: string;
  kind: 'address-conflict' | 'no-address-no-warning' | 'finalizer-left' | NetworkConditionKind;
  detail: string;
}

const keyOf = (s: V1Service) => `${s.metadata?.namespace}/${s.metadata?.name}`;
const ours = (s: V1Service) => s.spec?.type === 'LoadBalancer' && !s.spec.loadBalancerClass;

/** The addresses of the soak's pools in a service's status (the 203.0.113.0/24 pools and the L2 pool). */
export function ingressIPs(s: V1Service): string[] {
  return (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? '').filter((ip) => ip.startsWith(POOL_PREFIX) || L2_POOL.addresses.includes(ip));
}

function inCrossPool(ip: string): boolean {
  const [base, bits] = CROSS_POOL.cidr.split('/') as [string, string];
  const last = Number(base.split('.')[3]);
  const n = Number(ip.split('.')[3]);
  return ip.startsWith(POOL_PREFIX) && n >= last && n < last + 2 ** (32 - Number(bits));
}

/**
 * The controller refused this service's current spec (edge-ccm.io/AddressAssigned False for
 * this generation, e.g. a requested address outside its pools): by design it keeps the
 * addresses and sharing terms of the last spec it applied (docs/providers/static.md), which
 * this oracle does not know, so the new terms are not judged until the spec is valid.
 */
function specRefused(s: V1Service): boolean {
  const c = s.status?.conditions?.find((x) => x.type === 'edge-ccm.io/AddressAssigned');
  return c?.status === 'False' && c.observedGeneration !== undefined && c.observedGeneration === s.metadata?.generation;
}

/** Why two services may not hold one address together; undefined when they may. */
export function sharingProblem(a: V1Service, b: V1Service, ip: string): string | undefined {
  const ports = (s: V1Service) => (s.spec?.ports ?? []).map((p) => `${p.protocol ?? 'TCP'}/${p.port}`);
  const clash = ports(a).find((p) => ports(b).includes(p));
  // A port both serve on one address clashes in the data plane (kube-proxy), whatever was kept.
  if (clash && (specRefused(a) || specRefused(b))) return `both use ${clash}`;
  if (specRefused(a) || specRefused(b)) return undefined;
  const ka = a.metadata?.annotations?.[SHARE_ANNOTATION]?.trim();
  const kb = b.metadata?.annotations?.[SHARE_ANNOTATION]?.trim();
  if (!ka || !kb) return 'not both carry a sharing key';
  if (ka !== kb) return `sharing keys differ (${ka}, ${kb})`;
  if (a.metadata?.namespace !== b.metadata?.namespace && !inCrossPool(ip)) return 'different namespaces in a pool without shareAcrossNamespaces';
  if (clash) return `both use ${clash}`;
  const scope = (s: V1Service) => s.spec?.externalTrafficPolicy === 'Local' ? `Local:${JSON.stringify(Object.entries(s.spec.selector ?? {}).sort())}` : 'Cluster';
  if (scope(a) !== scope(b)) return 'traffic policies or selectors differ';
  return undefined;
}

export function serviceConditions(services: readonly V1Service[], warnedUids: ReadonlySet<string>): { conditions: Condition[]; checks: number } {
  const conditions: Condition[] = [];
  let checks = 0;
  const holders = new Map<string, V1Service[]>();
  for (const s of services) {
    const terminating = !!s.metadata?.deletionTimestamp;
    // Finalizer: only while the service still needs its load balancer cleaned up.
    checks++;
    if (s.metadata?.finalizers?.includes(LB_FINALIZER) && (terminating || !ours(s))) {
      conditions.push({ key: `finalizer:${s.metadata.uid}`, kind: 'finalizer-left', detail: `${keyOf(s)} ${terminating ? 'deleted' : `type ${s.spec?.type}`} but still has ${LB_FINALIZER}` });
    }
    if (terminating) continue; // its address is released already; the status goes with the object
    const ips = ingressIPs(s);
    for (const ip of ips) holders.set(ip, [...(holders.get(ip) ?? []), s]);
    if (ours(s)) {
      checks++;
      if (!ips.length && !warnedUids.has(s.metadata?.uid ?? '')) {
        conditions.push({ key: `noaddr:${s.metadata?.uid}`, kind: 'no-address-no-warning', detail: `${keyOf(s)} has no address and no Warning event` });
      }
    }
  }
  for (const [ip, list] of holders) {
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        checks++;
        const problem = sharingProblem(list[i]!, list[j]!, ip);
        if (problem) {
          const [a, b] = [keyOf(list[i]!), keyOf(list[j]!)].sort();
          conditions.push({ key: `conflict:${ip}:${list[i]!.metadata?.uid}:${list[j]!.metadata?.uid}`, kind: 'address-conflict', detail: `${ip} held by ${a} and ${b}: ${problem}` });
        }
      }
    }
  }
  return { conditions, checks };
}

/** Turns conditions into violations when one is seen continuously for `settleMs`. */
export class Persistence {
  private readonly since = new Map<string, { first: number; condition: Condition }>();
  private readonly reported = new Set<string>();

  /** `onEnd`: told of each condition that is gone, with how long it lasted. */
  constructor(private readonly settleMs: number, private readonly onEnd?: (c: Condition, lastedMs: number) => void) {}

  /** The conditions seen now; returns those that just became violations. */
  observe(conditions: readonly Condition[], now: number): (Condition & { lastedMs: number })[] {
    const seen = new Set(conditions.map((c) => c.key));
    for (const [k, e] of this.since) {
      if (seen.has(k)) continue;
      this.since.delete(k);
      this.onEnd?.(e.condition, now - e.first);
    }
    const out: (Condition & { lastedMs: number })[] = [];
    for (const c of conditions) {
      const entry = this.since.get(c.key) ?? { first: now, condition: c };
      this.since.set(c.key, entry);
      if (now - entry.first >= this.settleMs && !this.reported.has(c.key)) {
        this.reported.add(c.key);
        out.push({ ...c, lastedMs: now - entry.first });
      }
    }
    return out;
  }

  /** Conditions present now, however young (for the strict check at the end of the quiet phase). */
  current(): Condition[] {
    return [...this.since.values()].map((e) => e.condition);
  }
}
