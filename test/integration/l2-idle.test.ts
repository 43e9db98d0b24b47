import { afterAll, beforeAll, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { eventually } from '../harness/eventually.ts';
import { ResponderChild } from '../harness/l2-responder.ts';
import { NetnsLab, requireTools } from '../harness/netns.ts';
import { ARP_REPLY, ARP_REQUEST } from '../../src/net/l2/arp.ts';
import { BROADCAST_MAC, parseMac } from '../../src/net/l2/ethernet.ts';
import { arpFrame, sendRawFrames } from '../harness/raw-frames.ts';

/**
 * Issue 38: an idle responder is not woken. The responder runs alone in a namespace, announcing
 * an IPv4 address on one end of a veth pair whose other end stays silent; over IDLE_MS nothing
 * reaches its sockets. It must read them zero times and its main thread must barely wake (the
 * polling responder read them every 10 ms: 100 wake-ups a second). A request then sent from the
 * peer end is answered, through a ring. Counts, not speeds: how soon it answers is measured in
 * bench/l2-poll-cost.ts.
 */
const IDLE_MS = 3000;
/**
 * Voluntary context switches of the responder's main thread allowed over IDLE_MS: an idle Bun
 * process with no timer makes about 3 a second (measured), each stats request one or two; the
 * polling responder made about 300.
 */
const MAX_IDLE_SWITCHES = 30;
const ADDRESS = '198.51.100.1';

let lab: NetnsLab;
let responder: ResponderChild;

beforeAll(async () => {
  requireTools({ '/usr/sbin/arping': 'arping' });
  lab = NetnsLab.create('l2idle');
  await lab.addNamespace('host');
  // No IPv6 on these links: nothing of the kernel's own (DAD, MLD, router solicitations) is sent.
  await lab.sysctl('host', { 'net.ipv6.conf.all.disable_ipv6': 1, 'net.ipv6.conf.default.disable_ipv6': 1 });
  await lab.ip('host', 'link', 'add', 'd0', 'type', 'veth', 'peer', 'name', 'p0');
  await lab.ip('host', 'link', 'set', 'd0', 'up');
  await lab.ip('host', 'link', 'set', 'p0', 'up');
  await lab.ip('host', 'addr', 'add', '198.51.100.254/24', 'dev', 'p0');
  responder = await ResponderChild.start(lab, 'host');
}, 60_000);

afterAll(async () => {
  await lab?.destroy();
});

/** Voluntary context switches of a process's main thread: each time it went to sleep waiting. */
function mainThreadSleeps(pid: number): number {
  return Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8'))![1]);
}

const openDescriptors = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

/** The responder's descriptors before it announced anything. */
let descriptorsBefore: number;

/** One ARP request from the peer end: the MACs that answered it. */
async function arpAnswers(): Promise<string[]> {
  const result = await lab.exec('host', ['arping', '-c', '1', '-W', '1', '-i', 'p0', ADDRESS]);
  return [...result.stdout.matchAll(/bytes from ([0-9a-f:]{17}) \(198\.51\.100\.1\)/g)].map((m) => m[1]!);
}

test('idle, the responder reads nothing and is not woken; a request then is answered at once by a ring', async () => {
  descriptorsBefore = openDescriptors(responder.pid);
  expect(await responder.announce({ d0: [ADDRESS] })).toEqual([]);
  await responder.settled(); // the takeover repeats are sent: no timer is left

  const before = (await responder.stats()).stats;
  const sleepsBefore = mainThreadSleeps(responder.pid);
  await Bun.sleep(IDLE_MS);
  const sleeps = mainThreadSleeps(responder.pid) - sleepsBefore;
  const idle = (await responder.stats()).stats;
  expect({ rings: idle.rings - before.rings, answers: idle.answers[ADDRESS] ?? 0 }).toEqual({ rings: 0, answers: before.answers[ADDRESS] ?? 0 });
  expect(sleeps).toBeLessThan(MAX_IDLE_SWITCHES);

  expect(await arpAnswers()).toHaveLength(1);
  const after = (await responder.stats()).stats;
  expect(after.answers[ADDRESS]! - (idle.answers[ADDRESS] ?? 0)).toBe(1);
  expect(after.rings).toBeGreaterThan(idle.rings);
}, 60_000);

const STATION = parseMac('02:00:00:00:00:99')!;
const sendFrames = (frames: Uint8Array[]) => sendRawFrames(lab, 'host', 'p0', frames);
const arpAbout = (operation: number, sender: string, target: string, senderMac = STATION) => arpFrame({ mac: STATION, operation, sender, target, senderMac });

type Stats = Awaited<ReturnType<ResponderChild['stats']>>['stats'];
const martians = (s: Stats) => Object.values(s.martianReasons).reduce((a, b) => a + b, 0);
const quietFigures = (s: Stats) => ({ rings: s.rings, martians: martians(s), malformed: s.malformedFrames });

/** A segment's everyday ARP (requests and replies between other hosts, a martian about them) sent from the peer end: the responder's stats after it, and before. */
async function arpAboutOthers(): Promise<{ before: Stats; after: Stats }> {
  const before = (await responder.stats()).stats;
  await sendFrames([
    ...Array.from({ length: 20 }, (_, i) => arpAbout(ARP_REQUEST, '198.51.100.254', `198.51.100.${50 + i}`)),
    arpAbout(ARP_REPLY, '198.51.100.50', '198.51.100.254'),
    arpAbout(ARP_REQUEST, '198.51.100.254', '198.51.100.77', BROADCAST_MAC),
  ]);
  await Bun.sleep(500);
  return { before, after: (await responder.stats()).stats };
}

test('ARP about other hosts\' addresses never reaches it (the kernel\'s filter, arp-filter.ts); a claim of its address and a malformed frame still do', async () => {
  const { before, after: quiet } = await arpAboutOthers();
  expect(quietFigures(quiet)).toEqual(quietFigures(before));

  // Another station speaking from its address, and a frame of an unknown operation about others.
  await sendFrames([arpAbout(ARP_REPLY, ADDRESS, '198.51.100.254'), Object.assign(arpAbout(ARP_REQUEST, '198.51.100.254', '198.51.100.77'), { 21: 9 })]);
  await eventually('the claim and the malformed frame read', async () => {
    const s = (await responder.stats()).stats;
    return (s.claims[ADDRESS] ?? 0) > (before.claims[ADDRESS] ?? 0) && s.malformedReasons['arp-operation'] > before.malformedReasons['arp-operation'];
  });
  expect((await responder.stats()).stats.rings).toBeGreaterThan(before.rings);
  expect(await arpAnswers()).toHaveLength(1);
}, 60_000);

test('its interface down and up again: the doorbell is watched again and requests answered; the link going down reported once', async () => {
  const errorsBefore = responder.events.length;
  await lab.ip('host', 'link', 'set', 'd0', 'down');
  await lab.ip('host', 'link', 'set', 'd0', 'up');
  await eventually('d0 answering again', async () => (await arpAnswers()).length === 1, 20_000);
  const errors = responder.events.slice(errorsBefore).flatMap((e) => (e.type === 'error' ? [e.message] : []));
  // The frame socket's read reports it (as the polling responder did); the doorbell's own is not repeated.
  expect(errors).toEqual([expect.stringMatching(/^receiving on d0: Network is down/)]);
  // The socket survived the bounce, and with it its filter: ARP about others still wakes nothing.
  const { before, after } = await arpAboutOthers();
  expect(quietFigures(after)).toEqual(quietFigures(before));
}, 60_000);

test('taken away, both sockets of the pair and Bun\'s duplicate of the doorbell are closed', async () => {
  expect(await responder.announce({})).toEqual([]);
  expect(openDescriptors(responder.pid)).toBe(descriptorsBefore);
}, 60_000);
