/**
 * edge-ccm's command line with a heap census, for bench builds only (bench/heap-census.ts builds
 * it as scripts/build.ts builds edge-ccm): every EDGE_CCM_HEAP_EVERY seconds (default 60) it
 * writes bun:jsc's heapStats() and, with EDGE_CCM_HEAP_SNAPSHOT=1, a JSC heap snapshot into
 * EDGE_CCM_HEAP_DIR, named by the seconds since start. Without EDGE_CCM_HEAP_DIR it is edge-ccm.
 */
import { heapStats } from 'bun:jsc';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.EDGE_CCM_HEAP_DIR;
if (dir) {
  const every = Number(process.env.EDGE_CCM_HEAP_EVERY ?? '60') * 1000;
  const started = performance.now();
  const timer = setInterval(() => {
    const at = Math.round((performance.now() - started) / 1000);
    Bun.gc(true);
    writeFileSync(join(dir, `heap-${process.pid}-${at}s.json`), JSON.stringify({ memoryUsage: process.memoryUsage(), heapStats: heapStats() }));
    if (process.env.EDGE_CCM_HEAP_SNAPSHOT === '1') writeFileSync(join(dir, `snapshot-${process.pid}-${at}s.json`), JSON.stringify(Bun.generateHeapSnapshot()));
  }, every);
  timer.unref();
}
await import('../src/main.ts');
