import type { V1Node } from '@kubernetes/client-node';
import type { Existence, InstanceMetadata, Instances } from '../../src/cloud/types.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { selectAddresses, vmNodeAddresses } from './addresses.ts';
import type { ProxmoxConfig } from './config-model.ts';
import { instanceTypeOf } from './instance-type.ts';
import { SnapshotPass, matchNode, providerIDOf, type ProxmoxClusterView, type VmMatch } from './matching.ts';
import type { Vm } from './snapshot.ts';
import { ruleEffects } from '../../src/node-rules/index.ts';
import { vmFacts } from './facts.ts';

/**
 * InstancesV2 over the clusters' VM snapshots: exists when the VM is listed, not-found when a
 * good snapshot does not list it, unknown when a cluster could not answer; shut down when the
 * VM is stopped. Every call in one period shares one snapshot per cluster.
 */
export class ProxmoxInstances implements Instances {
  constructor(
    private readonly views: readonly ProxmoxClusterView[],
    private readonly config: ProxmoxConfig,
    private readonly logger: Logger = silentLogger,
  ) {}

  async instanceExists(node: V1Node, signal?: AbortSignal): Promise<Existence> {
    return this.existence(node, await this.match(node, new SnapshotPass(signal)));
  }

  /** One snapshot per cluster for the whole list, whatever its length. */
  async instancesExist(nodes: readonly V1Node[], signal?: AbortSignal): Promise<Existence[]> {
    const pass = new SnapshotPass(signal);
    return Promise.all(nodes.map(async (n) => this.existence(n, await this.match(n, pass))));
  }

  /** Stopped: shut down; running: not; anything else (host offline: status unknown), or no VM: undefined. */
  async instanceShutdown(node: V1Node, signal?: AbortSignal): Promise<boolean | undefined> {
    const m = await this.match(node, new SnapshotPass(signal));
    if (m.kind !== 'found') return undefined;
    if (m.vm.status === 'stopped') return true;
    if (m.vm.status === 'running') return false;
    return undefined;
  }

  /** null when no VM is the node's; throws when a cluster cannot tell (the node controller retries). */
  async instanceMetadata(node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata | null> {
    const m = await this.match(node, new SnapshotPass(signal));
    if (m.kind === 'absent') return null;
    if (m.kind === 'unknown') throw new Error(`cannot tell which VM is node ${node.metadata?.name}: ${m.reason}`);
    const { view, vm } = m;
    const identity = { providerID: providerIDOf(view.cluster.region, vm.vmid), instanceType: instanceTypeOf(vm, this.config.instanceType), zone: zoneOf(view, vm), region: view.cluster.region };
    return {
      ...identity,
      nodeAddresses: vmNodeAddresses(await this.addresses(view, vm, signal), vm.name, this.config.addresses),
      ruleEffects: ruleEffects(this.config.nodeRules, vmFacts(vm, identity)),
    };
  }

  private match(node: V1Node, pass: SnapshotPass): Promise<VmMatch> {
    return matchNode(node, this.views, this.config.matchBy, pass);
  }

  private existence(node: V1Node, m: VmMatch): Existence {
    if (m.kind === 'found') return 'exists';
    if (m.kind === 'absent') return 'not-found';
    this.logger.debug(2, 'VM existence unknown', { node: node.metadata?.name, reason: m.reason });
    return 'unknown';
  }

  /** Static (cloud-init) addresses from the VM config; the guest agent's when there are none. */
  private async addresses(view: ProxmoxClusterView, vm: Vm, signal?: AbortSignal) {
    const policy = this.config.addresses;
    const config = await view.details.config(vm);
    const ips = selectAddresses(config.staticAddresses, policy);
    if (ips.length || !policy.guestAgent || !config.agentEnabled || vm.status !== 'running') return ips;
    try {
      return selectAddresses(await view.details.agentAddresses(vm, signal), policy);
    } catch (e) {
      // The node would lose its IP addresses: better to retry than to initialise it without them.
      throw new Error(`VM ${vm.vmid} (${vm.name}) has no static address and its guest agent does not answer: ${(e as Error).message}`);
    }
  }
}

/** Zone: the VM's host, or its HA group (its host when it has none) with zoneFrom haGroup. */
export function zoneOf(view: ProxmoxClusterView, vm: Vm): string {
  return view.cluster.zoneFrom === 'haGroup' ? (vm.haGroup ?? vm.host) : vm.host;
}
