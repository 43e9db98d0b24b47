/**
 * Forwards connections on a Unix socket to a TCP address, for a service that listens only inside
 * a network namespace of a test's own (the LXD daemon's HTTPS endpoint): run it in that
 * namespace (`nsenter -t PID -n bun unix-to-tcp-forwarder-main.ts SOCKET HOST:PORT`), connect to
 * the socket from anywhere on the machine. Nothing is routed; TLS passes through untouched.
 * Prints "listening" once ready.
 */
import { connect, createServer } from 'node:net';

const [socketPath, target] = process.argv.slice(2);
const m = /^(.+):(\d+)$/.exec(target ?? '');
if (!socketPath || !m) {
  console.error('usage: unix-to-tcp-forwarder-main.ts UNIX_SOCKET HOST:PORT');
  process.exit(2);
}
createServer((client) => {
  const upstream = connect(Number(m[2]), m[1]!);
  client.pipe(upstream);
  upstream.pipe(client);
  const close = () => (client.destroy(), upstream.destroy());
  for (const s of [client, upstream]) s.on('error', close).on('close', close);
}).listen(socketPath, () => console.log(`listening on ${socketPath} -> ${target}`));
