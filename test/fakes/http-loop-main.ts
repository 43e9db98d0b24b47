/**
 * A client that keeps asking: `bun http-loop-main.ts URL MAX`, run in a client namespace. Sends
 * one GET at a time on a new connection (each a new flow through the router), each with a
 * 1 s timeout, until a line arrives on stdin or MAX requests were sent; prints "started" after
 * the first answer, then one JSON line: how many were sent, how many failed (with the first
 * errors) and which node answered how often.
 */
const [url, maxText] = process.argv.slice(2);
const max = Number(maxText);
if (!url || !max) {
  console.error('usage: http-loop-main.ts URL MAX');
  process.exit(2);
}
let stop = false;
void (async () => {
  for await (const _ of Bun.stdin.stream()) {
    stop = true;
    break;
  }
})();
let sent = 0;
let failed = 0;
const errors: string[] = [];
const byNode: Record<string, number> = {};
while (!stop && sent < max) {
  sent++;
  try {
    const res = await fetch(url, { headers: { connection: 'close' }, signal: AbortSignal.timeout(1000), keepalive: false });
    const body = await res.text();
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    byNode[body] = (byNode[body] ?? 0) + 1;
    if (sent - failed === 1) console.log('started');
  } catch (e) {
    failed++;
    if (errors.length < 10) errors.push(`#${sent} at ${new Date().toISOString()}: ${e instanceof Error ? e.message : String(e)}`);
  }
  await Bun.sleep(20);
}
console.log(JSON.stringify({ sent, failed, errors, byNode }));
export {};
