/**
 * Waits for a starting API server: `bun readyz-watch-main.ts URL PAUSE_MS`, run in the host's
 * namespace before the server starts. GETs URL (certificate not verified, 200 ms timeout) back to
 * back with PAUSE_MS between the end of one request and the start of the next, and on the first
 * 200 prints one JSON line and exits: {"readyAt": Date.now() when the 200 arrived, "polls": n,
 * "meanIntervalMs": mean time between the starts of two polls}. The bootstrap benchmark measures
 * from readyAt, so the poll interval is its resolution.
 */
const [url, pauseText] = process.argv.slice(2);
const pauseMs = Number(pauseText);
if (!url || !(pauseMs >= 0)) {
  console.error('usage: readyz-watch-main.ts URL PAUSE_MS');
  process.exit(2);
}
const firstStart = performance.now();
let lastStart = firstStart;
for (let polls = 1; ; polls++) {
  lastStart = performance.now();
  const ok = await fetch(url, { tls: { rejectUnauthorized: false }, signal: AbortSignal.timeout(200) }).then(async (r) => (await r.arrayBuffer(), r.status === 200), () => false);
  if (ok) {
    const readyAt = Date.now();
    console.log(JSON.stringify({ readyAt, polls, meanIntervalMs: polls > 1 ? Math.round(((lastStart - firstStart) / (polls - 1)) * 10) / 10 : 0 }));
    break;
  }
  await Bun.sleep(pauseMs);
}
export {};
