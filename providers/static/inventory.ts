import type { V1Node } from '@kubernetes/client-node';
import type { Existence } from '../../src/cloud/types.ts';
import { parseIP, formatIP } from '../../src/net/ip.ts';
import { STATIC_PROVIDER_ID_PREFIX, type InventoryConfig, type Machine } from './config-model.ts';

/**
 * The machines of one configuration and how a node finds its machine. Criteria are tried in
 * the configured order (default: providerID, node name, hostname, address); the first that
 * names a machine decides. A node whose providerID has another scheme is never ours.
 * For one key, a machine in service wins over a decommissioned one that had it before.
 */
export class Inventory {
  private readonly byId = new Map<string, Machine>();
  private readonly byNodeName = new Map<string, Machine>();
  private readonly byHostname = new Map<string, Machine>();
  private readonly byAddress = new Map<string, Machine>();

  constructor(readonly config: InventoryConfig) {
    const inService = config.machines.filter((m) => !m.decommissioned);
    const retired = config.machines.filter((m) => m.decommissioned);
    for (const m of [...inService, ...retired]) {
      setFirst(this.byId, m.id, m);
      setFirst(this.byNodeName, m.nodeName, m);
      for (const a of m.addresses) {
        if (a.type === 'Hostname') setFirst(this.byHostname, a.address, m);
        if (a.type === 'InternalIP' || a.type === 'ExternalIP') setFirst(this.byAddress, a.address, m);
      }
    }
  }

  get machines(): readonly Machine[] {
    return this.config.machines;
  }

  machineById(id: string): Machine | undefined {
    return this.byId.get(id);
  }

  /** The node's machine, decommissioned or not; undefined when none matches. */
  match(node: V1Node): Machine | undefined {
    const providerID = node.spec?.providerID;
    if (providerID && !providerID.startsWith(STATIC_PROVIDER_ID_PREFIX)) return undefined;
    for (const criterion of this.config.matchBy) {
      switch (criterion) {
        case 'providerID':
          // A node that names its machine is matched by that name only.
          if (providerID) return this.byId.get(providerID.slice(STATIC_PROVIDER_ID_PREFIX.length));
          break;
        case 'nodeName': {
          const m = node.metadata?.name ? this.byNodeName.get(node.metadata.name) : undefined;
          if (m) return m;
          break;
        }
        case 'hostname': {
          const m = nodeHostnames(node).map((h) => this.byHostname.get(h)).find((x) => x);
          if (m) return m;
          break;
        }
        case 'address': {
          const m = nodeIPs(node).map((ip) => this.byAddress.get(ip)).find((x) => x);
          if (m) return m;
          break;
        }
      }
    }
    return undefined;
  }

  /**
   * Listed: exists; listed as decommissioned: not-found; not listed: not-found only when the
   * inventory says it is complete (authoritative), else unknown. A node with another provider's
   * providerID is unknown: this inventory cannot speak for it.
   */
  existence(node: V1Node): Existence {
    const providerID = node.spec?.providerID;
    if (providerID && !providerID.startsWith(STATIC_PROVIDER_ID_PREFIX)) return 'unknown';
    const machine = this.match(node);
    if (machine) return machine.decommissioned ? 'not-found' : 'exists';
    return this.config.authoritative ? 'not-found' : 'unknown';
  }
}

function setFirst(map: Map<string, Machine>, key: string, m: Machine): void {
  if (!map.has(key)) map.set(key, m);
}

function nodeHostnames(node: V1Node): string[] {
  const out = (node.status?.addresses ?? []).filter((a) => a.type === 'Hostname').map((a) => a.address);
  const label = node.metadata?.labels?.['kubernetes.io/hostname'];
  if (label) out.push(label);
  return out;
}

/** The kubelet's --node-ip, recorded before the node is initialised (status addresses may still be empty). */
const PROVIDED_NODE_IP = 'alpha.kubernetes.io/provided-node-ip';

function nodeIPs(node: V1Node): string[] {
  const provided = node.metadata?.annotations?.[PROVIDED_NODE_IP]?.split(',') ?? [];
  return [
    ...(node.status?.addresses ?? []).filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP').map((a) => a.address),
    ...provided,
  ]
    .map((a) => parseIP(a))
    .filter((ip) => ip !== undefined)
    .map(formatIP);
}
