/**
 * Builds bench/heap-main.ts (edge-ccm with a heap census) into dist/edge-ccm-heap, compiled as
 * edge-ccm is (scripts/compile.ts), then, given files, summarises what they hold:
 *
 *   bun bench/heap-census.ts build
 *   bun bench/footprint.ts ... --variant=heap:dist/edge-ccm-heap::EDGE_CCM_HEAP_DIR=/tmp/h,EDGE_CCM_HEAP_SNAPSHOT=1
 *   bun bench/heap-census.ts summary /tmp/h/heap-PID-120s.json [/tmp/h/snapshot-PID-120s.json]
 *
 * The summary: heap and process sizes, the most numerous object types (heapStats), and from a
 * snapshot the classes holding the most bytes (shallow sizes, as JSC's snapshot gives them).
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { compileExecutable } from '../scripts/compile.ts';

const ROOT = resolve(import.meta.dir, '..');
const [verb, ...files] = process.argv.slice(2);
const MiB = (n: number) => (n / 1048576).toFixed(2);

if (verb === 'build') {
  const out = join(ROOT, 'dist/edge-ccm-heap');
  await compileExecutable(join(ROOT, 'bench/heap-main.ts'), out);
} else if (verb === 'summary') {
  const stats = JSON.parse(readFileSync(files[0]!, 'utf8')) as { memoryUsage: NodeJS.MemoryUsage; heapStats: { heapSize: number; heapCapacity: number; extraMemorySize: number; objectCount: number; objectTypeCounts: Record<string, number> } };
  const m = stats.memoryUsage;
  const h = stats.heapStats;
  console.log(`rss ${MiB(m.rss)} MiB, heapUsed ${MiB(m.heapUsed)} MiB, heapTotal ${MiB(m.heapTotal)} MiB, external ${MiB(m.external)} MiB, arrayBuffers ${MiB(m.arrayBuffers)} MiB`);
  console.log(`JSC heap: size ${MiB(h.heapSize)} MiB, capacity ${MiB(h.heapCapacity)} MiB, extra ${MiB(h.extraMemorySize)} MiB, ${h.objectCount} objects`);
  console.log('most numerous object types:');
  for (const [type, count] of Object.entries(h.objectTypeCounts).sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  ${count}\t${type}`);
  if (files[1]) {
    const snap = JSON.parse(readFileSync(files[1], 'utf8')) as { nodes: number[]; nodeClassNames: string[] };
    // JSC's snapshot nodes: [id, size, classNameIndex, flags, (labelIndex, cellAddress, wrappedAddress with version 2)]...
    const stride = snap.nodes.length % 7 === 0 && (snap as { version?: number }).version === 2 ? 7 : 4;
    const byClass = new Map<string, { count: number; bytes: number }>();
    let total = 0;
    for (let i = 0; i < snap.nodes.length; i += stride) {
      const name = snap.nodeClassNames[snap.nodes[i + 2]!]!;
      const size = snap.nodes[i + 1]!;
      total += size;
      const e = byClass.get(name) ?? { count: 0, bytes: 0 };
      e.count++;
      e.bytes += size;
      byClass.set(name, e);
    }
    console.log(`snapshot: ${MiB(total)} MiB in ${snap.nodes.length / stride} cells; the classes holding the most:`);
    for (const [name, e] of [...byClass].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 30)) console.log(`  ${MiB(e.bytes)} MiB\t${e.count}\t${name}`);
  }
} else {
  throw new Error('usage: bun bench/heap-census.ts build | summary HEAP.json [SNAPSHOT.json]');
}
