import type { InstanceTypeNaming } from './config-model.ts';

/**
 * The node's instance type: a VM tag `PREFIX<type>` when there is one, else a name made from
 * the VM's size, e.g. `4VCPU-8GB` (memory in whole GiB when it is whole, else `1536MB`).
 */

export const INSTANCE_TYPE_PLACEHOLDERS: readonly string[] = ['cores', 'memory', 'memoryGiB', 'memoryMiB'];

const MIB = 1024 * 1024;

export function instanceTypeOf(vm: { cores: number; memoryBytes: number; tags: readonly string[] }, naming: InstanceTypeNaming): string {
  if (naming.tagPrefix) {
    const tag = vm.tags.find((t) => t.startsWith(naming.tagPrefix) && t.length > naming.tagPrefix.length);
    if (tag) return tag.slice(naming.tagPrefix.length);
  }
  const mib = Math.round(vm.memoryBytes / MIB);
  const gib = mib / 1024;
  const values: Record<string, string> = {
    cores: String(vm.cores),
    memory: Number.isInteger(gib) ? `${gib}GB` : `${mib}MB`,
    memoryGiB: String(Math.round(gib * 10) / 10),
    memoryMiB: String(mib),
  };
  return naming.format.replace(/\{([^}]*)\}/g, (whole, name: string) => values[name] ?? whole);
}
