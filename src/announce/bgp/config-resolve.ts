import { resolveConfig, type PeerConfig } from '../../net/bgp/config.ts';
import { parseIP } from '../../net/ip.ts';
import type { ConfigPath, ReportIssue } from '../../config-file/issues.ts';
import type { SecretFiles } from '../../config-file/secrets.ts';
import type { PoolConfig } from '../../lb/config-model.ts';
import { DEFAULT_NODE_BFD, DEFAULT_RESTART_TIME_SECONDS, type BgpAttributes, type BgpConfig } from './config-model.ts';
import type { RawBfd, RawPeer, ResolvableBgp } from './config-schema.ts';
import type { BfdTimers } from '../../net/bfd/session.ts';

/**
 * Second pass over the `bgp` section: peers checked against each other (one entry per address,
 * a source address of the peer's family), password files read, the per-pool attributes matched
 * to pools that announce over BGP; every problem reported with its path. `poolIndex` maps each
 * pool of the file to its index, for the paths of pools that ask for BGP without a section.
 */
export function resolveBgp(
  raw: ResolvableBgp | undefined,
  pools: readonly PoolConfig[],
  poolIndex: ReadonlyMap<string, number>,
  report: ReportIssue,
  files: SecretFiles,
): BgpConfig | undefined {
  if (!raw) {
    for (const pool of pools) {
      if (pool.announce === 'bgp') report(['loadBalancer', 'pools', poolIndex.get(pool.name) ?? 0, 'announce'], `pool ${JSON.stringify(pool.name)} is announced over BGP, but the file has no bgp section (its peers)`);
    }
    return undefined;
  }
  const base: ConfigPath = ['bgp'];
  const before = reported(report);
  const peers = resolvePeers(raw.peers ?? [], ['bgp', 'peers'], before.report, files);
  const byName = new Map(pools.map((p) => [p.name, p]));
  const poolAttributes = new Map<string, BgpAttributes>();
  (raw.pools ?? []).forEach((p, i) => {
    if (!p) return;
    const at = [...base, 'pools', i, 'name'];
    const pool = byName.get(p.name);
    if (poolAttributes.has(p.name)) before.report(at, `pool ${JSON.stringify(p.name)} is listed twice`);
    else if (!pool) before.report(at, `unknown pool ${JSON.stringify(p.name)} (not in loadBalancer.pools)`);
    else if (pool.announce !== 'bgp') before.report(at, `pool ${JSON.stringify(p.name)} is not announced over BGP (its announce is ${pool.announce}; set announce: bgp)`);
    poolAttributes.set(p.name, { communities: p.communities ?? [], ...(p.localPref !== undefined ? { localPref: p.localPref } : {}) });
  });
  const loadBalancers = resolveLoadBalancers(raw, before.report);
  const gr = raw.gracefulRestart;
  const speaker = {
    localAsn: raw.localASN ?? 0,
    routerId: raw.routerID ?? '',
    // No listener unless asked: the speaker connects to its peers (binding port 179 needs privileges).
    listen: raw.listen ? { port: raw.listen.port ?? 179, addresses: raw.listen.addresses ?? ['::'] } : (false as const),
    ...(gr?.enabled === false ? {} : { gracefulRestart: { restartTimeSeconds: gr?.restartTimeSeconds ?? DEFAULT_RESTART_TIME_SECONDS } }),
    peers,
  };
  if (before.count() > 0 || raw.localASN === undefined || raw.routerID === undefined || raw.peers === undefined || raw.peers.includes(null)) return undefined;
  // The speaker's own validation, as a last net: everything it checks was checked above with a path.
  try {
    resolveConfig(speaker);
  } catch (e) {
    report(base, (e as Error).message);
    return undefined;
  }
  const pod = raw.podCIDRs ?? {};
  return {
    speaker,
    podCIDRs: { announce: pod.announce ?? true, communities: pod.communities ?? [], ...(pod.localPref !== undefined ? { localPref: pod.localPref } : {}) },
    loadBalancers,
    pools: poolAttributes,
  };
}

/**
 * `loadBalancers`: leader (default) or nodes; BFD only for per-node sessions, which are single
 * hop (RFC 5881) and opened by the nodes (so a peer must neither be multihop nor passive).
 */
function resolveLoadBalancers(raw: ResolvableBgp, report: ReportIssue): BgpConfig['loadBalancers'] {
  const lb = raw.loadBalancers ?? {};
  const at: ConfigPath = ['bgp', 'loadBalancers'];
  const announceFrom = lb.announceFrom ?? 'leader';
  if (announceFrom === 'leader') {
    if (lb.bfd) report([...at, 'bfd'], 'BFD runs on the per-node sessions only: set announceFrom: nodes, or remove bfd');
    return { announceFrom };
  }
  const bfd = lb.bfd ?? {};
  const on = bfd.enabled ?? true;
  (raw.peers ?? []).forEach((p, i) => {
    if (!p) return;
    if (p.passive) report(['bgp', 'peers', i, 'passive'], 'with loadBalancers.announceFrom: nodes the nodes connect to every peer (they do not listen): passive cannot be set');
    if (on && p.multihop !== undefined && p.multihop > 1) report(['bgp', 'peers', i, 'multihop'], 'BFD of the per-node sessions is single hop (RFC 5881): the peer must share a subnet with the nodes; set loadBalancers.bfd.enabled: false for a multihop peer');
  });
  const timers = bfdTimers(bfd);
  if (!timers) return { announceFrom };
  return {
    announceFrom,
    bfd: timers,
  };
}

/**
 * Each peer checked (one entry per address, a source address of its family), its password file
 * read (not when `files` is undefined: a file validated by a process that does not run these
 * sessions); `base` is the list's path.
 */
export function resolvePeers(raw: readonly (RawPeer | null)[], base: ConfigPath, report: ReportIssue, files: SecretFiles | undefined): PeerConfig[] {
  const seen = new Map<string, number>();
  const peers: PeerConfig[] = [];
  raw.forEach((p, i) => {
    if (!p) return;
    const at: ConfigPath = [...base, i];
    const address = parseIP(p.address)!;
    const key = `${address.family}/${address.value}`;
    const earlier = seen.get(key);
    if (earlier !== undefined) report([...at, 'address'], `peer ${p.address} is already ${base.join('.')}[${earlier}]`);
    seen.set(key, i);
    if (p.sourceAddress !== undefined && parseIP(p.sourceAddress)!.family !== address.family) {
      report([...at, 'sourceAddress'], `${p.sourceAddress} is not of the family of the peer's address ${p.address}`);
    }
    if (p.connectRetry && (p.connectRetry.minSeconds ?? 1) > (p.connectRetry.maxSeconds ?? 60)) {
      report([...at, 'connectRetry'], 'minSeconds must not exceed maxSeconds');
    }
    let password: string | undefined;
    if (p.passwordFile !== undefined && files) {
      try {
        password = files.read(p.passwordFile, 'passwordFile', [...at, 'passwordFile'], true).replace(/\r?\n$/, '');
        const bytes = new TextEncoder().encode(password).length;
        if (bytes === 0 || bytes > 80) report([...at, 'passwordFile'], `the TCP-MD5 key in ${p.passwordFile} must be 1..80 bytes (it has ${bytes})`);
      } catch (e) {
        report([...at, 'passwordFile'], `cannot read ${p.passwordFile}: ${(e as Error).message}`);
      }
    }
    peers.push({
      address: p.address,
      asn: p.asn,
      ...(p.port !== undefined ? { port: p.port } : {}),
      ...(p.holdTimeSeconds !== undefined ? { holdTimeSeconds: p.holdTimeSeconds } : {}),
      ...(password !== undefined ? { password } : {}),
      ...(p.sourceAddress !== undefined ? { sourceAddress: p.sourceAddress } : {}),
      ...(p.multihop !== undefined ? { multihop: p.multihop } : {}),
      ...(p.passive !== undefined ? { passive: p.passive } : {}),
      ...(p.connectTimeoutSeconds !== undefined ? { connectTimeoutSeconds: p.connectTimeoutSeconds } : {}),
      ...(p.connectRetry ? { connectRetry: { ...p.connectRetry } } : {}),
      ...(p.families ? { families: [...new Set(p.families)] } : {}),
      ...(p.addPath !== undefined ? { addPath: p.addPath } : {}),
    });
  });
  return peers;
}

/** A ReportIssue that also counts what it passed on. */
function reported(report: ReportIssue): { report: ReportIssue; count: () => number } {
  let n = 0;
  return {
    report: (path, message) => {
      n++;
      report(path, message);
    },
    count: () => n,
  };
}

/** BFD timers of a host's own sessions (DEFAULT_NODE_BFD where not given); undefined when turned off. */
export function bfdTimers(bfd: RawBfd): BfdTimers | undefined {
  if (bfd.enabled === false) return undefined;
  return {
    desiredMinTxMs: bfd.transmitIntervalMilliseconds ?? DEFAULT_NODE_BFD.desiredMinTxMs,
    requiredMinRxMs: bfd.receiveIntervalMilliseconds ?? DEFAULT_NODE_BFD.requiredMinRxMs,
    detectMult: bfd.detectMultiplier ?? DEFAULT_NODE_BFD.detectMult,
  };
}
