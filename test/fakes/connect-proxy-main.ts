/**
 * The API server's way to the kubelets of a lab's nodes (logs, exec): an HTTP CONNECT proxy on a
 * Unix socket, run inside a namespace on the lab's switch (`ip netns exec NS bun
 * connect-proxy-main.ts SOCKET`). kube-apiserver, on the machine's loopback, names the socket in
 * its egress selector (`cluster` traffic, proxyProtocol HTTPConnect, transport uds): each
 * "CONNECT 198.51.100.11:10250" is dialled from inside the lab, so nothing is routed between the
 * machine's namespace and the lab. TLS passes through untouched: the API server checks the
 * kubelet's serving certificate (--kubelet-certificate-authority). Prints "listening" once ready.
 */
import { connect, createServer, type Socket } from 'node:net';

const socketPath = process.argv[2];
if (!socketPath) {
  console.error('usage: connect-proxy-main.ts UNIX_SOCKET');
  process.exit(2);
}

const server = createServer((client: Socket) => {
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) {
      if (head.length > 8192) client.destroy();
      return;
    }
    client.off('data', onData);
    const m = /^CONNECT (\S+):(\d+) HTTP\/1\.[01]\r\n/.exec(head.subarray(0, end).toString('latin1'));
    if (!m) {
      client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const rest = head.subarray(end + 4);
    const upstream = connect(Number(m[2]), m[1]!.replace(/^\[|\]$/g, ''), () => {
      client.write('HTTP/1.1 200 Connection established\r\n\r\n');
      if (rest.length) upstream.write(rest);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    upstream.on('error', (e) => {
      if (!client.destroyed) client.end(`HTTP/1.1 502 Bad Gateway\r\n\r\n${e.message}`);
      close();
    });
    client.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  };
  client.on('data', onData);
});
server.listen(socketPath, () => console.log(`listening on ${socketPath}`));
