import { type IP, type IPFamily, parseIP } from '../ip.ts';
import { BGP_PORT } from './constants.ts';
import type { LocalSettings, PeerSettings } from './peer.ts';

/**
 * The speaker's configuration as plain data (what a config file section will map onto), and
 * its parsing into typed settings; every problem is reported with its path.
 */
export interface SpeakerConfig {
  localAsn: number;
  /** BGP identifier, dotted IPv4 form. */
  routerId: string;
  /** Where peers connect to us; `false` for outgoing connections only. Default: port 179 on "::" (IPv4 and IPv6). */
  listen?: { port?: number; addresses?: string[] } | false;
  /** Graceful restart as the restarting speaker (RFC 4724); absent: not offered. */
  gracefulRestart?: { restartTimeSeconds: number };
  peers: PeerConfig[];
}

export interface PeerConfig {
  address: string;
  asn: number;
  /** Default 179. */
  port?: number;
  /** Proposed hold time: 0 (no keepalives) or 3..65535; default 90. */
  holdTimeSeconds?: number;
  /** TCP-MD5 (RFC 2385) key, up to 80 bytes. */
  password?: string;
  sourceAddress?: string;
  /**
   * TTL of what we send. Default: 1 for eBGP (directly connected), the kernel's for iBGP; a
   * number for eBGP multihop.
   */
  multihop?: number;
  /** Only accept the peer's connections, never connect. */
  passive?: boolean;
  /** How long one TCP connect may take (seconds, default 10); a silent peer (or a TCP-MD5 mismatch, which drops the SYN) fails after it. */
  connectTimeoutSeconds?: number;
  /** Connect-retry backoff: doubles from min to max (seconds; default 1 and 60). */
  connectRetry?: { minSeconds?: number; maxSeconds?: number };
  /** Address families offered; default both. */
  families?: IPFamily[];
  /**
   * Offer ADD-PATH send (RFC 7911), so a prefix with several next hops goes out as several
   * paths (ECMP at the router) where the peer can receive them; default true. Off, or with a
   * peer that cannot receive them, each prefix gets one next hop, chosen stably.
   */
  addPath?: boolean;
}

export interface ResolvedConfig {
  local: LocalSettings;
  listen: { port: number; addresses: string[] } | undefined;
  peers: PeerSettings[];
}

const isInt = (v: unknown, min: number, max: number): v is number => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;

export function parseRouterId(text: string): number | undefined {
  const ip = parseIP(text);
  if (!ip || ip.family !== 4 || ip.value === 0n) return undefined;
  return Number(ip.value);
}

export function resolveConfig(c: SpeakerConfig): ResolvedConfig {
  const problems: string[] = [];
  if (!isInt(c.localAsn, 1, 0xffffffff)) problems.push(`localAsn: ${JSON.stringify(c.localAsn)} is not an AS number (1..4294967295)`);
  const routerId = typeof c.routerId === 'string' ? parseRouterId(c.routerId) : undefined;
  if (routerId === undefined) problems.push(`routerId: ${JSON.stringify(c.routerId)} is not a non-zero dotted IPv4 address`);
  let listen: ResolvedConfig['listen'];
  if (c.listen !== false) {
    const port = c.listen?.port ?? BGP_PORT;
    if (!isInt(port, 0, 65535)) problems.push(`listen.port: ${JSON.stringify(port)} is not a port`);
    const addresses = c.listen?.addresses ?? ['::'];
    addresses.forEach((a, i) => {
      if (!parseIP(a)) problems.push(`listen.addresses[${i}]: ${JSON.stringify(a)} is not an IP address`);
    });
    listen = { port, addresses };
  }
  const gr = c.gracefulRestart;
  if (gr && !isInt(gr.restartTimeSeconds, 1, 4095)) problems.push(`gracefulRestart.restartTimeSeconds: ${JSON.stringify(gr.restartTimeSeconds)} is not in 1..4095 (12 bits, RFC 4724)`);
  const seen = new Map<string, number>();
  const peers: PeerSettings[] = [];
  (c.peers ?? []).forEach((p, i) => {
    const at = `peers[${i}]`;
    const before = problems.length;
    const address = typeof p.address === 'string' ? parseIP(p.address) : undefined;
    if (!address) problems.push(`${at}.address: ${JSON.stringify(p.address)} is not an IP address`);
    else {
      const key = `${address.family}/${address.value}`;
      const earlier = seen.get(key);
      if (earlier !== undefined) problems.push(`${at}.address: ${p.address} is already peers[${earlier}]`);
      seen.set(key, i);
    }
    if (!isInt(p.asn, 1, 0xffffffff)) problems.push(`${at}.asn: ${JSON.stringify(p.asn)} is not an AS number (1..4294967295)`);
    const port = p.port ?? BGP_PORT;
    if (!isInt(port, 1, 65535)) problems.push(`${at}.port: ${JSON.stringify(p.port)} is not a port`);
    const hold = p.holdTimeSeconds ?? 90;
    if (!isInt(hold, 0, 65535) || hold === 1 || hold === 2) problems.push(`${at}.holdTimeSeconds: ${JSON.stringify(p.holdTimeSeconds)} must be 0 or 3..65535 (RFC 4271 4.2)`);
    if (p.password !== undefined && (typeof p.password !== 'string' || new TextEncoder().encode(p.password).length > 80 || p.password.length === 0)) {
      problems.push(`${at}.password: must be 1..80 bytes (TCP-MD5 key)`);
    }
    let source: IP | undefined;
    if (p.sourceAddress !== undefined) {
      source = parseIP(p.sourceAddress);
      if (!source) problems.push(`${at}.sourceAddress: ${JSON.stringify(p.sourceAddress)} is not an IP address`);
      else if (address && source.family !== address.family) problems.push(`${at}.sourceAddress: ${p.sourceAddress} is not of the family of ${p.address}`);
    }
    if (p.multihop !== undefined && !isInt(p.multihop, 1, 255)) problems.push(`${at}.multihop: ${JSON.stringify(p.multihop)} is not a TTL (1..255)`);
    const min = p.connectRetry?.minSeconds ?? 1;
    const max = p.connectRetry?.maxSeconds ?? 60;
    if (!(typeof min === 'number' && min > 0 && typeof max === 'number' && max >= min)) problems.push(`${at}.connectRetry: need 0 < minSeconds <= maxSeconds`);
    if (p.addPath !== undefined && typeof p.addPath !== 'boolean') problems.push(`${at}.addPath: ${JSON.stringify(p.addPath)} is not true or false`);
    const connectTimeout = p.connectTimeoutSeconds ?? 10;
    if (!(typeof connectTimeout === 'number' && connectTimeout > 0)) problems.push(`${at}.connectTimeoutSeconds: ${JSON.stringify(p.connectTimeoutSeconds)} must be a positive number`);
    const families = p.families ?? [4, 6];
    if (!Array.isArray(families) || families.length === 0 || families.some((f) => f !== 4 && f !== 6)) problems.push(`${at}.families: ${JSON.stringify(p.families)} must list 4 and/or 6`);
    if (problems.length > before || !address) return;
    const ebgp = p.asn !== c.localAsn;
    const ttl = p.multihop ?? (ebgp ? 1 : undefined);
    peers.push({
      address,
      asn: p.asn,
      port,
      holdTimeSeconds: hold,
      ...(p.password !== undefined ? { password: p.password } : {}),
      ...(source ? { source } : {}),
      ...(ttl !== undefined ? { ttl } : {}),
      passive: p.passive ?? false,
      connectTimeoutMs: connectTimeout * 1000,
      connectRetryMinMs: min * 1000,
      connectRetryMaxMs: max * 1000,
      families: [...new Set(families)].sort(),
      addPath: p.addPath ?? true,
    });
  });
  if (problems.length > 0) throw new Error(`invalid BGP configuration:\n  ${problems.join('\n  ')}`);
  return {
    local: { asn: c.localAsn, routerId: routerId!, ...(gr ? { gracefulRestart: { restartTimeSeconds: gr.restartTimeSeconds } } : {}) },
    listen,
    peers,
  };
}
