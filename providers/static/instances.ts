import type { V1Node } from '@kubernetes/client-node';
import type { Existence, InstanceMetadata, Instances } from '../../src/cloud/types.ts';
import { ruleEffects, type NodeRule } from '../../src/node-rules/index.ts';
import type { Machine } from './config-model.ts';
import { machineFacts } from './facts.ts';
import type { Inventory } from './inventory.ts';
import { isShutdown, type RedfishClientPool } from './redfish.ts';
import { FULFILLED_FALSE, FULFILLED_TRUE, FULFILLED_UNDEFINED } from '../../src/util/settled.ts';

/** Labels every machine in a site or rack gets, besides its configured labels. */
export const SITE_LABEL = 'edge-ccm.io/site';
export const RACK_LABEL = 'edge-ccm.io/rack';

/**
 * InstancesV2 over the inventory. The inventory is read through a function on every call, so a
 * reloaded file takes effect at once and a failed reload leaves the last good one in force.
 */
export class StaticInstances implements Instances {
  constructor(
    private readonly inventory: () => Inventory,
    private readonly redfish: RedfishClientPool,
    /** The node rules in force, read on every call as the inventory is. */
    private readonly rules: () => readonly NodeRule[] = () => [],
  ) {}

  async instanceExists(node: V1Node): Promise<Existence> {
    return this.inventory().existence(node);
  }

  async instancesExist(nodes: readonly V1Node[]): Promise<Existence[]> {
    const inventory = this.inventory(); // one configuration for the whole answer
    return nodes.map((n) => inventory.existence(n));
  }

  /**
   * `power: off` says shut down; otherwise the BMC, when Redfish is configured (no answer:
   * undefined); otherwise running. Unknown or decommissioned machines: undefined.
   */
  instanceShutdown(node: V1Node, signal?: AbortSignal): Promise<boolean | undefined> {
    // Asked about every NotReady node every period: the answers from the inventory are shared
    // promises (no allocation per call); only a BMC question makes one.
    let machine: Machine | undefined;
    try {
      machine = this.inventory().match(node);
    } catch (e) {
      return Promise.reject(e); // a rejection, never a throw, as from the async method this was
    }
    if (!machine || machine.decommissioned) return FULFILLED_UNDEFINED;
    if (machine.power === 'off') return FULFILLED_TRUE;
    if (machine.redfish) return this.bmcShutdown(machine.redfish, signal);
    return FULFILLED_FALSE;
  }

  private async bmcShutdown({ systemId, ...connection }: NonNullable<Machine['redfish']>, signal?: AbortSignal): Promise<boolean | undefined> {
    return isShutdown(await this.redfish.client(connection).powerState(systemId, signal));
  }

  async instanceMetadata(node: V1Node): Promise<InstanceMetadata | null> {
    const machine = this.inventory().match(node);
    if (!machine || machine.decommissioned) return null;
    return machineMetadata(machine, this.rules());
  }
}

export function machineMetadata(machine: Machine, rules: readonly NodeRule[] = []): InstanceMetadata {
  const additionalLabels: Record<string, string> = { ...machine.labels };
  if (machine.site !== undefined) additionalLabels[SITE_LABEL] = machine.site;
  if (machine.rack !== undefined) additionalLabels[RACK_LABEL] = machine.rack;
  return {
    providerID: machine.providerID,
    instanceType: machine.instanceType,
    nodeAddresses: machine.addresses.map((a) => ({ ...a })),
    zone: machine.zone,
    region: machine.region,
    additionalLabels,
    ruleEffects: ruleEffects(rules, machineFacts(machine)),
    ...(machine.podCIDRs ? { podCIDRs: [...machine.podCIDRs] } : {}),
  };
}
