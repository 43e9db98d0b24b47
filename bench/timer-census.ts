/**
 * A --preload for `edge-ccm speaker` run from source (bench/speaker-idle.ts --census): counts,
 * by call site, the timers (setTimeout, setInterval), microtasks and UDP 'message' listeners, how
 * often each fired and the milliseconds spent in it. SIGUSR2 appends the counts since the last
 * SIGUSR2 to $CENSUS_OUT and zeroes them. A wrapper to hand the bench as the variant's binary:
 *
 *   #!/bin/sh
 *   exec bun --preload /PATH/bench/timer-census.ts /PATH/src/main.ts "$@"
 */
import { appendFileSync } from 'node:fs';
const out = process.env.CENSUS_OUT ?? '/tmp/census.txt';
type Row = { fires: number; ms: number; created: number };
const rows = new Map<string, Row>();
function site(): string {
  const lines = (new Error().stack ?? '').split('\n').slice(3, 7).map((l) => l.trim().replace(/^at /, '').replace(/\(.*\/(src|node_modules)\//, '($1/'));
  return lines.join(' < ');
}
function row(k: string) { let r = rows.get(k); if (!r) rows.set(k, (r = { fires: 0, ms: 0, created: 0 })); return r; }
function wrap(kind: string, orig: any) {
  return function (this: any, fn: any, ms?: number, ...rest: any[]) {
    if (typeof fn !== 'function') return orig.call(this, fn, ms, ...rest);
    const k = `${kind}(${ms ?? 0}) ${site()}`;
    const r = row(k); r.created++;
    return orig.call(this, function (this: any, ...a: any[]) { const t = performance.now(); try { return fn.apply(this, a); } finally { r.fires++; r.ms += performance.now() - t; } }, ms, ...rest);
  };
}
(globalThis as any).setTimeout = wrap('setTimeout', setTimeout);
(globalThis as any).setInterval = wrap('setInterval', setInterval);
const qm = queueMicrotask;
(globalThis as any).queueMicrotask = function (fn: any) { const k = `microtask ${site()}`; const r = row(k); r.created++; return qm(() => { const t = performance.now(); try { fn(); } finally { r.fires++; r.ms += performance.now() - t; } }); };
// dgram 'message' listeners
import dgram from 'node:dgram';
const proto = (dgram as any).Socket.prototype;
const origOn = proto.on;
proto.on = function (this: any, ev: string, fn: any) {
  if (ev === 'message' && typeof fn === 'function') { const r = row(`dgram message ${site()}`); const g = function (this: any, ...a: any[]) { const t = performance.now(); try { return fn.apply(this, a); } finally { r.fires++; r.ms += performance.now() - t; } }; return origOn.call(this, ev, g); }
  return origOn.call(this, ev, fn);
};
let since = performance.now();
process.on('SIGUSR2', () => {
  const secs = (performance.now() - since) / 1000;
  const list = [...rows].filter(([, r]) => r.fires || r.created).sort((a, b) => b[1].ms - a[1].ms);
  const txt = `=== census pid ${process.pid} over ${secs.toFixed(1)} s, ${new Date().toISOString()}\n` + list.map(([k, r]) => `${r.fires}\tfires\t${r.created}\tcreated\t${r.ms.toFixed(1)}\tms\t${k}`).join('\n') + '\n';
  appendFileSync(out, txt);
  for (const r of rows.values()) { r.fires = 0; r.ms = 0; r.created = 0; } since = performance.now();
});
