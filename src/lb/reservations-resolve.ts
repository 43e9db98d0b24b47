import { formatIP, parseIP, type IP } from '../net/ip.ts';
import type { ConfigPath, ReportIssue } from '../config-file/issues.ts';
import type { Reservation } from './claims.ts';
import type { PoolConfig } from './config-model.ts';
import type { RawReservation } from './config-schema.ts';
import { rangesContain } from './ranges.ts';
import { familyName } from './requests.ts';

/**
 * Second pass over `loadBalancer.reservations`: each address in one of the pools (a reserved
 * address outside them could never be handed out), at most one per IP family and service, no
 * address reserved for two services, no service listed twice. Every problem with its path.
 */
export function resolveReservations(raw: readonly (RawReservation | null)[] | undefined, pools: readonly PoolConfig[], report: ReportIssue): Reservation[] {
  const out: Reservation[] = [];
  const services = new Map<string, number>();
  const owners = new Map<string, { service: string; index: number }>();
  (raw ?? []).forEach((r, i) => {
    if (!r) return; // a shape error, already reported
    const path: ConfigPath = ['loadBalancer', 'reservations', i];
    const first = services.get(r.service);
    if (first !== undefined) {
      report([...path, 'service'], `service ${r.service} is already reserved for in loadBalancer.reservations[${first}]: list all its addresses there`);
      return;
    }
    services.set(r.service, i);
    const addresses: IP[] = [];
    r.addresses.forEach((text, j) => {
      const ip = parseIP(text.trim())!; // the schema checked it
      const at: ConfigPath = [...path, 'addresses', j];
      if (addresses.some((a) => a.family === ip.family)) {
        report(at, `more than one ${familyName(ip.family)} address for service ${r.service}: a service holds one address per IP family`);
        return;
      }
      if (!pools.some((p) => rangesContain(p.ranges, ip))) {
        report(at, `reserved address ${formatIP(ip)} is in no pool: add it to a pool's addresses (and not to its exclude)`);
        return;
      }
      const owner = owners.get(`${ip.family}/${ip.value}`);
      if (owner) {
        report(at, `address ${formatIP(ip)} is already reserved for service ${owner.service} (loadBalancer.reservations[${owner.index}])`);
        return;
      }
      owners.set(`${ip.family}/${ip.value}`, { service: r.service, index: i });
      addresses.push(ip);
    });
    if (addresses.length) out.push({ service: r.service, addresses });
  });
  return out;
}
