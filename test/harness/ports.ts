import { createServer, type Server } from 'node:net';

/**
 * Free loopback ports, found by binding port 0. All listeners are held until every port is known,
 * so the ports returned by one call are distinct; another process could still take one before
 * our child binds it, which on a loopback-only test machine is rare enough to accept.
 */
export async function freeLoopbackPorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => resolve());
      });
    }
    return servers.map((s) => {
      const address = s.address();
      if (!address || typeof address === 'string') throw new Error('listener has no TCP address');
      return address.port;
    });
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => (s.listening ? s.close(() => resolve()) : resolve()))));
  }
}
