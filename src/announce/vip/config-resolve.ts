import type { ConfigPath, ReportIssue } from '../../config-file/issues.ts';
import type { SecretFiles } from '../../config-file/secrets.ts';
import { formatIP, parseIP, type IP, type IPFamily } from '../../net/ip.ts';
import { bfdTimers, resolvePeers } from '../bgp/config-resolve.ts';
import { DEFAULT_HEALTH_URL, DEFAULT_VIP_HEARTBEAT_PORT, DEFAULT_VIP_TIMINGS, type ControlPlaneEndpointConfig, type VipBgpConfig } from './config-model.ts';
import type { RawVipHost, ResolvableControlPlaneEndpoint } from './config-schema.ts';
import { checkHealthCheck } from './health-check-config.ts';

/**
 * Second pass over `controlPlaneEndpoint`: one address per family, hosts named once and
 * addressed once (never by the VIP itself: the heartbeats must not depend on the address they
 * elect a holder for), timings that fit each other; every problem reported with its path.
 * Undefined when the file has no section or it has a problem. Without `files` (the controller,
 * which only validates the section) a BGP peer's passwordFile is not read: only `edge-ccm vip`
 * on the control-plane hosts needs it.
 */
export function resolveControlPlaneEndpoint(raw: ResolvableControlPlaneEndpoint | undefined, report: ReportIssue, files?: SecretFiles): ControlPlaneEndpointConfig | undefined {
  if (!raw) return undefined;
  const base: ConfigPath = ['controlPlaneEndpoint'];
  let problems = 0;
  const problem = (path: ConfigPath, message: string) => {
    problems += 1;
    report([...base, ...path], message);
  };
  const addresses: { address: string; ip: IP }[] = [];
  (raw.addresses ?? []).forEach((text, i) => {
    const ip = parseIP(text)!;
    const same = addresses.find((a) => a.ip.family === ip.family);
    if (same) problem(['addresses', i], `${text}: a second IPv${ip.family} address (${same.address} is listed): one address per family`);
    else addresses.push({ address: formatIP(ip), ip });
  });
  checkHealthCheck(raw.healthCheck, raw.healthURL, problem);
  if (raw.announce === 'bgp' && raw.interfaces) problem(['interfaces'], 'interfaces are where announce: l2 answers ARP/NDP; with announce: bgp the routers carry the VIP: remove interfaces');
  if (raw.announce === 'l2' && raw.bgp) problem(['bgp'], 'read only with announce: bgp: remove it, or set announce: bgp');
  if (raw.announce === 'bgp' && !raw.bgp) problem(['announce'], 'bgp needs the routers to announce to: add a controlPlaneEndpoint.bgp section (localASN, peers)');
  if (raw.announce === 'l2') {
    (raw.hosts ?? []).forEach((h, i) => h?.nextHops && problem(['hosts', i, 'nextHops'], 'read only with announce: bgp: remove it'));
  }
  const names = new Set<string>();
  const hostAddresses = new Map<string, string>();
  const hosts = new Map<string, string>();
  (raw.hosts ?? []).forEach((h, i) => {
    if (!h) return;
    const address = formatIP(parseIP(h.address)!);
    if (names.has(h.name)) problem(['hosts', i, 'name'], `host ${JSON.stringify(h.name)} is listed twice`);
    else if (hostAddresses.has(address)) problem(['hosts', i, 'address'], `${h.address} is already host ${JSON.stringify(hostAddresses.get(address))}'s address`);
    else if (addresses.some((a) => a.address === address)) problem(['hosts', i, 'address'], `${h.address} is the control-plane address itself: give the host's own address (the heartbeats must not depend on the VIP)`);
    names.add(h.name);
    hostAddresses.set(address, h.name);
    hosts.set(h.name, address);
  });
  if (raw.preferredHost !== undefined && raw.hosts && !raw.hosts.includes(null) && !names.has(raw.preferredHost)) {
    problem(['preferredHost'], `${JSON.stringify(raw.preferredHost)} is not in hosts (${[...names].join(', ')}): name one of them, or leave it out (a healthy holder keeps the VIP)`);
  }
  const timings = { ...DEFAULT_VIP_TIMINGS };
  const t = raw.timings ?? {};
  if (t.healthIntervalMilliseconds !== undefined) timings.healthIntervalMs = t.healthIntervalMilliseconds;
  if (t.healthTimeoutMilliseconds !== undefined) timings.healthTimeoutMs = t.healthTimeoutMilliseconds;
  if (t.unhealthyAfter !== undefined) timings.unhealthyAfter = t.unhealthyAfter;
  if (t.healthyAfter !== undefined) timings.healthyAfter = t.healthyAfter;
  if (t.heartbeatIntervalMilliseconds !== undefined) timings.heartbeatIntervalMs = t.heartbeatIntervalMilliseconds;
  if (t.livenessTimeoutMilliseconds !== undefined) timings.livenessTimeoutMs = t.livenessTimeoutMilliseconds;
  if (timings.healthTimeoutMs > timings.healthIntervalMs) {
    problem(['timings', 'healthTimeoutMilliseconds'], `${timings.healthTimeoutMs} ms must be at most healthIntervalMilliseconds (${timings.healthIntervalMs} ms): checks would overlap`);
  }
  if (timings.livenessTimeoutMs <= timings.heartbeatIntervalMs) {
    problem(['timings', 'livenessTimeoutMilliseconds'], `${timings.livenessTimeoutMs} ms must be longer than heartbeatIntervalMilliseconds (${timings.heartbeatIntervalMs} ms)`);
  }
  const bgp = raw.announce === 'bgp' && raw.bgp ? resolveVipBgp(raw, addresses, problem, files) : undefined;
  if (problems > 0 || !raw.addresses || !raw.announce || !raw.hosts || raw.hosts.includes(null) || (raw.announce === 'bgp' && !bgp)) return undefined;
  return {
    addresses,
    announce: raw.announce,
    ...(bgp ? { bgp } : {}),
    ...(raw.interfaces ? { interfaces: raw.interfaces } : {}),
    healthURL: raw.healthURL ?? DEFAULT_HEALTH_URL,
    ...(raw.healthCheck ? { healthCheck: raw.healthCheck } : {}),
    hosts,
    ...(raw.preferredHost !== undefined ? { preferredHost: raw.preferredHost } : {}),
    heartbeatPort: raw.heartbeatPort ?? DEFAULT_VIP_HEARTBEAT_PORT,
    timings,
  };
}

/**
 * announce: bgp: the peers (as the `bgp` section's, password files read), never with a source
 * address or passive (one file for every host: each connects from its own next hop), BFD on by
 * default; each host's next hop per family, and for every VIP address a peer and, on every host,
 * a next hop of its family.
 */
function resolveVipBgp(raw: ResolvableControlPlaneEndpoint, addresses: { address: string; ip: IP }[], problem: (path: ConfigPath, message: string) => void, files: SecretFiles | undefined): VipBgpConfig | undefined {
  const b = raw.bgp!;
  let found = 0;
  const counted = (path: ConfigPath, message: string) => {
    found += 1;
    problem(path, message);
  };
  const peers = resolvePeers(b.peers ?? [], ['controlPlaneEndpoint', 'bgp', 'peers'], (path, message) => counted(path.slice(1), message), files);
  const bfd = bfdTimers(b.bfd ?? {});
  (b.peers ?? []).forEach((p, i) => {
    if (!p) return;
    const at: ConfigPath = ['bgp', 'peers', i];
    if (p.sourceAddress !== undefined) counted([...at, 'sourceAddress'], 'each host connects from its own address (hosts[].nextHops, else hosts[].address): one file serves every host, so sourceAddress cannot be set here');
    if (p.passive) counted([...at, 'passive'], 'the hosts connect to every peer (they do not listen): passive cannot be set');
    if (bfd && p.multihop !== undefined && p.multihop > 1) counted([...at, 'multihop'], 'BFD is single hop (RFC 5881): the peer must share a subnet with the hosts; set bgp.bfd.enabled: false for a multihop peer');
  });
  const nextHops = new Map<string, Partial<Record<IPFamily, string>>>();
  (raw.hosts ?? []).forEach((h, i) => h && nextHops.set(h.name, hostNextHops(h, i, addresses, counted)));
  for (const [i, { address, ip }] of addresses.entries()) {
    if (!peers.some((p) => (p.families ?? [4, 6]).includes(ip.family) && parseIP(p.address)!.family === ip.family)) {
      counted(['addresses', i], `${address}: no peer of IPv${ip.family} in bgp.peers to announce it to`);
    }
    (raw.hosts ?? []).forEach((h, j) => {
      if (h && !nextHops.get(h.name)?.[ip.family]) counted(['hosts', j, h.nextHops ? 'nextHops' : 'address'], `host ${JSON.stringify(h.name)} has no IPv${ip.family} address to be the next hop of ${address}: list one in hosts[${j}].nextHops`);
    });
  }
  if (found > 0 || b.localASN === undefined || !b.peers || b.peers.includes(null)) return undefined;
  return { localAsn: b.localASN, peers, ...(bfd ? { bfd } : {}), communities: b.communities ?? [], ...(b.localPref !== undefined ? { localPref: b.localPref } : {}), nextHops };
}

/** A host's next hop per family: its nextHops (at most one per family, never the VIP), else its heartbeat address. */
function hostNextHops(h: RawVipHost, i: number, vips: { address: string; ip: IP }[], problem: (path: ConfigPath, message: string) => void): Partial<Record<IPFamily, string>> {
  const own: Partial<Record<IPFamily, string>> = {};
  (h.nextHops ?? [h.address]).forEach((text, j) => {
    const ip = parseIP(text)!;
    const at: ConfigPath = ['hosts', i, 'nextHops', j];
    if (own[ip.family]) problem(at, `${text}: a second IPv${ip.family} address (${own[ip.family]} is listed): one per family`);
    else if (vips.some((v) => v.ip.family === ip.family && v.ip.value === ip.value)) problem(at, `${text} is the control-plane address itself: give the host's own address`);
    else own[ip.family] = formatIP(ip);
  });
  return own;
}
