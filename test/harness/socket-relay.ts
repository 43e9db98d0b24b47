import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A unix socket at `path` that relays every connection to `upstream`: a peer's socket the test
 * can take away and give back (`close()` also cuts the connections already open, as a daemon
 * that goes away does; `open()` listens again). The peer itself keeps running: what it calls
 * back through its own socket is untouched.
 */
export class ClosableSocketRelay {
  private server?: Server;
  private readonly live = new Set<Socket>();

  constructor(readonly path: string, private readonly upstream: string) {}

  async open(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => relay(client, connect(this.upstream), this.live));
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(this.path, resolve));
    this.server = server;
  }

  close(): void {
    this.server?.close();
    this.server = undefined;
    for (const s of this.live) s.destroy();
    this.live.clear();
  }
}

/** Pipes `client` and `upstream` both ways; either closing or failing closes both. */
export function relay(client: Socket, upstream: Socket, live?: Set<Socket>): void {
  client.pipe(upstream);
  upstream.pipe(client);
  live?.add(client).add(upstream);
  const close = () => (client.destroy(), upstream.destroy(), live?.delete(client), live?.delete(upstream));
  for (const s of [client, upstream]) s.on('error', close).on('close', close);
}
