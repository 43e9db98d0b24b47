/**
 * Stands in for kube-proxy on a node in a network test: an HTTP server on PORT at each ADDRESS
 * (put on the node's loopback by the test) that answers with NAME, so the client sees which node
 * it reached. `bun node-listener-main.ts NAME PORT ADDRESS...`; prints "listening" when bound.
 */
const [name, port, ...addresses] = process.argv.slice(2);
if (!name || !port || addresses.length === 0) {
  console.error('usage: node-listener-main.ts NAME PORT ADDRESS...');
  process.exit(2);
}
for (const hostname of addresses) Bun.serve({ hostname, port: Number(port), fetch: () => new Response(name) });
console.log('listening');
