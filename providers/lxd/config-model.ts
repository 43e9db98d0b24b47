import type { AddressPolicy } from '../../src/node-addresses/select.ts';
import type { IPFamily } from '../../src/net/ip.ts';
import type { AddressRange } from '../../src/lb/ranges.ts';
import type { SharedSections } from '../../src/config-sections.ts';

/**
 * The lxd provider's configuration after validation: defaults applied, certificate files read,
 * ranges parsed. Everything past config-load.ts sees only this. Fields are documented in
 * docs/providers/lxd.md.
 */

export const LXD_PROVIDER_ID_PREFIX = 'lxd://';
export const DEFAULT_LXD_SOCKET = '/var/lib/lxd/unix.socket';

/** Where the daemon answers: its unix socket (trusted by file permission) or HTTPS with a client certificate. */
export type LxdEndpoint =
  | { kind: 'unix'; socket: string }
  | {
      kind: 'https';
      /** e.g. https://lxd1.example.com:8443, no trailing slash. */
      url: string;
      clientCert: string;
      clientKey: string;
      /** PEM of the CA that signs the server certificate. */
      ca?: string;
      /** SHA-256 of the server certificate, upper-case hex with colons (LXD's usual self-signed one). */
      fingerprint?: string;
    };

/** The policy every API provider has (src/node-addresses), and which interfaces are read. */
export interface LxdAddressPolicy extends AddressPolicy {
  /** Interfaces (names inside the instance) whose addresses are read; empty: the instance's nic devices. */
  interfaces: string[];
}

export interface LxdConfig extends SharedSections {
  endpoint: LxdEndpoint;
  /** The region of every node, as its topology label. */
  region: string;
  /** Projects whose instances are nodes; `all`: every project (all-projects=true). */
  projects: string[] | 'all';
  /** The API's own filter= expression, e.g. `config.user.k8s-cluster eq edge1`; empty: none. */
  filter: string;
  /** A user.* config key naming the instance type; else limits.cpu/limits.memory, else the instance type. */
  instanceTypeKey: string;
  addresses: LxdAddressPolicy;
  timeoutMs: number;
  /** How long one instance list answers for every node. */
  cacheMs: number;
  maxBackoffMs: number;
}
