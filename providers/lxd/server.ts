import { REQUEST, type LxdApi } from './api.ts';

/**
 * What `GET /1.0` says of the daemon: which one answers (LXD or Incus: the same REST shape;
 * environment.server is "lxd" or "incus"), its version, whether it trusts us, and its name
 * (the zone of its instances when it is not clustered). Read once per view and again after a failure.
 */
export interface ServerInfo {
  daemon: 'lxd' | 'incus' | 'unknown';
  version: string;
  /** 'trusted' or 'untrusted' (a client certificate the server does not know). */
  auth: string;
  serverName: string;
  clustered: boolean;
}

export function parseServerInfo(data: unknown): ServerInfo {
  const o = (data ?? {}) as { auth?: unknown; api_extensions?: unknown; environment?: Record<string, unknown> };
  const env = o.environment ?? {};
  const server = typeof env.server === 'string' ? env.server : '';
  // Both fill environment.server ("lxd" or "incus"); a daemon with api_extensions but no such field is an LXD older than 4.
  const daemon = server === 'incus' ? 'incus' : server === 'lxd' || Array.isArray(o.api_extensions) ? 'lxd' : 'unknown';
  return {
    daemon,
    version: typeof env.server_version === 'string' ? env.server_version : '',
    auth: typeof o.auth === 'string' ? o.auth : '',
    serverName: typeof env.server_name === 'string' ? env.server_name : '',
    clustered: env.server_clustered === true,
  };
}

export async function readServerInfo(api: LxdApi, signal?: AbortSignal): Promise<ServerInfo> {
  return parseServerInfo(await api.get<unknown>(REQUEST.server, '/1.0', signal));
}

/** Cluster member name -> its failure domain (only members with one other than "default"). */
export async function readFailureDomains(api: LxdApi, signal?: AbortSignal): Promise<Map<string, string>> {
  const members = await api.get<unknown>(REQUEST.clusterMembers, '/1.0/cluster/members?recursion=1', signal);
  const out = new Map<string, string>();
  for (const m of Array.isArray(members) ? members : []) {
    const { server_name: name, failure_domain: domain } = (m ?? {}) as Record<string, unknown>;
    if (typeof name === 'string' && typeof domain === 'string' && domain && domain !== 'default') out.set(name, domain);
  }
  return out;
}
