/**
 * probeAddress for many addresses at once, in a process of its own inside a lab namespace
 * (`ip netns exec NS bun test/fakes/probe-main.ts JSON`; Bun cannot enter a namespace itself).
 * JSON: {"interface":"d0","addresses":[...],"count":2,"intervalMs":200,"abort":[...addresses aborted after abortAfterMs],"abortAfterMs":100}.
 * Prints one JSON line: each address's result, and the namespace's packet sockets
 * (/proc/net/packet) counted while the probes ran (sampledAfterMs after they started) and after
 * they all ended.
 */
import { readFileSync } from 'node:fs';
import { probeAddress, type ProbeResult } from '../../src/net/l2/probe.ts';

const request = JSON.parse(process.argv[2]!) as { interface: string; addresses: string[]; count: number; intervalMs: number; abort?: string[]; abortAfterMs?: number; sampledAfterMs: number };
const packetSockets = () => readFileSync('/proc/net/packet', 'utf8').trim().split('\n').length - 1;

const aborts = new Map((request.abort ?? []).map((a) => [a, new AbortController()]));
const started = performance.now();
const results = Promise.all(request.addresses.map(async (address): Promise<[string, ProbeResult & { ms: number } | { error: string }]> => {
  try {
    const signal = aborts.get(address)?.signal;
    const result = await probeAddress(request.interface, address, { count: request.count, intervalMs: request.intervalMs, ...(signal ? { signal } : {}) });
    return [address, { ...result, ms: Math.round(performance.now() - started) }];
  } catch (e) {
    return [address, { error: (e as Error).message }];
  }
}));
if (aborts.size) setTimeout(() => aborts.forEach((a) => a.abort()), request.abortAfterMs ?? 0);
await Bun.sleep(request.sampledAfterMs);
const whileProbing = packetSockets();
const byAddress = Object.fromEntries(await results);
console.log(JSON.stringify({ results: byAddress, packetSockets: { whileProbing, after: packetSockets() } }));
