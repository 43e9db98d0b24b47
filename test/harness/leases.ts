import { isConflict } from '../../src/kube/errors.ts';
import { LEASES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { formatMicroTime, type Lease } from '../../src/kube/leader-election.ts';

/**
 * Overwrites a Lease with another holder, as an operator or a split brain would. The leader
 * renews it every retry period, so the read can be stale by the time of the write: retried on
 * 409 as any read-modify-write must be (CI once lost this race).
 */
export async function takeOverLease(api: KubeTransport, namespace: string, name: string, holderIdentity = 'intruder', leaseDurationSeconds = 3600): Promise<void> {
  const leases = new ResourceClient<Lease>(api, LEASES);
  for (let attempt = 1; ; attempt++) {
    const current = await leases.get(name, { namespace });
    try {
      await leases.update({ ...current, spec: { ...current.spec, holderIdentity, leaseDurationSeconds, renewTime: formatMicroTime(Date.now()) } }, { namespace });
      return;
    } catch (e) {
      if (!isConflict(e) || attempt >= 20) throw e;
    }
  }
}

/** Who holds the Lease now (empty: nobody), read from the API server. */
export async function leaseHolder(api: KubeTransport, name: string, namespace = 'kube-system'): Promise<string> {
  return (await new ResourceClient<Lease>(api, LEASES).get(name, { namespace })).spec?.holderIdentity ?? '';
}
