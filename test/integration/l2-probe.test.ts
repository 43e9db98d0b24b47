import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import { NetnsLab, mustRun } from '../harness/netns.ts';

/**
 * probeAddress with real frames: many addresses probed at once on one interface, some held by
 * the host at the other end of a veth pair (its kernel answers ARP probes and DAD solicitations
 * for its own addresses). The probes of one interface and family share one socket and its
 * doorbell (issue 38: a socket per probe, each polled every 10 ms, cost the speaker 10.9 CPU-ms
 * per service added); each still finds only its own holder.
 */
const MAIN = join(import.meta.dir, '..', 'fakes', 'probe-main.ts');
const HELD_V4 = '198.51.100.77';
const HELD_V6 = '2001:db8:77::77';
const FREE_V4 = Array.from({ length: 20 }, (_, i) => `198.51.100.${100 + i}`);
const FREE_V6 = Array.from({ length: 4 }, (_, i) => `2001:db8:77::${100 + i}`);

let lab: NetnsLab;
let peerMac: string;

beforeAll(async () => {
  lab = NetnsLab.create('l2probe');
  await lab.addNamespace('host');
  await lab.ip('host', 'link', 'add', 'd0', 'type', 'veth', 'peer', 'name', 'p0');
  await lab.ip('host', 'link', 'set', 'd0', 'up');
  await lab.ip('host', 'link', 'set', 'p0', 'up');
  await lab.ip('host', 'addr', 'add', `${HELD_V4}/24`, 'dev', 'p0');
  await lab.ip('host', 'addr', 'add', `${HELD_V6}/64`, 'dev', 'p0', 'nodad');
  peerMac = JSON.parse(await lab.ip('host', '-j', 'link', 'show', 'p0'))[0].address;
}, 60_000);

afterAll(async () => {
  await lab?.destroy();
});

type Result = { holder?: string; transient?: string; ms?: number; error?: string };
interface Outcome {
  results: Record<string, Result>;
  packetSockets: { whileProbing: number; after: number };
  again?: Record<string, Result>;
  packetSocketsAfterAgain?: number;
}

async function probe(request: Record<string, unknown>): Promise<Outcome> {
  return JSON.parse(await mustRun(['ip', 'netns', 'exec', lab.ns('host'), process.execPath, MAIN, JSON.stringify(request)], 60_000));
}

test('25 addresses probed at once: the two held ones name the holder, the others are free; one socket and its doorbell per family, none left after', async () => {
  const addresses = [HELD_V4, ...FREE_V4, HELD_V6, ...FREE_V6];
  // Sampled well before the first verdict (a holder's second answer, 500 ms in).
  const outcome = await probe({ interface: 'd0', addresses, count: 2, intervalMs: 500, sampledAfterMs: 150 });
  expect(outcome.results[HELD_V4]).toMatchObject({ holder: peerMac });
  expect(outcome.results[HELD_V6]).toMatchObject({ holder: peerMac });
  for (const address of [...FREE_V4, ...FREE_V6]) expect({ address, ...outcome.results[address], ms: undefined }).toEqual({ address, ms: undefined });
  // Two probes 500 ms apart, the second listened to for one interval: a free address is known free after 1 s, not before.
  for (const address of FREE_V4) expect(outcome.results[address]!.ms).toBeGreaterThanOrEqual(990);
  expect(outcome.packetSockets).toEqual({ whileProbing: 4, after: 0 });
}, 60_000);

test('an aborted probe ends at once with nothing found, the others run on; the last one out closes the socket', async () => {
  // The holder's verdict comes with its second answer, 1 s in: sampled before it.
  const outcome = await probe({ interface: 'd0', addresses: [HELD_V4, FREE_V4[0]], count: 3, intervalMs: 1000, abort: [FREE_V4[0]], abortAfterMs: 100, sampledAfterMs: 200 });
  expect({ ...outcome.results[FREE_V4[0]!], ms: undefined }).toEqual({ ms: undefined });
  // Ended by the abort, not by its own three seconds of probing.
  expect(outcome.results[FREE_V4[0]!]!.ms).toBeLessThan(3000);
  expect(outcome.results[HELD_V4]).toMatchObject({ holder: peerMac });
  expect(outcome.packetSockets).toEqual({ whileProbing: 2, after: 0 });
}, 60_000);

test('an interface that does not exist: the probe is refused, naming it', async () => {
  const outcome = await probe({ interface: 'nosuch0', addresses: [FREE_V4[0]], count: 1, intervalMs: 100, sampledAfterMs: 0 });
  expect(outcome.results[FREE_V4[0]!]!.error).toContain('nosuch0');
  expect(outcome.packetSockets.after).toBe(0);
}, 60_000);

test('the link goes down under the probes, the process alive: every probe on it fails naming the interface, the socket is closed; up again, a new probe finds the holder', async () => {
  const outcome = await probe({ interface: 'd0', addresses: [HELD_V4, FREE_V4[0], FREE_V4[1]], count: 3, intervalMs: 500, linkDownAfterMs: 200, sampledAfterMs: 100, again: [HELD_V4, FREE_V4[0]] });
  for (const address of [HELD_V4, FREE_V4[0]!, FREE_V4[1]!]) expect(outcome.results[address]!.error).toContain('d0');
  expect(outcome.packetSockets).toEqual({ whileProbing: 2, after: 0 });
  expect(outcome.again![HELD_V4]).toMatchObject({ holder: peerMac });
  expect({ ...outcome.again![FREE_V4[0]!], ms: undefined }).toEqual({ ms: undefined });
  expect(outcome.packetSocketsAfterAgain).toBe(0);
}, 60_000);
