import { afterEach, describe, expect, test } from 'bun:test';
import {
  type BgpRouter,
  createBgpLab,
  kernelRoutes,
  NODES4,
  NODES6,
  ROUTER4,
  ROUTER6,
  type RouterKind,
  SPEAKER4,
  SPEAKER6,
  speakerConfig,
  startRouter,
} from '../harness/bgp-lab.ts';
import { SpeakerProcess } from '../harness/bgp-speaker-process.ts';
import { eventually, eventuallyEqual } from '../harness/eventually.ts';
import type { NetnsLab } from '../harness/netns.ts';

/**
 * The speaker against real routers, each in its own network namespace on a shared subnet with
 * the speaker's (test/harness/bgp-lab.ts). The speaker runs as a child process under `ip netns
 * exec` (Bun cannot enter a namespace in-process), so nothing of this touches the machine's
 * own network namespace, and a SIGKILL of it is a real crash for graceful restart.
 */
let cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c().catch((e) => console.error('cleanup:', e));
  cleanups = [];
});

async function setUp(kind: RouterKind, label: string, o: { gracefulRestart?: boolean; password?: string }) {
  const lab: NetnsLab = await createBgpLab(label, kind);
  cleanups.push(() => lab.destroy());
  const router: BgpRouter = await startRouter(lab, kind, o);
  cleanups.push(() => router.stop());
  const config = speakerConfig({ ...(o.gracefulRestart ? { gracefulRestartSeconds: 120 } : {}), ...(o.password ? { password: o.password } : {}) });
  const startSpeaker = async (name: string) => {
    const s = await SpeakerProcess.start(lab, 'spk', config, name);
    cleanups.push(() => s.stop());
    return s;
  };
  return { lab, router, startSpeaker };
}

/** Routes reduced to the prefixes under test (eventuallyEqual compares them in any order). */
function underTest(all: Iterable<[string, string[]]>, family: 4 | 6): Record<string, string[]> {
  return Object.fromEntries([...all].filter(([p]) => p.startsWith(family === 4 ? '203.0.113.' : '2001:db8:1')));
}

/** The router's BGP table. */
const table = async (router: BgpRouter, family: 4 | 6) => underTest(await router.paths(family), family);
/** The router's kernel routes. */
const kernel = async (lab: NetnsLab, family: 4 | 6) => underTest(await kernelRoutes(lab, 'rtr', family), family);

const KINDS: RouterKind[] = ['gobgp', 'bird', 'frr'];

for (const kind of KINDS) {
  describe(`BGP speaker with ${kind} as the peer`, () => {
    test('IPv4 and IPv6 prefixes with third-party next hops appear, ECMP through ADD-PATH, and go when withdrawn (TCP-MD5 on)', async () => {
      const { lab, router, startSpeaker } = await setUp(kind, `bgp-${kind}`, { password: 'edge-ccm-md5' });
      const speaker = await startSpeaker('speaker');
      await speaker.established(ROUTER4);
      await speaker.established(ROUTER6);
      await speaker.announce([
        { prefix: '203.0.113.0/26', nextHops: [NODES4[0]!] },
        { prefix: '203.0.113.64/26', nextHops: [NODES4[1]!], communities: ['64512:100'] },
        { prefix: '203.0.113.200/32', nextHops: NODES4 },
        { prefix: '2001:db8:100::/64', nextHops: [NODES6[0]!] },
        { prefix: '2001:db8:101::/64', nextHops: [NODES6[1]!] },
        { prefix: '2001:db8:1ff::200/128', nextHops: NODES6 },
      ]);
      await eventuallyEqual(`${kind} IPv4 table`, () => table(router, 4), { '203.0.113.0/26': [NODES4[0]!], '203.0.113.200/32': NODES4, '203.0.113.64/26': [NODES4[1]!] });
      await eventuallyEqual(`${kind} IPv6 table`, () => table(router, 6), { '2001:db8:100::/64': [NODES6[0]!], '2001:db8:101::/64': [NODES6[1]!], '2001:db8:1ff::200/128': NODES6 });
      if (kind !== 'gobgp') {
        // One kernel route per prefix, the ADD-PATH paths merged into ECMP next hops.
        await eventuallyEqual(`${kind} kernel IPv4 routes`, () => kernel(lab, 4), { '203.0.113.0/26': [NODES4[0]!], '203.0.113.200/32': NODES4, '203.0.113.64/26': [NODES4[1]!] });
        await eventuallyEqual(`${kind} kernel IPv6 routes`, () => kernel(lab, 6), { '2001:db8:100::/64': [NODES6[0]!], '2001:db8:101::/64': [NODES6[1]!], '2001:db8:1ff::200/128': NODES6 });
      }
      const stats = await speaker.stats();
      expect(stats.peers.map((p) => [p.address, p.negotiated?.addPath])).toEqual([
        [ROUTER4, [4]],
        [ROUTER6, [6]],
      ]);
      // A node leaves one ECMP set, one prefix of each family is withdrawn.
      await speaker.announce([
        { prefix: '203.0.113.0/26', nextHops: [NODES4[0]!] },
        { prefix: '203.0.113.200/32', nextHops: [NODES4[0]!, NODES4[2]!] },
        { prefix: '2001:db8:100::/64', nextHops: [NODES6[0]!] },
        { prefix: '2001:db8:1ff::200/128', nextHops: [NODES6[1]!, NODES6[2]!] },
      ]);
      await eventuallyEqual(`${kind} IPv4 table after withdrawals`, () => table(router, 4), { '203.0.113.0/26': [NODES4[0]!], '203.0.113.200/32': [NODES4[0]!, NODES4[2]!] });
      await eventuallyEqual(`${kind} IPv6 table after withdrawals`, () => table(router, 6), { '2001:db8:100::/64': [NODES6[0]!], '2001:db8:1ff::200/128': [NODES6[1]!, NODES6[2]!] });
      if (kind !== 'gobgp') await eventuallyEqual(`${kind} kernel IPv4 routes after withdrawals`, () => kernel(lab, 4), { '203.0.113.0/26': [NODES4[0]!], '203.0.113.200/32': [NODES4[0]!, NODES4[2]!] });
      await speaker.announce([]);
      await eventuallyEqual(`${kind} IPv4 table empty`, () => table(router, 4), {});
      await eventuallyEqual(`${kind} IPv6 table empty`, () => table(router, 6), {});
      const after = await speaker.stats();
      expect(after.peers.map(({ address, state, flaps, lastError }) => ({ address, state, flaps, lastError }))).toEqual([
        { address: ROUTER4, state: 'established', flaps: 0, lastError: undefined },
        { address: ROUTER6, state: 'established', flaps: 0, lastError: undefined },
      ]);
    }, 120_000);

    test('graceful restart: routes stay while the speaker is down, stale ones go after re-announce and End-of-RIB', async () => {
      const { lab, router, startSpeaker } = await setUp(kind, `bgpgr-${kind}`, { gracefulRestart: true });
      const first = await startSpeaker('speaker-1');
      await first.established(ROUTER4);
      await first.established(ROUTER6);
      const before = [
        { prefix: '203.0.113.10/32', nextHops: NODES4 },
        { prefix: '203.0.113.11/32', nextHops: [NODES4[0]!] },
        { prefix: '2001:db8:1ff::10/128', nextHops: [NODES6[0]!] },
        { prefix: '2001:db8:1ff::11/128', nextHops: [NODES6[1]!] },
      ];
      await first.announce(before);
      const full4 = { '203.0.113.10/32': NODES4, '203.0.113.11/32': [NODES4[0]!] };
      const full6 = { '2001:db8:1ff::10/128': [NODES6[0]!], '2001:db8:1ff::11/128': [NODES6[1]!] };
      await eventuallyEqual(`${kind} IPv4 table`, () => table(router, 4), full4);
      await eventuallyEqual(`${kind} IPv6 table`, () => table(router, 6), full6);
      expect((await first.stats()).peers.every((p) => p.negotiated?.gracefulRestart)).toBe(true);
      await first.kill();
      await eventually(`${kind} to see the sessions down`, async () => !(await router.sessionUp(SPEAKER4)) && !(await router.sessionUp(SPEAKER6)));
      // Down, yet forwarding goes on: the router keeps the routes (stale) for the restart time.
      expect(await table(router, 4)).toEqual(full4);
      expect(await table(router, 6)).toEqual(full6);
      if (kind !== 'gobgp') expect(await kernel(lab, 4)).toEqual(full4);
      // The new speaker announces less: what it no longer announces goes once its End-of-RIB is in.
      const second = await startSpeaker('speaker-2');
      await second.announce([before[0]!, before[2]!]);
      await second.established(ROUTER4);
      await second.established(ROUTER6);
      await eventuallyEqual(`${kind} IPv4 table after the restart`, () => table(router, 4), { '203.0.113.10/32': NODES4 });
      await eventuallyEqual(`${kind} IPv6 table after the restart`, () => table(router, 6), { '2001:db8:1ff::10/128': [NODES6[0]!] });
      if (kind !== 'gobgp') await eventuallyEqual(`${kind} kernel IPv4 routes after the restart`, () => kernel(lab, 4), { '203.0.113.10/32': NODES4 });
    }, 120_000);
  });
}
