/**
 * A client probing at a fixed pace: `bun http-probe-main.ts URL PERIOD_MS`, run in a client
 * namespace. Starts one GET every PERIOD_MS on a new connection (each a new flow through the
 * router, so ECMP spreads them over the next hops), each with a 1 s timeout, whether or not the
 * previous ones answered; prints "started" after the first answer. A line on stdin ends it: it
 * waits for the probes in flight and prints one JSON line: how many were sent and failed, when
 * each failed one was sent (epoch ms) and which node answered how often.
 */
const [url, periodText] = process.argv.slice(2);
const period = Number(periodText);
if (!url || !period) {
  console.error('usage: http-probe-main.ts URL PERIOD_MS');
  process.exit(2);
}
let sent = 0;
let answered = 0;
const failedAt: number[] = [];
const errors: string[] = [];
const byNode: Record<string, number> = {};
const inFlight = new Set<Promise<void>>();

async function probe(): Promise<void> {
  const at = Date.now();
  try {
    const res = await fetch(url!, { headers: { connection: 'close' }, signal: AbortSignal.timeout(1000), keepalive: false });
    const body = await res.text();
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    byNode[body] = (byNode[body] ?? 0) + 1;
    if (++answered === 1) console.log('started');
  } catch (e) {
    failedAt.push(at);
    if (errors.length < 10) errors.push(`${new Date(at).toISOString()}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

const timer = setInterval(() => {
  sent++;
  const p = probe();
  inFlight.add(p);
  void p.finally(() => inFlight.delete(p));
}, period);

for await (const _ of Bun.stdin.stream()) break;
clearInterval(timer);
await Promise.all(inFlight);
console.log(JSON.stringify({ sent, failed: failedAt.length, failedAt, errors, byNode }));
export {};
