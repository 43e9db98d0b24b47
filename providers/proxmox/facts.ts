import { COMMON_FACT_KEYS, TAGS_FACT, type NodeFacts } from '../../src/cloud/node-rules.ts';
import type { FactVocabulary } from '../../src/node-rules/index.ts';
import type { Vm } from './snapshot.ts';

/**
 * What node rules may select a Proxmox VM by: the common facts (name: the VM name; id: the VM
 * id), the host it runs on, its resource pool and its tags. All are read from the cluster at
 * run time, so `validate` cannot tell whether a rule matches a VM.
 */
export const PROXMOX_FACTS: FactVocabulary = { provider: 'proxmox', keys: [...COMMON_FACT_KEYS, 'host', 'pool', TAGS_FACT], labels: false };

export function vmFacts(vm: Vm, identity: { providerID: string; instanceType: string; zone: string; region: string }): NodeFacts {
  return {
    values: { name: vm.name, id: String(vm.vmid), ...identity, host: vm.host, pool: vm.pool },
    tags: vm.tags,
  };
}
