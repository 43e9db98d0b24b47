/**
 * What the runtime's monitorEventLoopDelay histogram (node:perf_hooks; prom-client built its
 * nodejs_eventloop_lag_{min,max,...}_seconds on it) reports for a known block: for each sampling
 * period, a quiet 350 ms, one busy loop of the given length, a quiet 350 ms, then the histogram's
 * max, p99, mean and sample count. Run under Bun (`bun bench/event-loop-delay-histogram.ts`) or
 * Node (the same file, types stripped) to compare.
 *
 * Usage: bun bench/event-loop-delay-histogram.ts [--periods=10,20,100] [--blocks=30,50,150,300]
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';

const argv = process.argv.slice(2);
const list = (name: string, dflt: number[]) => (argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3).split(',').map(Number) ?? dflt);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const block = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};
const msOf = (ns: number) => (ns / 1e6).toFixed(1);

console.log('| period ms | block ms | max ms | p99 ms | mean ms | samples |');
console.log('|---|---|---|---|---|---|');
for (const period of list('periods', [10, 20, 100])) {
  for (const ms of list('blocks', [30, 50, 150, 300])) {
    const histogram = monitorEventLoopDelay({ resolution: period });
    histogram.enable();
    await sleep(350);
    block(ms);
    await sleep(350);
    histogram.disable();
    console.log(`| ${period} | ${ms} | ${msOf(histogram.max)} | ${msOf(histogram.percentile(99))} | ${msOf(histogram.mean)} | ${histogram.count} |`);
  }
}
