import type { V1Condition, V1LoadBalancerStatus, V1Service } from '@kubernetes/client-node';
import { AddressAssignmentError } from '../../cloud/types.ts';
import type { StrategicPatch } from './patches.ts';

/**
 * What `kubectl describe service` shows about a service's addresses (beyond upstream), for a
 * provider that hands out addresses from pools (LoadBalancer.assignedPools): the condition
 * edge-ccm.io/AddressAssigned (True/Assigned, or False with the reason and what to change) and
 * the annotation edge-ccm.io/assigned-pool naming the pool(s) the addresses came from. Events
 * expire after an hour; the condition stays until the answer changes.
 *
 * Both ride on the status patch the controller already sends, and only when they changed, so a
 * sync that changes nothing writes nothing. Pure functions; the controller sends the patches.
 */

export const ADDRESS_ASSIGNED_CONDITION = 'edge-ccm.io/AddressAssigned';
/** The pool of each address, comma separated in status order (one name when all came from one pool). */
export const ASSIGNED_POOL_ANNOTATION = 'edge-ccm.io/assigned-pool';

export interface AddressState {
  status: 'True' | 'False';
  reason: string;
  message: string;
  /** True only: the pool of each address, in status order. */
  pools?: string[];
}

export function assignedState(status: V1LoadBalancerStatus, pools: readonly string[]): AddressState {
  const ips = (status.ingress ?? []).map((i) => i.ip ?? i.hostname ?? '');
  const parts = ips.map((ip, i) => `${ip} from pool ${pools[i] || '(none)'}`);
  return { status: 'True', reason: 'Assigned', message: `Assigned ${parts.join(', ')}`, pools: [...pools] };
}

/** The condition for an ensure that failed because the service cannot be addressed; undefined for any other failure. */
export function failedState(error: unknown): AddressState | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 10; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof AddressAssignmentError) return { status: 'False', reason: e.reason, message: capitalize(e.message) };
  }
  return undefined;
}

/**
 * What the service holds after a refused ensure, when the load balancer said (see
 * AddressAssignmentError.holds): written as its status with the condition. Undefined: leave it.
 */
export function heldAfterFailure(error: unknown): V1LoadBalancerStatus | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 10; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof AddressAssignmentError) return e.holds;
  }
  return undefined;
}

/**
 * The part of the status patch that brings the condition and annotation to `state`; undefined
 * (the service no longer has a load balancer of ours) removes both. A failure leaves the pool
 * annotation alone: the allocator keeps a service's current addresses when a change cannot be
 * met, so the annotation still names where they came from. Undefined when nothing changes.
 */
export function addressStatePatch(service: V1Service, state: AddressState | undefined, now: Date): StrategicPatch | undefined {
  const current = service.status?.conditions?.find((c) => c.type === ADDRESS_ASSIGNED_CONDITION);
  const annotation = service.metadata?.annotations?.[ASSIGNED_POOL_ANNOTATION];
  const patch: StrategicPatch = {};
  if (!state) {
    if (current) patch.status = { conditions: [{ $patch: 'delete', type: ADDRESS_ASSIGNED_CONDITION }] };
    if (annotation !== undefined) patch.metadata = { annotations: { [ASSIGNED_POOL_ANNOTATION]: null } };
    return Object.keys(patch).length ? patch : undefined;
  }
  const generation = service.metadata?.generation;
  const unchanged = current && current.status === state.status && current.reason === state.reason && current.message === state.message &&
    (generation === undefined || current.observedGeneration === generation);
  if (!unchanged) {
    const condition: V1Condition = {
      type: ADDRESS_ASSIGNED_CONDITION,
      status: state.status,
      reason: state.reason,
      message: state.message,
      // Moves only when the status flips, as for every Kubernetes condition.
      lastTransitionTime: (current?.status === state.status ? current.lastTransitionTime : formatTime(now)) as unknown as Date,
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    };
    patch.status = { conditions: [condition] };
  }
  if (state.status === 'True') {
    const pools = [...new Set(state.pools ?? [])].filter(Boolean).join(',');
    if (pools && annotation !== pools) patch.metadata = { annotations: { [ASSIGNED_POOL_ANNOTATION]: pools } };
  }
  return Object.keys(patch).length ? patch : undefined;
}

/** The patches as one (objects merged key by key; lists and values of a later patch win). */
export function mergePatches(...patches: (StrategicPatch | undefined)[]): StrategicPatch | undefined {
  let out: StrategicPatch | undefined;
  for (const p of patches) if (p) out = merge(out ?? {}, p);
  return out;
}

function merge(a: StrategicPatch, b: StrategicPatch): StrategicPatch {
  const out: StrategicPatch = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] = isPlainObject(prev) && isPlainObject(v) ? merge(prev, v) : v;
  }
  return out;
}

function isPlainObject(v: unknown): v is StrategicPatch {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 3339 in seconds, as metav1.Time serializes. */
function formatTime(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
