import type { V1Service } from '@kubernetes/client-node';
import { AddressAssignmentError, type AddressConditionReason } from '../cloud/types.ts';
import { serviceKey } from '../kube/service-helpers.ts';
import { formatIP, parseIP, type IP, type IPFamily } from '../net/ip.ts';
import { readCompatible, type Compatibility } from './compatibility.ts';

/**
 * What a Service asks of the address allocator, read once from its spec and annotations.
 * Bad annotations are the user's error: they throw AllocationError, whose message the service
 * controller turns into a Warning event.
 */

/** Pool names (comma-separated) the service may take addresses from. */
export const ADDRESS_POOL_ANNOTATION = 'edge-ccm.io/address-pool';
/** Requested addresses, comma-separated: one per IP family (dual stack); overrides spec.loadBalancerIP. */
export const LOAD_BALANCER_IPS_ANNOTATION = 'edge-ccm.io/load-balancer-ips';
/**
 * Services with the same value may share an address when none of their (port, protocol) collide.
 * A key is the namespace's own: the same value in another namespace is another key, unless the
 * address's pool sets shareAcrossNamespaces.
 */
export const ALLOW_SHARED_IP_ANNOTATION = 'edge-ccm.io/allow-shared-ip';

/**
 * An allocation the service cannot have; the message says why and what to change, for a Warning
 * event and the service's AddressAssigned condition (whose reason it carries).
 */
export class AllocationError extends AddressAssignmentError {
  constructor(message: string, reason: AddressConditionReason = 'InvalidRequest') {
    super(message, reason);
    this.name = 'AllocationError';
  }
}

export interface AddressRequest {
  /** namespace/name: one assignment per service. */
  key: string;
  namespace: string;
  labels: Record<string, string>;
  /** Families wanted, primary first. */
  families: IPFamily[];
  /** How many of `families`, from the first, must be served (all, or 1 for PreferDualStack). */
  requiredFamilies: number;
  /** Exact addresses asked for, in `families` order; undefined: any. */
  requested?: IP[];
  /** Pools named by annotation; undefined: any pool whose scope matches. */
  pools?: string[];
  sharingKey?: string;
  /** "PROTOCOL/PORT" of each service port. */
  ports: string[];
  /** Where traffic for the address may be answered: see trafficScope(). */
  trafficScope: string;
}

/** What decides whether two services may share one address. */
export type SharingTerms = Pick<AddressRequest, 'key' | 'namespace' | 'sharingKey' | 'ports' | 'trafficScope'>;

/** `compatibility`: the other address managers whose annotations count too (compatibility.ts). */
export function sharingTerms(service: V1Service, compatibility: readonly Compatibility[] = []): SharingTerms {
  return {
    key: serviceKey(service),
    namespace: service.metadata?.namespace ?? '',
    sharingKey: readCompatible(service, ALLOW_SHARED_IP_ANNOTATION, 'sharingKey', compatibility, undefined, invalid)?.value,
    ports: servicePorts(service),
    trafficScope: trafficScope(service),
  };
}

/**
 * "Cluster", or "Local:" plus the pod selector. With externalTrafficPolicy Local only nodes
 * running the service's own pods may answer for its address, so an announcer (kube-vip, BGP)
 * can place a shared address correctly only if every sharer has the same pods: all Cluster, or
 * all Local with one selector (MetalLB's rule too).
 */
export function trafficScope(service: V1Service): string {
  if (service.spec?.externalTrafficPolicy !== 'Local') return 'Cluster';
  const selector = service.spec?.selector ?? {};
  return `Local:${Object.keys(selector).sort().map((k) => `${k}=${selector[k]}`).join(',')}`;
}

export function familyName(f: IPFamily): string {
  return f === 4 ? 'IPv4' : 'IPv6';
}

export function addressRequest(service: V1Service, compatibility: readonly Compatibility[] = []): AddressRequest {
  const spec = service.spec ?? {};
  const requested = requestedAddresses(service, compatibility);
  const listed = (spec.ipFamilies ?? []).map((f) => (f === 'IPv6' ? 6 : 4) as IPFamily);
  const policy = spec.ipFamilyPolicy ?? 'SingleStack';
  let families: IPFamily[] = listed.length ? listed : requested?.length ? [requested[0]!.family] : [4];
  if (policy === 'SingleStack') families = families.slice(0, 1);
  else if (!listed.length) families = families[0] === 6 ? [6, 4] : [4, 6];
  const requiredFamilies = policy === 'PreferDualStack' ? 1 : families.length;
  if (requested) checkRequestedFamilies(requested, families, requiredFamilies);
  const pools = splitList(readCompatible(service, ADDRESS_POOL_ANNOTATION, 'pools', compatibility, sameList, invalid)?.value);
  return {
    ...sharingTerms(service, compatibility),
    labels: service.metadata?.labels ?? {},
    families,
    requiredFamilies,
    requested: requested && families.flatMap((f) => requested.filter((ip) => ip.family === f)),
    pools: pools.length ? pools : undefined,
  };
}

/** "PROTOCOL/PORT" for each port; protocol defaults to TCP as the API server's. */
export function servicePorts(service: V1Service): string[] {
  return (service.spec?.ports ?? []).map((p) => `${p.protocol ?? 'TCP'}/${p.port}`);
}

function requestedAddresses(service: V1Service, compatibility: readonly Compatibility[]): IP[] | undefined {
  const annotated = readCompatible(service, LOAD_BALANCER_IPS_ANNOTATION, 'addresses', compatibility, sameList, invalid);
  // Our annotation set, even empty, overrides spec.loadBalancerIP.
  const ours = service.metadata?.annotations?.[LOAD_BALANCER_IPS_ANNOTATION] !== undefined;
  const source = annotated ? `annotation ${annotated.key}` : ours ? `annotation ${LOAD_BALANCER_IPS_ANNOTATION}` : 'spec.loadBalancerIP';
  const texts = annotated ? splitList(annotated.value) : ours ? [] : splitList(service.spec?.loadBalancerIP);
  if (!texts.length) return undefined;
  return texts.map((text) => {
    const ip = parseIP(text);
    if (!ip) throw new AllocationError(`invalid address ${JSON.stringify(text)} in ${source}: write IP addresses, at most one IPv4 and one IPv6, comma separated`);
    return ip;
  });
}

function checkRequestedFamilies(requested: IP[], families: IPFamily[], required: number): void {
  for (const f of [4, 6] as const) {
    const of = requested.filter((ip) => ip.family === f);
    if (of.length > 1) throw new AllocationError(`requested addresses ${of.map(formatIP).join(', ')}: at most one ${familyName(f)} address per service`);
    if (of.length && !families.includes(f)) {
      throw new AllocationError(`requested address ${formatIP(of[0]!)} is ${familyName(f)} but the service's IP families are ${families.map(familyName).join(', ')}`);
    }
  }
  const missing = families.slice(0, required).filter((f) => !requested.some((ip) => ip.family === f));
  if (missing.length) throw new AllocationError(`requested addresses lack an ${missing.map(familyName).join(' and ')} address the service's ipFamilyPolicy requires`);
}

/** The same items, whatever their order and spacing. */
function sameList(a: string, b: string): boolean {
  const norm = (s: string) => splitList(s).sort().join(',');
  return norm(a) === norm(b);
}

const invalid = (message: string) => new AllocationError(message, 'InvalidRequest');

function splitList(s: string | undefined | null): string[] {
  return (s ?? '').split(',').map((x) => x.trim()).filter((x) => x !== '');
}
