import type { V1LoadBalancerStatus, V1Node } from '@kubernetes/client-node';
import { nodeAddresses, nodeName } from '../kube/node-helpers.ts';
import { nodeEligibleForLoadBalancer } from '../kube/service-helpers.ts';
import { formatIP, parseIP, type IPFamily } from '../net/ip.ts';
import { inScope } from './allocator.ts';
import type { PoolConfig } from './config-model.ts';
import { AllocationError, familyName, type AddressRequest } from './requests.ts';
import { compareCodeUnits } from '../util/compare.ts';

/**
 * Node-address pools, for sites with no spare addresses (what k3s's ServiceLB and Cilium's node
 * IPAM do): a service of such a pool gets the addresses of the eligible nodes (of the pool's type,
 * InternalIP or ExternalIP, in the service's IP families), and the set follows the nodes. Every
 * service of a pool shares all of its addresses, so two may not use the same protocol and port:
 * the later one is refused with a message naming the holder (port-aware sharing).
 *
 * Eligible: what the service controller passes (not excluded by
 * node.kubernetes.io/exclude-from-external-load-balancers, not tainted ToBeDeletedByClusterAutoscaler,
 * not being deleted), checked again here, and selected by the pool's nodeSelector.
 */

interface Holding {
  pool: string;
  ports: readonly string[];
  /** The nodes' addresses last handed out, in status form. */
  status: V1LoadBalancerStatus;
}

export class NodeAddressPools {
  private readonly holdings = new Map<string, Holding>();

  constructor(private readonly pools: () => readonly PoolConfig[]) {}

  /**
   * The node-address pool a service takes its addresses from, or undefined (then the range pools'
   * allocator decides). Named by the annotation: the first named pool that is a node-address pool.
   * Otherwise, without requested addresses: the first pool in priority order that serves the
   * service automatically, when that is a node-address pool.
   */
  poolFor(req: AddressRequest): PoolConfig | undefined {
    const pools = this.pools();
    if (req.pools) {
      for (const name of req.pools) {
        const pool = pools.find((p) => p.name === name);
        if (pool?.nodeAddresses && inScope(pool, req)) return pool;
      }
      return undefined;
    }
    if (req.requested) return undefined;
    const first = pools.find((p) => inScope(p, req) && p.autoAssign);
    return first?.nodeAddresses ? first : undefined;
  }

  holds(key: string): boolean {
    return this.holdings.has(key);
  }

  statusOf(key: string): V1LoadBalancerStatus | undefined {
    return this.holdings.get(key)?.status;
  }

  poolOf(key: string): string | undefined {
    return this.holdings.get(key)?.pool;
  }

  /**
   * The node addresses for the service; AllocationError when one of its ports is another
   * service's in the same pool, or when no eligible node has an address of a required family.
   * `required`: false when following a node change (an empty set is then written, not refused).
   */
  assign(req: AddressRequest, pool: PoolConfig, nodes: readonly V1Node[], required = true): V1LoadBalancerStatus {
    this.checkPorts(req, pool);
    const byFamily = req.families.map((family) => addressesOf(nodes, pool, family));
    if (required) {
      req.families.slice(0, req.requiredFamilies).forEach((family, i) => {
        if (byFamily[i]!.length === 0) {
          throw new AllocationError(
            `no eligible node has an ${familyName(family)} ${pool.nodeAddresses} address for node-address pool ${pool.name}` +
              ' (nodes excluded from load balancers, tainted ToBeDeletedByClusterAutoscaler or outside the pool\'s nodeSelector do not count)',
            'PoolExhausted',
          );
        }
      });
    }
    const status: V1LoadBalancerStatus = { ingress: byFamily.flat().map((ip) => ({ ip })) };
    this.holdings.set(req.key, { pool: pool.name, ports: req.ports, status });
    return status;
  }

  /** Records what a service's status says it holds (rebuild after a restart), without checks. */
  record(req: AddressRequest, pool: PoolConfig, status: V1LoadBalancerStatus): void {
    this.holdings.set(req.key, { pool: pool.name, ports: req.ports, status });
  }

  release(key: string): boolean {
    return this.holdings.delete(key);
  }

  clear(): void {
    this.holdings.clear();
  }

  private checkPorts(req: AddressRequest, pool: PoolConfig): void {
    for (const [key, holding] of this.holdings) {
      if (key === req.key || holding.pool !== pool.name) continue;
      const clash = req.ports.find((p) => holding.ports.includes(p));
      if (clash) {
        throw new AllocationError(
          `port ${clash} is already served on the node addresses of pool ${pool.name} by service ${key}: every service of a node-address pool shares all its addresses, so each port may be used once; use another port, or another pool`,
          'SharingRefused',
        );
      }
    }
  }
}

/** The pool's type of address of every eligible node, in one family, ordered by node name. */
function addressesOf(nodes: readonly V1Node[], pool: PoolConfig, family: IPFamily): string[] {
  const out: string[] = [];
  for (const node of [...nodes].sort((a, b) => compareCodeUnits(nodeName(a), nodeName(b)))) {
    if (!nodeEligibleForLoadBalancer(node) || !(pool.nodeSelector?.(node.metadata?.labels ?? {}) ?? true)) continue;
    for (const a of nodeAddresses(node)) {
      const ip = a.type === pool.nodeAddresses ? parseIP(a.address) : undefined;
      if (ip?.family === family && !out.includes(formatIP(ip))) out.push(formatIP(ip));
    }
  }
  return out;
}
