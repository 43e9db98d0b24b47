import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP forwarder on 127.0.0.1 in front of a fake provider API, so the soak can take the API
 * "down" without freeing its port (stopping and re-listening could race another process for
 * it): `up` forwards, `down` resets every connection (as a dead host behind a load balancer),
 * `hang` accepts and never answers (a black hole; the client's timeout ends it).
 */
export type LinkMode = 'up' | 'down' | 'hang';

export class NetSwitch {
  mode: LinkMode = 'up';
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: Server, private readonly targetPort: number) {}

  static async start(targetPort: number): Promise<NetSwitch> {
    const server = createServer();
    const link = new NetSwitch(server, targetPort);
    server.on('connection', (s) => link.accept(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return link;
  }

  get port(): number {
    const address = this.server.address();
    if (!address || typeof address === 'string') throw new Error('switch has no TCP address');
    return address.port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Changes the mode; leaving `up` cuts the connections already forwarded too. */
  set(mode: LinkMode): void {
    this.mode = mode;
    if (mode !== 'up') this.cutAll();
  }

  async stop(): Promise<void> {
    this.cutAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => undefined);
    if (this.mode === 'down') return void client.resetAndDestroy();
    if (this.mode === 'hang') return; // read nothing, answer nothing
    const upstream = connect(this.targetPort, '127.0.0.1');
    this.sockets.add(upstream);
    upstream.on('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  }

  private cutAll(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }
}
