import { REQUEST, type ProxmoxApi } from './api.ts';
import type { Vm } from './snapshot.ts';

/**
 * What the VM list does not say: from GET /nodes/{node}/qemu/{vmid}/config the SMBIOS UUID
 * (smbios1 uuid=..., what the kubelet reports as systemUUID), the cloud-init static addresses
 * (ipconfigN ip=/ip6=) and whether the guest agent is enabled; from the guest agent
 * (GET .../agent/network-get-interfaces) the addresses the guest has.
 */

export interface VmConfig {
  /** Lower case; undefined when the VM has no smbios1 uuid. */
  uuid?: string;
  /** Static addresses from ipconfig0..N, without prefix length, in ipconfig order. */
  staticAddresses: string[];
  agentEnabled: boolean;
}

export function parseVmConfig(config: unknown): VmConfig {
  const c = (config ?? {}) as Record<string, unknown>;
  const smbios = propertyString(c.smbios1);
  const uuid = smbios.uuid?.toLowerCase();
  const staticAddresses: string[] = [];
  const ipconfigs = Object.keys(c).filter((k) => /^ipconfig\d+$/.test(k)).sort((a, b) => Number(a.slice(8)) - Number(b.slice(8)));
  for (const key of ipconfigs) {
    const ip = propertyString(c[key]);
    for (const value of [ip.ip, ip.ip6]) {
      // dhcp, auto (SLAAC) and manual name no address.
      if (value && value.includes('/')) staticAddresses.push(value.slice(0, value.indexOf('/')));
    }
  }
  const agent = c.agent;
  const agentEnabled = agent === 1 || agent === '1' || (typeof agent === 'string' && /(^|,)(enabled=)?1(,|$)/.test(agent));
  return { uuid: uuid || undefined, staticAddresses, agentEnabled };
}

/** Addresses the guest agent reports, loopback interfaces left out. */
export function parseAgentInterfaces(answer: unknown): string[] {
  const result = (answer as { result?: unknown } | null)?.result;
  if (!Array.isArray(result)) throw new Error('network-get-interfaces: no result list');
  const out: string[] = [];
  for (const iface of result as { name?: string; 'ip-addresses'?: { 'ip-address'?: string }[] }[]) {
    if (iface?.name === 'lo') continue;
    for (const a of iface?.['ip-addresses'] ?? []) if (typeof a['ip-address'] === 'string') out.push(a['ip-address']);
  }
  return out;
}

/** Proxmox property strings: `key=value,key=value` (a bare first value is the default key's; ignored here). */
function propertyString(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof value !== 'string') return out;
  for (const part of value.split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return out;
}

/** VM configs per cluster, reused for `configCacheMs` (a UUID or a static address rarely changes). */
export class VmDetails {
  private readonly configs = new Map<number, { config: VmConfig; host: string; at: number }>();
  private readonly pending = new Map<number, Promise<VmConfig>>();

  constructor(
    private readonly api: ProxmoxApi,
    private readonly configCacheMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Shared by concurrent callers, so not tied to any one caller's signal (the API has its own timeout). */
  config(vm: Vm): Promise<VmConfig> {
    const cached = this.configs.get(vm.vmid);
    // A VM that moved is read again: its config path names the host.
    if (cached && cached.host === vm.host && this.now() - cached.at < this.configCacheMs) return Promise.resolve(cached.config);
    let pending = this.pending.get(vm.vmid);
    if (!pending) {
      pending = this.api
        .get<unknown>(REQUEST.vmConfig, `/nodes/${encodeURIComponent(vm.host)}/qemu/${vm.vmid}/config`)
        .then((raw) => {
          const config = parseVmConfig(raw);
          this.configs.set(vm.vmid, { config, host: vm.host, at: this.now() });
          return config;
        })
        .finally(() => this.pending.delete(vm.vmid));
      this.pending.set(vm.vmid, pending);
    }
    return pending;
  }

  /** The guest's addresses; throws when the agent does not answer (not running, VM stopped). */
  async agentAddresses(vm: Vm, signal?: AbortSignal): Promise<string[]> {
    const answer = await this.api.get<unknown>(REQUEST.guestAgentInterfaces, `/nodes/${encodeURIComponent(vm.host)}/qemu/${vm.vmid}/agent/network-get-interfaces`, signal);
    return parseAgentInterfaces(answer);
  }

  /** Forgets VMs no longer listed. */
  retain(vmids: ReadonlySet<number>): void {
    for (const id of this.configs.keys()) if (!vmids.has(id)) this.configs.delete(id);
  }
}
