import type { ConfigPath, ReportIssue } from '../../config-file/issues.ts';
import { formatIP, parseIP, type IP } from '../../net/ip.ts';
import { DEFAULT_HEALTH_URL, DEFAULT_VIP_HEARTBEAT_PORT, DEFAULT_VIP_TIMINGS, type ControlPlaneEndpointConfig } from './config-model.ts';
import type { ResolvableControlPlaneEndpoint } from './config-schema.ts';
import { checkHealthCheck } from './health-check-config.ts';

/**
 * Second pass over `controlPlaneEndpoint`: one address per family, hosts named once and
 * addressed once (never by the VIP itself: the heartbeats must not depend on the address they
 * elect a holder for), timings that fit each other; every problem reported with its path.
 * Undefined when the file has no section or it has a problem.
 */
export function resolveControlPlaneEndpoint(raw: ResolvableControlPlaneEndpoint | undefined, report: ReportIssue): ControlPlaneEndpointConfig | undefined {
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
  if (raw.announce === 'bgp') problem(['announce'], 'bgp is not supported yet by edge-ccm vip (issue 28): use l2');
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
  if (problems > 0 || !raw.addresses || !raw.announce || !raw.hosts || raw.hosts.includes(null)) return undefined;
  return {
    addresses,
    announce: 'l2',
    ...(raw.interfaces ? { interfaces: raw.interfaces } : {}),
    healthURL: raw.healthURL ?? DEFAULT_HEALTH_URL,
    ...(raw.healthCheck ? { healthCheck: raw.healthCheck } : {}),
    hosts,
    heartbeatPort: raw.heartbeatPort ?? DEFAULT_VIP_HEARTBEAT_PORT,
    timings,
  };
}
