import type { IP } from '../../src/net/ip.ts';
import { selectAddresses } from '../../src/node-addresses/select.ts';
import type { LxdAddressPolicy } from './config-model.ts';
import type { Instance } from './instance-list.ts';

/**
 * A node's addresses from its instance's state.network: global scope only, from the chosen
 * interfaces (by default the instance's nic devices, so lo and the bridges that containers
 * inside create, docker0, cni0, lxdbr0, are left out), then selected by the policy as every
 * API provider's are (src/node-addresses).
 */
export function instanceAddresses(instance: Instance, policy: LxdAddressPolicy): IP[] {
  const interfaces = policy.interfaces.length ? policy.interfaces : instance.nics;
  const candidates = interfaces.flatMap((iface) => (instance.network.get(iface) ?? []).filter((a) => a.scope === 'global').map((a) => a.address));
  return selectAddresses(candidates, policy);
}
