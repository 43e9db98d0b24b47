import type { V1Condition } from '@kubernetes/client-node';
import type { AddressPoolStatus } from '../cloud/types.ts';
import { INSTANCE_LABEL, STATUS_API_VERSION } from './resources.ts';
import { compareCodeUnits } from '../util/compare.ts';

/**
 * The AddressPool objects edge-ccm publishes, computed from the pools in force (pure): one per
 * pool, named after it (lower case, "_" as "-": object names are DNS subdomains), with its usage
 * per family, the services holding its addresses and two conditions:
 * - Exhausted: True while a family has no address left to hand out automatically;
 * - Invalid: True while the last edit of the cloud config was rejected (this pool, as last
 *   loaded, stays in force), with the problems.
 */

/** Services listed per pool; the rest are counted in servicesNotListed (an object must stay small). */
export const MAX_LISTED_SERVICES = 100;
/** Problem lines of a rejected config quoted in the Invalid condition. */
const MAX_PROBLEM_LINES = 20;

export interface FamilyUsage {
  /** Strings: an IPv6 pool easily holds more than a JSON number can say exactly. */
  total: string;
  used: number;
  /** Reserved for a service or held after a release, not in use. */
  kept: number;
  free: string;
}

export interface AddressPoolObjectStatus {
  pool: string;
  addresses: string[];
  ipv4?: FamilyUsage;
  ipv6?: FamilyUsage;
  serviceCount: number;
  services: { service: string; addresses: string[] }[];
  servicesNotListed?: number;
  conditions: V1Condition[];
}

export interface AddressPoolObject {
  apiVersion: string;
  kind: 'AddressPool';
  metadata: { name: string; labels: Record<string, string>; resourceVersion?: string };
  status?: AddressPoolObjectStatus;
}

export function poolObjectName(pool: string): string {
  return pool.toLowerCase().replaceAll('_', '-');
}

/** The objects as they should be; `rejected`: the problems of the last rejected edit, while it is the last one. */
export function desiredPoolObjects(instance: string, pools: readonly AddressPoolStatus[], rejected: string | undefined): Map<string, AddressPoolObject> {
  const out = new Map<string, AddressPoolObject>();
  for (const p of pools) {
    const name = poolObjectName(p.name);
    if (out.has(name)) continue; // two pools differing only in case: the first one shown
    const status: AddressPoolObjectStatus = {
      pool: p.name, addresses: p.addresses, serviceCount: p.services.length, services: p.services.slice(0, MAX_LISTED_SERVICES), conditions: [],
    };
    if (p.services.length > MAX_LISTED_SERVICES) status.servicesNotListed = p.services.length - MAX_LISTED_SERVICES;
    const exhausted: string[] = [];
    for (const f of p.families) {
      const free = f.total - BigInt(f.used) - BigInt(f.kept);
      const usage: FamilyUsage = { total: String(f.total), used: f.used, kept: f.kept, free: String(free > 0n ? free : 0n) };
      if (f.family === 'IPv4') status.ipv4 = usage;
      else status.ipv6 = usage;
      if (free <= 0n) exhausted.push(`${f.family}: all ${f.total} addresses are in use${f.kept ? ` or kept (${f.kept} reserved or held after a release)` : ''}`);
    }
    status.conditions.push(exhausted.length
      ? condition('Exhausted', 'True', 'NoFreeAddress', `${exhausted.join('; ')}: new services get no address from this pool; add addresses to it in the cloud config`)
      : condition('Exhausted', 'False', 'AddressesFree', 'addresses are free in every family of the pool'));
    status.conditions.push(p.conflicts?.length
      ? condition('Conflict', 'True', 'AddressClaimedTwice', p.conflicts.join('\n'))
      : condition('Conflict', 'False', 'NoConflict', 'no address of the pool is claimed by two services'));
    status.conditions.push(rejected
      ? condition('Invalid', 'True', 'ConfigRejected', `the last edit of the cloud config was rejected; this pool as last loaded stays in force. Problems:\n${firstLines(rejected)}`)
      : condition('Invalid', 'False', 'ConfigAccepted', 'the cloud config in force was accepted'));
    out.set(name, { apiVersion: STATUS_API_VERSION, kind: 'AddressPool', metadata: { name, labels: { [INSTANCE_LABEL]: instance } }, status });
  }
  return out;
}

/**
 * The status to write: `next`, with each condition's lastTransitionTime kept from `current`
 * while its status is unchanged (now otherwise). Undefined when nothing but times would change.
 */
export function statusUpdate<S extends { conditions: V1Condition[] }>(current: S | undefined, next: S, now: Date): S | undefined {
  const conditions = next.conditions.map((c) => {
    const was = current?.conditions?.find((x) => x.type === c.type);
    return { ...c, lastTransitionTime: (was && was.status === c.status ? was.lastTransitionTime : formatTime(now)) as unknown as Date };
  });
  const candidate = { ...next, conditions };
  return current && JSON.stringify(normalize(current)) === JSON.stringify(normalize(candidate)) ? undefined : candidate;
}

export function condition(type: string, status: 'True' | 'False', reason: string, message: string): V1Condition {
  return { type, status, reason, message, lastTransitionTime: '' as unknown as Date };
}

function firstLines(text: string): string {
  const lines = text.split('\n');
  return lines.length <= MAX_PROBLEM_LINES ? text : `${lines.slice(0, MAX_PROBLEM_LINES).join('\n')}\n(${lines.length - MAX_PROBLEM_LINES} more)`;
}

/** Key order and absent-vs-undefined do not count. */
function normalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalize);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined).sort(([a], [b]) => compareCodeUnits(a, b)).map(([k, x]) => [k, normalize(x)]));
  }
  return v;
}

function formatTime(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
