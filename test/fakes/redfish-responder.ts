import type { Server } from 'bun';

/**
 * A local Redfish service on 127.0.0.1, written from the DMTF schemas (ServiceRoot v1,
 * ComputerSystemCollection, ComputerSystem v1 with Resource.PowerState, SessionService and
 * Session v1): enough of a BMC to test a client's power-state reads, basic and session
 * authentication, and its handling of slow and failing answers. HTTP by default; HTTPS with a
 * given certificate.
 */

export type RedfishPowerState = 'On' | 'Off' | 'PoweringOn' | 'PoweringOff' | 'Paused';

export interface RedfishResponderOptions {
  username?: string;
  password?: string;
  /** System id -> power state. Default: one system "1", On. */
  systems?: Record<string, RedfishPowerState | string>;
  tls?: { cert: string; key: string };
}

export interface RecordedRequest {
  method: string;
  path: string;
  auth: 'basic' | 'session' | 'none' | 'bad';
}

export class RedfishResponder {
  readonly requests: RecordedRequest[] = [];
  /** Delay before every answer (a slow BMC). */
  delayMs = 0;
  /** When set, every request except the service root gets this status with a Redfish error body. */
  failStatus?: number;
  /**
   * Links a spoofed (or merely odd) BMC hands out instead of its own paths: the service root's
   * Links.Sessions, the Systems collection's members, a new session's Location. Any string,
   * e.g. an absolute URL of another server that records what reaches it.
   */
  spoof: { sessionsLink?: string; systemMembers?: string[]; sessionLocation?: string } = {};
  private readonly systems: Map<string, string>;
  private readonly sessions = new Map<string, string>(); // token -> session id
  private nextSession = 1;
  private readonly pending = new Set<ReturnType<typeof setTimeout>>();

  private constructor(
    private server: Server<undefined> | undefined,
    private readonly opts: RedfishResponderOptions,
  ) {
    this.systems = new Map(Object.entries(opts.systems ?? { '1': 'On' }));
  }

  static start(opts: RedfishResponderOptions = {}): RedfishResponder {
    const responder = new RedfishResponder(undefined, opts);
    responder.server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      tls: opts.tls,
      fetch: (req) => responder.handle(req),
    });
    return responder;
  }

  get url(): string {
    return `${this.opts.tls ? 'https' : 'http'}://127.0.0.1:${this.server!.port}`;
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  setPowerState(systemId: string, state: RedfishPowerState | string): void {
    this.systems.set(systemId, state);
  }

  /** Forgets every session, as a BMC does after a reset or an idle timeout. */
  expireSessions(): void {
    this.sessions.clear();
  }

  requestsTo(pathPrefix: string): RecordedRequest[] {
    return this.requests.filter((r) => r.path.startsWith(pathPrefix));
  }

  stop(): void {
    for (const t of this.pending) clearTimeout(t);
    this.pending.clear();
    this.server?.stop(true);
  }

  private async handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const auth = this.authOf(req);
    this.requests.push({ method: req.method, path, auth });
    if (this.delayMs > 0) await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.pending.delete(t);
        resolve();
      }, this.delayMs);
      this.pending.add(t);
    });
    // The service root answers without authentication (Redfish spec, "Authentication requirements").
    if (req.method === 'GET' && path === '/redfish/v1') return json(serviceRoot(this.spoof.sessionsLink));
    if (this.failStatus) return redfishError(this.failStatus, 'Base.1.0.GeneralError', 'A general error has occurred.');
    if (req.method === 'POST' && path === '/redfish/v1/SessionService/Sessions') return this.createSession(req);
    if (auth === 'none' || auth === 'bad') return redfishError(401, 'Base.1.0.NoValidSession', 'There is no valid session established with the implementation.');
    if (req.method === 'DELETE' && path.startsWith('/redfish/v1/SessionService/Sessions/')) {
      const id = path.split('/').at(-1);
      for (const [token, sid] of this.sessions) if (sid === id) this.sessions.delete(token);
      return new Response(null, { status: 204 });
    }
    if (req.method !== 'GET') return redfishError(405, 'Base.1.0.OperationNotAllowed', 'The HTTP method is not allowed.');
    if (path === '/redfish/v1/Systems') return json(systemCollection(this.spoof.systemMembers ?? [...this.systems.keys()].map(systemPath)));
    const m = /^\/redfish\/v1\/Systems\/([^/]+)$/.exec(path);
    if (m) {
      const id = decodeURIComponent(m[1]!);
      const state = this.systems.get(id);
      if (state === undefined) return redfishError(404, 'Base.1.0.ResourceMissingAtURI', `The resource at the URI ${path} was not found.`);
      return json(computerSystem(id, state));
    }
    return redfishError(404, 'Base.1.0.ResourceMissingAtURI', `The resource at the URI ${path} was not found.`);
  }

  private authOf(req: Request): RecordedRequest['auth'] {
    const token = req.headers.get('x-auth-token');
    if (token) return this.sessions.has(token) ? 'session' : 'bad';
    const header = req.headers.get('authorization');
    if (!header) return 'none';
    const [scheme, encoded] = header.split(' ');
    if (scheme !== 'Basic' || !encoded) return 'bad';
    const decoded = Buffer.from(encoded, 'base64').toString();
    return decoded === `${this.opts.username ?? 'admin'}:${this.opts.password ?? 'secret'}` ? 'basic' : 'bad';
  }

  private async createSession(req: Request): Promise<Response> {
    const body = (await req.json().catch(() => ({}))) as { UserName?: string; Password?: string };
    if (body.UserName !== (this.opts.username ?? 'admin') || body.Password !== (this.opts.password ?? 'secret')) {
      return redfishError(401, 'Base.1.0.ResourceAtUriUnauthorized', 'While accessing the resource at the URI, the service received an authorization error.');
    }
    const id = String(this.nextSession++);
    const token = crypto.randomUUID();
    this.sessions.set(token, id);
    const own = `/redfish/v1/SessionService/Sessions/${id}`;
    const location = this.spoof.sessionLocation ?? own;
    return json(
      { '@odata.id': own, '@odata.type': '#Session.v1_7_0.Session', Id: id, Name: 'User Session', UserName: body.UserName },
      201,
      { 'x-auth-token': token, location },
    );
  }
}

function serviceRoot(sessionsLink = '/redfish/v1/SessionService/Sessions'): unknown {
  return {
    '@odata.id': '/redfish/v1/',
    '@odata.type': '#ServiceRoot.v1_15_0.ServiceRoot',
    Id: 'RootService',
    Name: 'Root Service',
    RedfishVersion: '1.17.0',
    Systems: { '@odata.id': '/redfish/v1/Systems' },
    SessionService: { '@odata.id': '/redfish/v1/SessionService' },
    Links: { Sessions: { '@odata.id': sessionsLink } },
  };
}

const systemPath = (id: string) => `/redfish/v1/Systems/${encodeURIComponent(id)}`;

function systemCollection(members: string[]): unknown {
  return {
    '@odata.id': '/redfish/v1/Systems',
    '@odata.type': '#ComputerSystemCollection.ComputerSystemCollection',
    Name: 'Computer System Collection',
    'Members@odata.count': members.length,
    Members: members.map((member) => ({ '@odata.id': member })),
  };
}

function computerSystem(id: string, powerState: string): unknown {
  return {
    '@odata.id': systemPath(id),
    '@odata.type': '#ComputerSystem.v1_20_0.ComputerSystem',
    Id: id,
    Name: `System ${id}`,
    SystemType: 'Physical',
    PowerState: powerState,
    Status: { State: powerState === 'On' ? 'Enabled' : 'StandbyOffline', Health: 'OK' },
  };
}

function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', 'odata-version': '4.0', ...headers } });
}

function redfishError(status: number, code: string, message: string): Response {
  return json({ error: { code, message, '@Message.ExtendedInfo': [{ MessageId: code, Message: message }] } }, status);
}
