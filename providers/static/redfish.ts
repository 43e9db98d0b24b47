import type { Logger } from '../../src/log.ts';
import { silentLogger } from '../../src/log.ts';
import type { RedfishTarget } from './config-model.ts';

/**
 * A minimal Redfish client for one BMC: reads `PowerState` of a ComputerSystem
 * (GET /redfish/v1/Systems/ID), with basic auth or a session (POST to the SessionService's
 * Sessions collection, then X-Auth-Token), TLS verified against a given CA, a timeout per
 * answer and a short cache. It never throws: a BMC that does not answer in time, refuses the
 * credentials or sends nonsense gives `undefined`, which callers treat as "unknown".
 * Links the BMC hands out (Links.Sessions, Members[].@odata.id, a session's Location) are followed
 * only on the endpoint's own origin: requests carry the credentials, and a spoofed service root
 * must not be able to send them elsewhere.
 */

/** DMTF Resource.PowerState values. */
export type PowerState = 'On' | 'Off' | 'PoweringOn' | 'PoweringOff' | 'Paused';
const POWER_STATES: readonly string[] = ['On', 'Off', 'PoweringOn', 'PoweringOff', 'Paused'];

const SERVICE_ROOT = '/redfish/v1/';
const SYSTEMS = '/redfish/v1/Systems';
const DEFAULT_SESSIONS = '/redfish/v1/SessionService/Sessions';

export type RedfishConnection = Omit<RedfishTarget, 'systemId'>;

/** Whether a power state means the machine is shut down; undefined when unknown. */
export function isShutdown(state: PowerState | undefined): boolean | undefined {
  if (state === 'Off' || state === 'PoweringOff') return true;
  if (state === 'On' || state === 'PoweringOn' || state === 'Paused') return false;
  return undefined;
}

/** Clients are shared by machines with the same BMC and credentials. */
export function connectionKey(c: RedfishConnection): string {
  return JSON.stringify([c.endpoint, c.auth, c.username, c.password, c.ca ?? '', c.insecureSkipVerify, c.timeoutMs, c.cacheMs]);
}

class RedfishHttpError extends Error {
  constructor(readonly status: number, path: string) {
    super(`redfish ${path}: HTTP ${status}`);
  }
}

export class RedfishClient {
  private readonly cache = new Map<string, { state: PowerState | undefined; at: number }>();
  private readonly inFlight = new Map<string, Promise<PowerState | undefined>>();
  private session?: { token: string; location?: string };
  /** The only member of the Systems collection, when no systemId is configured. */
  private soleSystemPath?: string;

  constructor(
    readonly connection: RedfishConnection,
    private readonly logger: Logger = silentLogger,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The system's PowerState, from the cache when fresh; undefined when the BMC cannot tell us. */
  powerState(systemId?: string, signal?: AbortSignal): Promise<PowerState | undefined> {
    const key = systemId ?? '';
    const cached = this.cache.get(key);
    if (cached && this.now() - cached.at < this.connection.cacheMs) return Promise.resolve(cached.state);
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.fetchPowerState(systemId, signal).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  /** Ends the session, if one was opened (BMCs allow only a few at a time). */
  async close(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    if (!session?.location) return;
    try {
      await this.send('DELETE', session.location, undefined, AbortSignal.timeout(this.connection.timeoutMs), session.token);
    } catch {
      // The BMC expires idle sessions on its own.
    }
  }

  private async fetchPowerState(systemId: string | undefined, signal?: AbortSignal): Promise<PowerState | undefined> {
    const timeout = AbortSignal.timeout(this.connection.timeoutMs);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let state: PowerState | undefined;
    try {
      const path = systemId !== undefined ? `${SYSTEMS}/${encodeURIComponent(systemId)}` : await this.soleSystem(both);
      const system = (await this.getJSON(path, both)) as { PowerState?: unknown };
      if (typeof system.PowerState === 'string' && POWER_STATES.includes(system.PowerState)) state = system.PowerState as PowerState;
      else this.logger.warn('redfish system has no known PowerState', { endpoint: this.connection.endpoint, path, powerState: String(system.PowerState) });
    } catch (e) {
      const reason = timeout.aborted ? `no answer within ${this.connection.timeoutMs}ms` : (e as Error).message;
      this.logger.warn('redfish power state unknown', { endpoint: this.connection.endpoint, system: systemId, error: reason });
    }
    // A caller that gave up is not an answer about the machine: keep the cache as it was.
    if (!signal?.aborted) this.cache.set(systemId ?? '', { state, at: this.now() });
    return state;
  }

  private async soleSystem(signal: AbortSignal): Promise<string> {
    if (this.soleSystemPath) return this.soleSystemPath;
    const collection = (await this.getJSON(SYSTEMS, signal)) as { Members?: { '@odata.id'?: string }[] };
    const members = collection.Members ?? [];
    const only = members[0]?.['@odata.id'];
    if (members.length !== 1 || !only) throw new Error(`${SYSTEMS} lists ${members.length} systems: set redfish.systemId`);
    this.soleSystemPath = only;
    return only;
  }

  /** GET with the configured authentication; a session the BMC forgot is re-opened once. */
  private async getJSON(path: string, signal: AbortSignal): Promise<unknown> {
    if (this.connection.auth === 'basic') return this.readJSON(await this.send('GET', path, undefined, signal), path);
    const token = await this.sessionToken(signal);
    let res = await this.send('GET', path, undefined, signal, token);
    if (res.status === 401) {
      await res.arrayBuffer();
      this.session = undefined;
      res = await this.send('GET', path, undefined, signal, await this.sessionToken(signal));
    }
    return this.readJSON(res, path);
  }

  private async sessionToken(signal: AbortSignal): Promise<string> {
    if (this.session) return this.session.token;
    const sessionsPath = await this.sessionsPath(signal);
    const res = await this.send('POST', sessionsPath, { UserName: this.connection.username, Password: this.connection.password }, signal);
    await res.arrayBuffer();
    const token = res.headers.get('x-auth-token');
    if (!res.ok || !token) throw new Error(`redfish session: ${res.ok ? 'no X-Auth-Token in the answer' : `HTTP ${res.status}`}`);
    const location = res.headers.get('location') ?? undefined;
    // Checked now, so close() never sends the token to another origin.
    if (location !== undefined) sameOriginURL(this.connection.endpoint, location);
    this.session = { token, location };
    return token;
  }

  /** Where sessions are created: the service root's Links.Sessions, else the standard path. */
  private async sessionsPath(signal: AbortSignal): Promise<string> {
    try {
      const root = (await this.readJSON(await this.send('GET', SERVICE_ROOT, undefined, signal), SERVICE_ROOT)) as {
        Links?: { Sessions?: { '@odata.id'?: string } };
      };
      return root.Links?.Sessions?.['@odata.id'] ?? DEFAULT_SESSIONS;
    } catch (e) {
      if (signal.aborted) throw e;
      return DEFAULT_SESSIONS;
    }
  }

  private async readJSON(res: Response, path: string): Promise<unknown> {
    if (!res.ok) {
      await res.arrayBuffer();
      throw new RedfishHttpError(res.status, path);
    }
    return res.json();
  }

  private send(method: string, path: string, body: unknown, signal: AbortSignal, token?: string): Promise<Response> {
    const c = this.connection;
    const headers: Record<string, string> = { accept: 'application/json', 'odata-version': '4.0' };
    if (token) headers['x-auth-token'] = token;
    else if (c.auth === 'basic') headers.authorization = `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    return fetch(sameOriginURL(c.endpoint, path), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      redirect: 'manual',
      tls: { ca: c.ca, rejectUnauthorized: !c.insecureSkipVerify },
    });
  }
}

/**
 * The URL of a Redfish path or link on the endpoint's origin: a path from the root is relative to
 * the endpoint (which may carry a prefix), anything else is resolved against it and must stay on
 * its origin (scheme, host and port); a link elsewhere throws an error naming its host.
 */
export function sameOriginURL(endpoint: string, link: string): string {
  const base = new URL(endpoint);
  const isRootPath = link.startsWith('/') && !link.startsWith('//') && !link.startsWith('/\\');
  const url = URL.parse(isRootPath ? endpoint + link : link, `${endpoint}/`);
  if (!url) throw new Error(`redfish: the BMC sent a link that is not a URL: ${JSON.stringify(link.slice(0, 200))}`);
  if (url.origin !== base.origin) {
    throw new Error(`redfish: not following a link to ${url.host} (${url.protocol.slice(0, -1)}): only ${base.host}, the configured endpoint's origin, gets the credentials`);
  }
  return url.href;
}

/**
 * One client per distinct BMC connection, kept across reloads when unchanged (so sessions and
 * caches survive an edit elsewhere in the file); clients no machine uses any more are closed.
 */
export class RedfishClientPool {
  private clients = new Map<string, RedfishClient>();

  constructor(private readonly logger: Logger = silentLogger) {}

  client(connection: RedfishConnection): RedfishClient {
    const key = connectionKey(connection);
    let client = this.clients.get(key);
    if (!client) {
      client = new RedfishClient(connection, this.logger);
      this.clients.set(key, client);
    }
    return client;
  }

  /** Keeps only the clients of these connections. */
  async retain(connections: readonly RedfishConnection[]): Promise<void> {
    const keep = new Set(connections.map(connectionKey));
    const dropped = [...this.clients].filter(([key]) => !keep.has(key));
    for (const [key] of dropped) this.clients.delete(key);
    await Promise.all(dropped.map(([, c]) => c.close()));
  }

  async close(): Promise<void> {
    await this.retain([]);
  }
}
