import type { V1Node, V1Service, V1ServicePort } from '@kubernetes/client-node';
import { isAlreadyExists, isNotFound } from '../../src/kube/errors.ts';
import { NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';
import type { Random } from './random.ts';
import { CROSS_POOL, GROUP_LABEL, L2_POOL, POOL_ANNOTATION_KEY, POOL_PREFIX, SHARE_ANNOTATION_KEY, present, type Group, type World } from './world.ts';

/**
 * The changing cluster the faults hit: kubelets registering nodes, nodes going NotReady and
 * back, machines leaving and coming back to the inventory, services created, edited and
 * deleted (plain, with a requested address, with sharing keys, through the cross-namespace
 * pool, dual-stack through the L2 pool), pools edited. Pinned machines (the L2 speakers' nodes)
 * are left alone. Each operation is drawn from the seeded source; one that the API
 * refuses or cannot answer (during a fault) is counted and dropped, as a user would retry later.
 */

export const NAMESPACES = ['soak-a', 'soak-b', 'soak-c'];
const PORT_CHOICES: V1ServicePort[] = [
  { name: 'http', port: 80, protocol: 'TCP' }, { name: 'https', port: 443, protocol: 'TCP' },
  { name: 'dns-udp', port: 53, protocol: 'UDP' }, { name: 'dns-tcp', port: 53, protocol: 'TCP' }, { name: 'alt', port: 8080, protocol: 'TCP' },
];
const SHARING_KEYS = ['k1', 'k2'];

export type Operation =
  | 'node-join' | 'node-notready' | 'node-ready' | 'node-leave'
  | 'machine-remove' | 'machine-return'
  | 'service-create' | 'service-edit' | 'service-delete' | 'pool-edit';

export interface WorkloadHooks {
  /** The static inventory or pools changed: write the file (unless a config fault holds it). */
  staticChanged(): void;
  /** The Proxmox VMs changed: update the responder. */
  proxmoxChanged(): void;
  /** Whether the group's machine list may change now (not while a fault distorts that group's config). */
  inventoryEditable(group: Group): boolean;
}

export class Workload {
  readonly done: Record<string, number> = {};
  readonly failed: Record<string, number> = {};
  private readonly nodes: ResourceClient<V1Node>;
  private readonly services: ResourceClient<V1Service>;
  private serial = 0;

  constructor(
    api: KubeTransport,
    private readonly world: World,
    private readonly rnd: Random,
    private readonly maxServices: number,
    private readonly hooks: WorkloadHooks,
  ) {
    this.nodes = new ResourceClient<V1Node>(api, NODES);
    this.services = new ResourceClient<V1Service>(api, SERVICES);
  }

  get churned(): number {
    return Object.values(this.done).reduce((a, b) => a + b, 0);
  }

  /**
   * Every machine present gets its node, Ready, before the faults start; two dual-stack services
   * of the L2 pool (not `svc-`: the workload leaves them alone) give the speakers addresses to
   * answer all the time, so every speaker fault hits some.
   */
  async seed(): Promise<void> {
    for (const m of this.world.machines.values()) if (!m.canary) await this.registerNode(m.id, m.group);
    for (let i = 1; i <= 2; i++) {
      const service = this.newService('l2');
      service.metadata!.name = `l2-fixed-${i}`;
      service.spec!.selector = { app: service.metadata!.name };
      await this.services.create(service, { namespace: NAMESPACES[i - 1]! });
    }
  }

  async step(view: { nodes: V1Node[]; services: V1Service[] }): Promise<void> {
    const op = this.rnd.weighted<Operation>({
      'node-join': 3, 'node-notready': 3, 'node-ready': 3, 'node-leave': 0.5,
      'machine-remove': 1.5, 'machine-return': 1.5,
      'service-create': 4, 'service-edit': 4, 'service-delete': 2.5, 'pool-edit': 0.7,
    });
    try {
      const acted = await this.run(op, view);
      if (acted) this.done[op] = (this.done[op] ?? 0) + 1;
    } catch (e) {
      if (isNotFound(e) || isAlreadyExists(e)) return; // raced a controller or an earlier step: nothing to do
      this.failed[op] = (this.failed[op] ?? 0) + 1;
    }
  }

  private async run(op: Operation, view: { nodes: V1Node[]; services: V1Service[] }): Promise<boolean> {
    const nodeNames = new Set(view.nodes.map((n) => n.metadata!.name!));
    const machines = [...this.world.machines.values()].filter((m) => !m.canary && !m.pinned);
    const ready = (n: V1Node) => n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    const soakNodes = view.nodes.filter((n) => {
      const m = n.metadata?.labels?.[GROUP_LABEL] ? this.world.machines.get(n.metadata.name!) : undefined;
      return m && !m.canary && !m.pinned;
    });
    switch (op) {
      case 'node-join': {
        const m = this.pickOf(machines.filter((x) => present(x) && !nodeNames.has(x.id)));
        if (!m) return false;
        await this.registerNode(m.id, m.group);
        return true;
      }
      case 'node-notready':
      case 'node-ready': {
        const want = op === 'node-ready';
        const n = this.pickOf(soakNodes.filter((x) => ready(x) !== want && present(this.world.machines.get(x.metadata!.name!)!)));
        if (!n) return false;
        await this.setReady(n.metadata!.name!, want);
        return true;
      }
      case 'node-leave': {
        const n = this.pickOf(soakNodes.filter((x) => present(this.world.machines.get(x.metadata!.name!)!)));
        if (!n) return false;
        await this.nodes.delete(n.metadata!.name!);
        return true;
      }
      case 'machine-remove': {
        // At most two gone machines whose node is still there per group, so deletions stay within the breaker.
        const m = this.pickOf(machines.filter((x) => present(x) && nodeNames.has(x.id) && this.hooks.inventoryEditable(x.group)
          && machines.filter((y) => y.group === x.group && !present(y) && nodeNames.has(y.id)).length < 2));
        if (!m) return false;
        // The machine is gone, so is its kubelet: NotReady first, then out of the inventory.
        await this.setReady(m.id, false);
        this.world.setPresent(m.id, false, Date.now());
        this.changed(m.group);
        return true;
      }
      case 'machine-return': {
        const m = this.pickOf(machines.filter((x) => !present(x) && this.hooks.inventoryEditable(x.group)));
        if (!m) return false;
        this.world.setPresent(m.id, true, Date.now());
        this.changed(m.group);
        // Half the time its kubelet comes back too; otherwise the node stays NotReady with its machine back.
        if (nodeNames.has(m.id) && this.rnd.chance(0.5)) await this.setReady(m.id, true);
        return true;
      }
      case 'service-create': {
        if (view.services.filter((s) => s.metadata?.name?.startsWith('svc-')).length >= this.maxServices) return false;
        await this.services.create(this.newService(), { namespace: this.rnd.pick(NAMESPACES) });
        return true;
      }
      case 'service-edit': {
        const s = this.pickOf(view.services.filter((x) => x.metadata?.name?.startsWith('svc-') && !x.metadata.deletionTimestamp));
        if (!s) return false;
        await this.services.patch(s.metadata!.name!, 'merge', this.editPatch(s), { namespace: s.metadata!.namespace });
        return true;
      }
      case 'service-delete': {
        const s = this.pickOf(view.services.filter((x) => x.metadata?.name?.startsWith('svc-') && !x.metadata.deletionTimestamp));
        if (!s) return false;
        await this.services.delete(s.metadata!.name!, { namespace: s.metadata!.namespace });
        return true;
      }
      case 'pool-edit': {
        if (!this.hooks.inventoryEditable('static')) return false;
        if (this.rnd.chance(0.5)) this.world.extraPool = !this.world.extraPool;
        else this.world.excluded = this.rnd.chance(0.5) ? [] : [`${POOL_PREFIX}${this.rnd.int(1, 20)}`];
        this.hooks.staticChanged();
        return true;
      }
    }
  }

  private changed(group: Group): void {
    if (group === 'static') this.hooks.staticChanged();
    else this.hooks.proxmoxChanged();
  }

  private pickOf<T>(items: T[]): T | undefined {
    return items.length ? this.rnd.pick(items) : undefined;
  }

  /** As a kubelet with --cloud-provider=external: tainted, then Ready (with its pod CIDR, as the IPAM gave it). */
  async registerNode(name: string, group: Group): Promise<void> {
    const m = this.world.machines.get(name);
    await this.nodes.create({
      metadata: { name, labels: { [GROUP_LABEL]: group, 'kubernetes.io/hostname': name, ...m?.labels } },
      spec: { taints: [UNINITIALIZED], ...(m?.podCIDR ? { podCIDR: m.podCIDR, podCIDRs: [m.podCIDR] } : {}) },
    });
    await this.setReady(name, true);
  }

  async setReady(name: string, ready: boolean): Promise<void> {
    const now = new Date().toISOString();
    const status = ready ? 'True' : 'Unknown';
    await this.nodes.patch(name, 'merge', {
      status: { conditions: [{ type: 'Ready', status, reason: ready ? 'KubeletReady' : 'NodeStatusUnknown', message: 'set by the soak', lastHeartbeatTime: now, lastTransitionTime: now }] },
    }, { subresource: 'status' });
  }

  private ports(): V1ServicePort[] {
    const n = this.rnd.int(1, 2);
    return this.rnd.shuffle(PORT_CHOICES).slice(0, n).map((p) => ({ ...p }));
  }

  private newService(only?: 'l2'): V1Service {
    const name = `svc-${++this.serial}`;
    const annotations: Record<string, string> = {};
    const spec: V1Service['spec'] = { type: 'LoadBalancer', ports: this.ports(), selector: { app: name } };
    const kind = only ?? this.rnd.weighted({ plain: 4, requested: 1.5, shared: 3, cross: 1, l2: 1.5 });
    if (kind === 'requested') spec.loadBalancerIP = `${POOL_PREFIX}${this.rnd.int(1, 40)}`;
    if (kind === 'shared' || kind === 'cross') annotations[SHARE_ANNOTATION_KEY] = this.rnd.pick(SHARING_KEYS);
    if (kind === 'cross') annotations[POOL_ANNOTATION_KEY] = CROSS_POOL.name;
    if (kind === 'l2') {
      annotations[POOL_ANNOTATION_KEY] = L2_POOL.name;
      spec.ipFamilyPolicy = 'PreferDualStack';
    }
    return { metadata: { name, annotations }, spec };
  }

  /** A merge patch changing one thing the load balancer depends on. */
  private editPatch(s: V1Service): unknown {
    const what = this.rnd.weighted({ ports: 3, key: 2, request: 1, type: 1 });
    switch (what) {
      case 'ports':
        return { spec: { ports: this.ports() } };
      case 'key': {
        const has = !!s.metadata?.annotations?.[SHARE_ANNOTATION_KEY];
        return { metadata: { annotations: { [SHARE_ANNOTATION_KEY]: has && this.rnd.chance(0.5) ? null : this.rnd.pick(SHARING_KEYS) } } };
      }
      case 'request':
        return { spec: { loadBalancerIP: s.spec?.loadBalancerIP ? null : `${POOL_PREFIX}${this.rnd.int(1, 40)}` } };
      case 'type':
        return { spec: { type: s.spec?.type === 'LoadBalancer' ? 'ClusterIP' : 'LoadBalancer' } };
    }
  }
}
