/**
 * Forwards TCP connections on this network namespace's loopback to a Unix socket, for tests
 * whose processes run in namespaces of their own and must reach the API server, which listens
 * on the machine's loopback: `ip netns exec NS bun loopback-forwarder-main.ts PORT SOCKET`.
 * The socket (test/harness/api-bridge.ts) forwards to the API server. Nothing is routed: each
 * namespace keeps only its own loopback, and bytes cross through the filesystem. TLS passes
 * through untouched, so the client checks the API server's certificate as usual (127.0.0.1).
 * Prints "listening" once ready.
 */
import { connect, createServer } from 'node:net';

const [port, socketPath] = [Number(process.argv[2]), process.argv[3]];
if (!port || !socketPath) {
  console.error('usage: loopback-forwarder-main.ts PORT UNIX_SOCKET');
  process.exit(2);
}
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
server.listen(port, '127.0.0.1', () => console.log(`listening on 127.0.0.1:${port} -> ${socketPath}`));
