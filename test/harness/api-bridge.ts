import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { eventually } from './eventually.ts';
import type { NetnsLab } from './netns.ts';
import type { LoggedProcess } from './processes.ts';

const FORWARDER = join(import.meta.dir, '..', 'fakes', 'loopback-forwarder-main.ts');

/**
 * The API server, reachable from a lab's namespaces without routing anything: a Unix socket in
 * the lab's dir forwards to the API server on the machine's loopback, and a forwarder in each
 * namespace listens on that namespace's 127.0.0.1 at the API server's own port and forwards to
 * the socket. A kubeconfig naming https://127.0.0.1:PORT then works unchanged in every namespace
 * (the serving certificate holds 127.0.0.1). Other services on the machine's loopback (a fake
 * provider API) can be bridged the same way (`also`), each at its own port. Only loopback
 * addresses are used.
 */
export class ApiBridge {
  private readonly forwarders: LoggedProcess[] = [];

  private constructor(
    private readonly servers: Server[],
    /** Port on loopback -> the Unix socket forwarding to it; the API server's first. */
    private readonly sockets: [number, string][],
  ) {}

  /** `apiServer` is https://127.0.0.1:PORT; `also`: more http(s)://127.0.0.1:PORT URLs to bridge. */
  static async start(lab: NetnsLab, apiServer: string, also: string[] = []): Promise<ApiBridge> {
    const servers: Server[] = [];
    const sockets: [number, string][] = [];
    for (const [i, target] of [apiServer, ...also].entries()) {
      const url = new URL(target);
      if (url.hostname !== '127.0.0.1') throw new Error(`the API bridge forwards to loopback only, not ${url.hostname}`);
      const port = Number(url.port);
      const socketPath = join(lab.dir, i === 0 ? 'apiserver.sock' : `loopback-${port}.sock`);
      servers.push(await listenForwarding(socketPath, port));
      sockets.push([port, socketPath]);
    }
    return new ApiBridge(servers, sockets);
  }

  get socketPath(): string {
    return this.sockets[0]![1];
  }

  get port(): number {
    return this.sockets[0]![0];
  }

  /** Makes the API server (and the other bridged services) reachable at 127.0.0.1:PORT inside `role`'s namespace. */
  async into(lab: NetnsLab, role: string): Promise<void> {
    const forwarder = lab.spawnLogged(role, `api-forwarder-${role}`, [process.execPath, FORWARDER, ...this.sockets.flatMap(([port, socket]) => [String(port), socket])]);
    this.forwarders.push(forwarder);
    await eventually(`API forwarder in ${role} (log ${forwarder.logPath})`, () => forwarder.logTail().includes('listening') || (!forwarder.running && Promise.reject(new Error(forwarder.logTail()))), 30_000);
  }

  async stop(): Promise<void> {
    await Promise.all(this.forwarders.map((f) => f.kill()));
    await Promise.all(this.servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}

/** A Unix socket server forwarding each connection to 127.0.0.1:port. */
async function listenForwarding(socketPath: string, port: number): Promise<Server> {
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', close);
      s.on('close', close);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, resolve);
  });
  return server;
}
