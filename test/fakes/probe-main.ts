/**
 * probeAddress for many addresses at once, in a process of its own inside a lab namespace
 * (`ip netns exec NS bun test/fakes/probe-main.ts JSON`; Bun cannot enter a namespace itself).
 * JSON: {"interface":"d0","addresses":[...],"count":2,"intervalMs":200,"sampledAfterMs":150,
 *   "abort":[...addresses aborted after abortAfterMs],"abortAfterMs":100,
 *   "linkDownAfterMs":150 (the interface set down then, with this process alive),
 *   "again":[...addresses probed once the first round ended and the interface is up again]}.
 * Prints one JSON line: each address's result (and the second round's), and the namespace's
 * packet sockets (/proc/net/packet) counted while the probes ran (sampledAfterMs after they
 * started) and left after they all ended.
 */
import { readFileSync } from 'node:fs';
import { probeAddress, type ProbeResult } from '../../src/net/l2/probe.ts';

interface Request { interface: string; addresses: string[]; count: number; intervalMs: number; sampledAfterMs: number; abort?: string[]; abortAfterMs?: number; linkDownAfterMs?: number; again?: string[] }
type Outcome = (ProbeResult & { ms: number }) | { error: string };

const request = JSON.parse(process.argv[2]!) as Request;
const packetSockets = () => readFileSync('/proc/net/packet', 'utf8').trim().split('\n').length - 1;
/**
 * The packet sockets left once the probes ended: counted again for up to a second until none is
 * (a doorbell whose reader failed, the link gone down, has Bun close its duplicate a turn of the
 * event loop after it is closed; a socket really left open stays counted).
 */
async function packetSocketsLeft(): Promise<number> {
  const until = performance.now() + 1000;
  while (packetSockets() > 0 && performance.now() < until) await Bun.sleep(5);
  return packetSockets();
}
const link = (state: 'up' | 'down') => {
  const r = Bun.spawnSync(['ip', 'link', 'set', 'dev', request.interface, state]);
  if (r.exitCode !== 0) throw new Error(`ip link set ${request.interface} ${state}: ${r.stderr.toString()}`);
};

function probeAll(addresses: string[], aborts = new Map<string, AbortController>()): Promise<Record<string, Outcome>> {
  const started = performance.now();
  return Promise.all(addresses.map(async (address): Promise<[string, Outcome]> => {
    try {
      const signal = aborts.get(address)?.signal;
      const result = await probeAddress(request.interface, address, { count: request.count, intervalMs: request.intervalMs, ...(signal ? { signal } : {}) });
      return [address, { ...result, ms: Math.round(performance.now() - started) }];
    } catch (e) {
      return [address, { error: (e as Error).message }];
    }
  })).then(Object.fromEntries);
}

const aborts = new Map((request.abort ?? []).map((a) => [a, new AbortController()]));
const results = probeAll(request.addresses, aborts);
if (aborts.size) setTimeout(() => aborts.forEach((a) => a.abort()), request.abortAfterMs ?? 0);
if (request.linkDownAfterMs !== undefined) setTimeout(() => link('down'), request.linkDownAfterMs);
await Bun.sleep(request.sampledAfterMs);
const whileProbing = packetSockets();
const outcome: Record<string, unknown> = { results: await results, packetSockets: { whileProbing, after: await packetSocketsLeft() } };
if (request.again) {
  link('up');
  outcome.again = await probeAll(request.again);
  outcome.packetSocketsAfterAgain = await packetSocketsLeft();
}
console.log(JSON.stringify(outcome));
