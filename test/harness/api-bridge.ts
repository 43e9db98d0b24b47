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
 * (the serving certificate holds 127.0.0.1). Only loopback addresses are used.
 */
export class ApiBridge {
  private readonly forwarders: LoggedProcess[] = [];

  private constructor(
    private readonly server: Server,
    readonly socketPath: string,
    readonly port: number,
  ) {}

  /** `apiServer` is https://127.0.0.1:PORT. */
  static async start(lab: NetnsLab, apiServer: string): Promise<ApiBridge> {
    const url = new URL(apiServer);
    if (url.hostname !== '127.0.0.1') throw new Error(`the API bridge forwards to loopback only, not ${url.hostname}`);
    const port = Number(url.port);
    const socketPath = join(lab.dir, 'apiserver.sock');
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
    return new ApiBridge(server, socketPath, port);
  }

  /** Makes the API server reachable at https://127.0.0.1:PORT inside `role`'s namespace. */
  async into(lab: NetnsLab, role: string): Promise<void> {
    const forwarder = lab.spawnLogged(role, `api-forwarder-${role}`, [process.execPath, FORWARDER, String(this.port), this.socketPath]);
    this.forwarders.push(forwarder);
    await eventually(`API forwarder in ${role} (log ${forwarder.logPath})`, () => forwarder.logTail().includes('listening') || (!forwarder.running && Promise.reject(new Error(forwarder.logTail()))), 30_000);
  }

  async stop(): Promise<void> {
    await Promise.all(this.forwarders.map((f) => f.kill()));
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
