/**
 * Forwards TCP connections on this network namespace's loopback to a Unix socket, for tests
 * whose processes run in namespaces of their own and must reach the API server, which listens
 * on the machine's loopback: `ip netns exec NS bun loopback-forwarder-main.ts PORT SOCKET [PORT SOCKET]...`.
 * Each socket (test/harness/api-bridge.ts) forwards to the API server, or to another service on
 * the machine's loopback at that port. Nothing is routed: each
 * namespace keeps only its own loopback, and bytes cross through the filesystem. TLS passes
 * through untouched, so the client checks the API server's certificate as usual (127.0.0.1).
 * Prints "listening" once ready.
 */
import { connect, createServer } from 'node:net';

const args = process.argv.slice(2);
const pairs: [number, string][] = [];
for (let i = 0; i + 1 < args.length; i += 2) pairs.push([Number(args[i]), args[i + 1]!]);
if (pairs.length === 0 || args.length % 2 !== 0 || pairs.some(([port]) => !port)) {
  console.error('usage: loopback-forwarder-main.ts PORT UNIX_SOCKET [PORT UNIX_SOCKET]...');
  process.exit(2);
}
let listening = 0;
for (const [port, socketPath] of pairs) {
  const server = createServer((client) => {
    const upstream = connect(socketPath);
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  });
  server.listen(port, '127.0.0.1', () => {
    // "listening" once every port is bound.
    if (++listening === pairs.length) console.log(`listening on ${pairs.map(([p, s]) => `127.0.0.1:${p} -> ${s}`).join(', ')}`);
  });
}
