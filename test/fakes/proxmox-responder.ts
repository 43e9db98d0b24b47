import type { Server } from 'bun';

/**
 * A local Proxmox VE API on 127.0.0.1, written from the official API schema (pve-docs
 * api-viewer, apidoc.js) for the endpoints the proxmox provider reads:
 *   POST /api2/json/access/ticket                      (username, password -> ticket, CSRFPreventionToken)
 *   GET  /api2/json/cluster/resources?type=vm          (QEMU VMs and LXC containers, templates included)
 *   GET  /api2/json/cluster/ha/resources               (sid vm:VMID, group, state)
 *   GET  /api2/json/nodes/{node}/qemu/{vmid}/config    (500 when the VM is not on that node)
 *   GET  /api2/json/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces
 * Authentication as pveproxy does it: `Authorization: PVEAPIToken=USER@REALM!TOKENID=SECRET`, or
 * the cookie `PVEAuthCookie=TICKET` (tickets expire after ticketLifetimeMs, 2 h by default).
 * Answers are `{"data": ...}`; errors carry the reason in the status line and in the body
 * (`{"data":null,"message":"..."}`), as pveproxy sends them. Faults: a status for every request (401, 500, 596...), a status for
 * the next N requests, slow answers. HTTP by default; HTTPS with a given certificate.
 */

export interface FakeVm {
  vmid: number;
  name: string;
  /** The Proxmox host (cluster node) the VM is on. */
  node: string;
  status?: 'running' | 'stopped' | 'unknown';
  /** sockets x cores, as maxcpu reports it. */
  cores?: number;
  memoryMiB?: number;
  tags?: string[];
  /** The resource pool, as /cluster/resources lists it. */
  pool?: string;
  template?: boolean;
  /** smbios1 uuid; none when undefined. */
  uuid?: string;
  /** ipconfig0.. values, e.g. "ip=10.0.0.5/24,gw=10.0.0.1". */
  ipconfig?: string[];
  /** agent: 1 in the config. */
  agent?: boolean;
  /** The guest agent answers (it is installed and running). */
  agentRunning?: boolean;
  /** What network-get-interfaces reports: interface name -> addresses. */
  interfaces?: Record<string, string[]>;
  haGroup?: string;
}

export interface ProxmoxResponderOptions {
  /** API tokens accepted: full token id (USER@REALM!TOKENID) -> secret. */
  tokens?: Record<string, string>;
  /** Users accepted for tickets: USER@REALM -> password. */
  users?: Record<string, string>;
  vms?: FakeVm[];
  tls?: { cert: string; key: string };
  ticketLifetimeMs?: number;
}

export interface RecordedRequest {
  method: string;
  /** Path and query, e.g. /api2/json/cluster/resources?type=vm */
  path: string;
  auth: 'token' | 'ticket' | 'none' | 'bad';
}

const API = '/api2/json';

export class ProxmoxResponder {
  readonly requests: RecordedRequest[] = [];
  /** Delay before every answer (a slow or overloaded API). */
  delayMs = 0;
  /** When set, every request gets this status (after authentication is checked, as pveproxy would). */
  failStatus?: number;
  /** Retry-After (seconds) sent with 429 and 503 answers. */
  retryAfterSeconds?: number;
  private failures: { status: number; count: number }[] = [];
  private readonly vms = new Map<number, FakeVm>();
  private readonly tickets = new Map<string, { username: string; issued: number; csrf: string }>();
  private readonly pending = new Set<ReturnType<typeof setTimeout>>();
  private outage?: { ended: Promise<void>; end: () => void };
  private server?: Server<undefined>;
  /** Kept apart from the server, which forgets its port once stopped. */
  private boundPort = 0;

  private constructor(private readonly opts: ProxmoxResponderOptions) {
    for (const vm of opts.vms ?? []) this.vms.set(vm.vmid, { ...vm });
  }

  static start(opts: ProxmoxResponderOptions = {}): ProxmoxResponder {
    const responder = new ProxmoxResponder(opts);
    responder.listen(0);
    return responder;
  }

  get url(): string {
    return `${this.opts.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  get port(): number {
    return this.boundPort;
  }

  /** Adds or replaces a VM. */
  setVm(vm: FakeVm): void {
    this.vms.set(vm.vmid, { ...vm });
  }

  updateVm(vmid: number, change: Partial<FakeVm>): void {
    const vm = this.vms.get(vmid);
    if (!vm) throw new Error(`no VM ${vmid}`);
    this.vms.set(vmid, { ...vm, ...change });
  }

  /** The VM is destroyed: gone from every listing. */
  removeVm(vmid: number): void {
    this.vms.delete(vmid);
  }

  /** The next `count` requests (any endpoint) answer `status`. */
  failNext(status: number, count = 1): void {
    this.failures.push({ status, count });
  }

  /** Forgets every ticket, as a restarted cluster with a rotated auth key would. */
  revokeTickets(): void {
    this.tickets.clear();
  }

  get ticketCount(): number {
    return this.tickets.size;
  }

  requestsTo(pathPrefix: string): RecordedRequest[] {
    return this.requests.filter((r) => r.path.startsWith(API + pathPrefix));
  }

  /** Stops listening (in-flight answers are cut). */
  stop(): void {
    this.endOutage();
    for (const t of this.pending) clearTimeout(t);
    this.pending.clear();
    this.server?.stop(true);
  }

  /**
   * The API stops answering, as behind a dead link: every request hangs (the client's timeout
   * ends it) until endOutage(). The port stays bound, so nothing else can take it meanwhile
   * (stopping and listening again on the same port could race another process for it).
   */
  beginOutage(): void {
    if (this.outage) return;
    let end = () => {};
    const ended = new Promise<void>((resolve) => (end = resolve));
    this.outage = { ended, end };
  }

  endOutage(): void {
    this.outage?.end();
    this.outage = undefined;
  }

  private listen(port: number): void {
    this.server = Bun.serve({ hostname: '127.0.0.1', port, tls: this.opts.tls, fetch: (req) => this.handle(req) });
    this.boundPort = this.server.port!;
  }

  private async handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const path = url.pathname;
    const auth = this.authOf(req);
    this.requests.push({ method: req.method, path: path + url.search, auth });
    if (this.outage) {
      await this.outage.ended;
      return pveError(503, 'service unavailable (outage)');
    }
    if (this.delayMs > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          this.pending.delete(t);
          resolve();
        }, this.delayMs);
        this.pending.add(t);
      });
    }
    if (req.method === 'POST' && path === `${API}/access/ticket`) return this.fault() ?? this.createTicket(req);
    if (auth === 'none') return pveError(401, 'No ticket');
    if (auth === 'bad') return pveError(401, 'authentication failure');
    const fault = this.fault();
    if (fault) return fault;
    if (req.method !== 'GET') return pveError(501, `Method '${req.method} ${path}' not implemented`);

    if (path === `${API}/cluster/resources`) return this.clusterResources(url.searchParams.get('type'));
    if (path === `${API}/cluster/ha/resources`) return data([...this.vms.values()].filter((vm) => vm.haGroup).map((vm) => ({ sid: `vm:${vm.vmid}`, type: 'vm', group: vm.haGroup, state: 'started' })));
    const m = /^\/api2\/json\/nodes\/([^/]+)\/qemu\/(\d+)\/(config|agent\/network-get-interfaces)$/.exec(path);
    if (m) {
      const node = decodeURIComponent(m[1]!);
      const vmid = Number(m[2]);
      const vm = this.vms.get(vmid);
      if (!vm || vm.node !== node) return pveError(500, `Configuration file 'nodes/${node}/qemu-server/${vmid}.conf' does not exist`);
      return m[3] === 'config' ? data(vmConfig(vm)) : this.agentInterfaces(vm);
    }
    return pveError(501, `Method 'GET ${path}' not implemented`);
  }

  private fault(): Response | undefined {
    const next = this.failures[0];
    if (next) {
      if (--next.count <= 0) this.failures.shift();
      return this.errorFor(next.status);
    }
    return this.failStatus ? this.errorFor(this.failStatus) : undefined;
  }

  private errorFor(status: number): Response {
    const reasons: Record<number, string> = {
      401: 'authentication failure',
      429: 'Too Many Requests',
      500: 'Internal Server Error',
      503: 'Service Unavailable',
      // pveproxy's own code when it cannot reach the node it proxies to.
      596: 'Connection timed out',
    };
    const headers: Record<string, string> = {};
    if ((status === 429 || status === 503) && this.retryAfterSeconds !== undefined) headers['retry-after'] = String(this.retryAfterSeconds);
    return pveError(status, reasons[status] ?? 'error', headers);
  }

  private authOf(req: Request): RecordedRequest['auth'] {
    const header = req.headers.get('authorization');
    if (header) {
      const m = /^PVEAPIToken=([^=]+)=(.+)$/.exec(header);
      return m && this.opts.tokens?.[m[1]!] !== undefined && this.opts.tokens[m[1]!] === m[2] ? 'token' : 'bad';
    }
    const cookie = /(?:^|;\s*)PVEAuthCookie=([^;]+)/.exec(req.headers.get('cookie') ?? '')?.[1];
    if (!cookie) return 'none';
    const ticket = this.tickets.get(decodeURIComponent(cookie));
    if (!ticket || Date.now() - ticket.issued >= (this.opts.ticketLifetimeMs ?? 2 * 3600_000)) return 'bad';
    // Writes need the CSRF token of the ticket; reads do not (pveproxy's rule).
    if (req.method !== 'GET' && req.headers.get('csrfpreventiontoken') !== ticket.csrf) return 'bad';
    return 'ticket';
  }

  private async createTicket(req: Request): Promise<Response> {
    // pveproxy accepts form-encoded and JSON bodies.
    const text = await req.text();
    const type = req.headers.get('content-type') ?? '';
    const body = type.includes('json') ? ((JSON.parse(text || '{}') as Record<string, string>)) : Object.fromEntries(new URLSearchParams(text));
    const username = body.username ?? '';
    const password = this.opts.users?.[username];
    if (password === undefined || body.password !== password) return pveError(401, 'authentication failure');
    const hexTime = Math.floor(Date.now() / 1000).toString(16).toUpperCase();
    const ticket = `PVE:${username}:${hexTime}::${Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64')}`;
    const csrf = `${hexTime}:${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64').slice(0, 43)}`;
    this.tickets.set(ticket, { username, issued: Date.now(), csrf });
    return data({ username, ticket, CSRFPreventionToken: csrf, cap: { vms: { 'VM.Audit': 1 } } });
  }

  private clusterResources(type: string | null): Response {
    if (type !== null && !['vm', 'storage', 'node', 'sdn', 'pool'].includes(type)) {
      return pveError(400, 'Parameter verification failed.', {}, { type: `value '${type}' does not have a value in the enumeration 'vm, storage, node, sdn, pool'` });
    }
    const rows: unknown[] = [];
    if (type === null || type === 'vm') {
      for (const vm of this.vms.values()) {
        const status = vm.status ?? 'running';
        rows.push({
          id: `qemu/${vm.vmid}`,
          type: 'qemu',
          vmid: vm.vmid,
          name: vm.name,
          node: vm.node,
          status,
          template: vm.template ? 1 : 0,
          maxcpu: vm.cores ?? 2,
          maxmem: (vm.memoryMiB ?? 4096) * 1024 * 1024,
          mem: status === 'running' ? 1024 * 1024 * 1024 : 0,
          maxdisk: 34359738368,
          disk: 0,
          cpu: 0.01,
          uptime: status === 'running' ? 3600 : 0,
          netin: 0,
          netout: 0,
          diskread: 0,
          diskwrite: 0,
          ...(vm.tags?.length ? { tags: vm.tags.join(';') } : {}),
          ...(vm.pool ? { pool: vm.pool } : {}),
          ...(vm.haGroup ? { hastate: 'started' } : {}),
        });
      }
      // A container, as real clusters have them: the provider must skip it.
      rows.push({ id: 'lxc/9999', type: 'lxc', vmid: 9999, name: 'ct-dns', node: [...this.vms.values()][0]?.node ?? 'pve1', status: 'running', template: 0, maxcpu: 1, maxmem: 536870912 });
    }
    return data(rows);
  }

  private agentInterfaces(vm: FakeVm): Response {
    if ((vm.status ?? 'running') !== 'running') return pveError(500, `VM ${vm.vmid} not running`);
    if (!vm.agent) return pveError(500, 'No QEMU guest agent configured');
    if (!vm.agentRunning) return pveError(500, 'QEMU guest agent is not running');
    const result = [
      { name: 'lo', 'hardware-address': '00:00:00:00:00:00', 'ip-addresses': [{ 'ip-address': '127.0.0.1', 'ip-address-type': 'ipv4', prefix: 8 }, { 'ip-address': '::1', 'ip-address-type': 'ipv6', prefix: 128 }] },
      ...Object.entries(vm.interfaces ?? {}).map(([name, addresses], i) => ({
        name,
        'hardware-address': `bc:24:11:00:00:${(i + 1).toString(16).padStart(2, '0')}`,
        'ip-addresses': addresses.map((a) => ({ 'ip-address': a, 'ip-address-type': a.includes(':') ? 'ipv6' : 'ipv4', prefix: a.includes(':') ? 64 : 24 })),
        statistics: { 'rx-bytes': 0, 'tx-bytes': 0, 'rx-packets': 0, 'tx-packets': 0, 'rx-errs': 0, 'tx-errs': 0, 'rx-dropped': 0, 'tx-dropped': 0 },
      })),
    ];
    return data({ result });
  }
}

/** The VM config as GET .../config returns it (current values, property strings). */
function vmConfig(vm: FakeVm): Record<string, unknown> {
  const config: Record<string, unknown> = {
    name: vm.name,
    cores: vm.cores ?? 2,
    sockets: 1,
    memory: String(vm.memoryMiB ?? 4096),
    ostype: 'l26',
    scsihw: 'virtio-scsi-single',
    boot: 'order=scsi0',
    scsi0: `local-lvm:vm-${vm.vmid}-disk-0,iothread=1,size=32G`,
    net0: `virtio=BC:24:11:00:${(vm.vmid % 256).toString(16).padStart(2, '0').toUpperCase()}:01,bridge=vmbr0`,
    vmgenid: '6c1e2a5e-0000-4000-8000-000000000000',
    digest: 'a1b2c3d4e5f60718293a4b5c6d7e8f9011223344',
  };
  if (vm.uuid) config.smbios1 = `uuid=${vm.uuid}`;
  if (vm.agent) config.agent = '1';
  if (vm.tags?.length) config.tags = vm.tags.join(';');
  vm.ipconfig?.forEach((value, i) => (config[`ipconfig${i}`] = value));
  if (vm.template) config.template = 1;
  return config;
}

function data(value: unknown, status = 200): Response {
  return new Response(JSON.stringify({ data: value }), { status, headers: { 'content-type': 'application/json;charset=UTF-8' } });
}

/**
 * pveproxy's error answer: the reason in the status line and as `message` in the body, with
 * `data: null` (plus `errors` for parameter problems). Bun's server may replace the status
 * line's text with the standard one, so clients should read the body.
 */
function pveError(status: number, reason: string, headers: Record<string, string> = {}, errors?: Record<string, string>): Response {
  const body = errors ? { data: null, message: `${reason}\n`, errors } : { data: null, message: `${reason}\n` };
  return new Response(JSON.stringify(body), { status, statusText: reason, headers: { 'content-type': 'application/json;charset=UTF-8', ...headers } });
}
