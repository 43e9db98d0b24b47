import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';

/**
 * Free loopback ports for processes the tests start, which bind them seconds later. Taken from
 * below the kernel's ephemeral range (ip_local_port_range, 32768-60999 by default), where the
 * outgoing connections of every process here get their local ports: a port handed out by
 * bind(0) is in that range and any new connection can take it before our child binds it. Below
 * it only an explicit bind can, so each candidate is checked by binding it. All listeners are
 * held until every port is known, so the ports of one call are distinct.
 */
export async function freeLoopbackPorts(count: number): Promise<number[]> {
  const [low, high] = candidateRange();
  const servers: Server[] = [];
  try {
    for (let tries = 0; servers.length < count; tries++) {
      if (tries > 200) throw new Error(`no free loopback port in ${low}-${high} after 200 tries`);
      const port = low + Math.floor(Math.random() * (high - low + 1));
      const server = createServer();
      const bound = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen(port, '127.0.0.1', () => resolve(true));
      });
      if (bound) servers.push(server);
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

/** 10000 up to the ephemeral range's start (exclusive); well-known and registered low ports avoided. */
function candidateRange(): [number, number] {
  let ephemeralLow = 32768;
  try {
    ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || ephemeralLow;
  } catch {
    // not Linux: keep the default
  }
  return ephemeralLow > 11000 ? [10000, ephemeralLow - 1] : [ephemeralLow, 65535];
}
