import { labelValueError } from '../../src/kube/labels.ts';
import type { Instance } from './instance-list.ts';

/**
 * An instance's type label: the value of the configured user.* key (the operator's name for
 * it), else its limits as `{cpu}CPU-{memory}` (limits.cpu "2" and limits.memory "2GiB" give
 * 2CPU-2GiB), else its kind (container or virtual-machine). A value that is not a label value
 * (e.g. limits.memory 50%) falls through to the next choice.
 */
export function instanceTypeOf(instance: Instance, key: string): string {
  const named = instance.config[key];
  if (named && labelValueError(named) === undefined) return named;
  const cpu = instance.config['limits.cpu'];
  const memory = instance.config['limits.memory'];
  if (cpu && memory) {
    const fromLimits = `${cpu.replaceAll(',', '_')}CPU-${memory}`;
    if (labelValueError(fromLimits) === undefined) return fromLimits;
  }
  return instance.type;
}
