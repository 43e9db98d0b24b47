import { afterAll, beforeAll, expect, test } from 'bun:test';
import { eventually } from '../harness/eventually.ts';
import { L2Lab, SERVICE_IPV4, SERVICE_IPV6, UNASSIGNED_IPV4, UNASSIGNED_IPV6 } from '../harness/l2-lab.ts';
import { ResponderChild } from '../harness/l2-responder.ts';
import { L2Prober, type ProbeRound } from '../soak/l2-prober.ts';

/**
 * The soak's L2 prober (test/soak/l2-prober-main.ts) on real frames: the L2 lab's switch, the
 * product's responder in n1 and n2, the prober in the client. It must see two MACs in one round
 * when two stations answer the same probe (the soak's "never two MACs" invariant rests on it),
 * one when one does, none for an address nobody answers, for IPv4 (ARP) and IPv6 (NDP).
 */
const ADDRESSES = [SERVICE_IPV4, SERVICE_IPV6, UNASSIGNED_IPV4, UNASSIGNED_IPV6];
let site: L2Lab;
let prober: L2Prober | undefined;
const rounds: ProbeRound[] = [];

beforeAll(async () => {
  site = await L2Lab.build();
}, 120_000);

afterAll(async () => {
  await prober?.stop();
  await site?.destroy();
});

test('each probe round names the MACs that answered that probe: two, one, or none', async () => {
  const n1 = await ResponderChild.start(site.lab, 'n1');
  const n2 = await ResponderChild.start(site.lab, 'n2');
  for (const r of [n1, n2]) {
    expect(await r.announce({ eth0: [SERVICE_IPV4, SERVICE_IPV6] })).toEqual([]);
    await r.settled();
  }
  let exited: string | undefined;
  prober = new L2Prober(site.lab, 'client', 'eth0', 100, ADDRESSES, (r) => rounds.push(r), (m) => (exited = m));
  const mac = (node: 'n1' | 'n2') => site.nodes[node].lanMac;
  const both = [mac('n1'), mac('n2')].sort();
  // Rounds are printed 8 periods after they were sent: about a second before the first.
  await eventually('five rounds with both answers', () => {
    if (exited) throw new Error(exited);
    return rounds.filter((r) => r.answers.get(SERVICE_IPV4)?.length === 2).length >= 5;
  }, 30_000);
  const doubled = rounds.filter((r) => r.answers.get(SERVICE_IPV4)?.length === 2);
  for (const r of doubled.slice(0, 5)) {
    expect([...r.answers.get(SERVICE_IPV4)!]).toEqual(both);
    expect([...r.answers.get(SERVICE_IPV6)!]).toEqual(both);
    expect(r.answers.get(UNASSIGNED_IPV4)).toEqual([]);
    expect(r.answers.get(UNASSIGNED_IPV6)).toEqual([]);
  }
  // Rounds are numbered without a gap and sent about a period apart.
  const numbers = rounds.map((r) => r.round);
  expect(numbers).toEqual(numbers.map((_, i) => numbers[0]! + i));

  // n2 stops answering: from then on each round names n1 only.
  expect(await n2.announce({ eth0: [] })).toEqual([]);
  const cut = rounds.length;
  await eventually('five rounds answered by n1 alone', () => rounds.slice(cut).filter((r) => r.answers.get(SERVICE_IPV4)?.length === 1).length >= 5, 30_000);
  const single = rounds.slice(cut).filter((r) => r.answers.get(SERVICE_IPV4)?.length === 1).slice(-3);
  for (const r of single) {
    expect(r.answers.get(SERVICE_IPV4)).toEqual([mac('n1')]);
    expect(r.answers.get(SERVICE_IPV6)).toEqual([mac('n1')]);
  }
  console.log(`prober: ${rounds.length} rounds, ${doubled.length} with both answers before n2 stopped`);
}, 120_000);
