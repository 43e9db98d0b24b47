import type { V1Node, V1Service } from '@kubernetes/client-node';
import { isAlreadyExists, isNotFound } from '../../src/kube/errors.ts';
import { NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';
import { GROUP_LABEL, type Group } from './world.ts';

/**
 * Recovery probes: after a fault ends (right after it is injected, for a kill), how long until
 * the group serves a new request end to end. Static: a new LoadBalancer Service gets its
 * address (leader elected, allocator rebuilt, status written). Proxmox: a new Node of a canary
 * VM is initialised (leader elected, Proxmox API read, node written). The probe's objects are
 * removed afterwards; a probe that does not succeed within the limit is a violation.
 */

export const CANARY_NAMESPACE = 'soak-canary';
const CANARY_VMS = ['p-canary-1', 'p-canary-2', 'p-canary-3'];
/** How often a canary node posts its status, as a kubelet's --node-status-update-frequency of 10 s. */
const KUBELET_STATUS_PERIOD_MS = 10_000;

export class Canaries {
  private serial = 0;
  private readonly busyVms = new Set<string>();
  private readonly services: ResourceClient<V1Service>;
  private readonly nodes: ResourceClient<V1Node>;

  constructor(api: KubeTransport, private readonly limitMs: number) {
    this.services = new ResourceClient<V1Service>(api, SERVICES);
    this.nodes = new ResourceClient<V1Node>(api, NODES);
  }

  /** Milliseconds from `since` until the group served the probe; undefined when it did not within the limit. */
  async probe(group: Group, since: number): Promise<number | undefined> {
    return group === 'static' ? this.serviceProbe(since) : this.nodeProbe(since);
  }

  private async serviceProbe(since: number): Promise<number | undefined> {
    const name = `canary-${++this.serial}`;
    try {
      const ok = await this.retry(since, async () => {
        await this.services.create({ metadata: { name }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], selector: { app: name } } }, { namespace: CANARY_NAMESPACE });
        return true;
      }, true);
      if (!ok) return undefined;
      const served = await this.retry(since, async () => {
        const s = await this.services.get(name, { namespace: CANARY_NAMESPACE });
        return !!s.status?.loadBalancer?.ingress?.length;
      });
      return served ? Date.now() - since : undefined;
    } finally {
      await this.retry(Date.now(), async () => {
        await this.services.delete(name, { namespace: CANARY_NAMESPACE });
        return true;
      }, true);
    }
  }

  private async nodeProbe(since: number): Promise<number | undefined> {
    let vm: string | undefined;
    while (!(vm = CANARY_VMS.find((v) => !this.busyVms.has(v)))) {
      if (Date.now() - since > this.limitMs) return undefined;
      await Bun.sleep(250);
    }
    this.busyVms.add(vm);
    try {
      const ok = await this.retry(since, async () => {
        try {
          await this.nodes.create({ metadata: { name: vm, labels: { [GROUP_LABEL]: 'proxmox' } }, spec: { taints: [UNINITIALIZED] } });
          return true;
        } catch (e) {
          // A node left by an earlier probe whose delete failed (the API was down) would be
          // "served" at once: delete it and register afresh.
          if (isAlreadyExists(e)) await this.nodes.delete(vm!).catch(() => undefined);
          throw e;
        }
      });
      if (!ok) return undefined;
      // As a kubelet, the canary posts its status every 10 s (each post is a Node change, which
      // upstream's node controller needs to try a node again that it had no metadata for; edge-ccm
      // also retries such a node with backoff by itself).
      let beat = 0;
      const served = await this.retry(since, async () => {
        if (Date.now() - beat >= KUBELET_STATUS_PERIOD_MS) {
          beat = Date.now();
          await this.postStatus(vm!);
        }
        const n = await this.nodes.get(vm!);
        return !!n.spec?.providerID && !n.spec.taints?.some((t) => t.key === UNINITIALIZED.key);
      });
      return served ? Date.now() - since : undefined;
    } finally {
      await this.retry(Date.now(), async () => {
        await this.nodes.delete(vm!);
        return true;
      }, true);
      this.busyVms.delete(vm);
    }
  }

  private async postStatus(name: string): Promise<void> {
    const now = new Date().toISOString();
    await this.nodes.patch(name, 'merge', {
      status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'soak canary', lastHeartbeatTime: now, lastTransitionTime: now }] },
    }, { subresource: 'status' });
  }

  /** Polls `attempt` until it says true or the limit passes; API errors (a fault still on) count as "not yet". */
  private async retry(since: number, attempt: () => Promise<boolean>, idempotentWrite = false): Promise<boolean> {
    for (;;) {
      try {
        if (await attempt()) return true;
      } catch (e) {
        if (idempotentWrite && (isAlreadyExists(e) || isNotFound(e))) return true;
      }
      if (Date.now() - since > this.limitMs) return false;
      await Bun.sleep(250);
    }
  }
}
