import { describe, expect, test } from 'bun:test';
import { ipToBytes, parseIP } from '../ip.ts';
import { unsolicitedAdvertisementFrame } from './answer.ts';
import { ARP_REQUEST, arpProbeFrame, arpReplyFrame } from './arp.ts';
import { parseMac } from './ethernet.ts';
import { neighborSolicitationFrame } from './ndp.ts';
import { probeAnswer } from './probe.ts';

const OURS = parseMac('02:00:00:00:00:0a')!;
const FOREIGN = parseMac('02:00:00:00:00:77')!;
const bytes = (text: string) => ipToBytes(parseIP(text)!);

/** The MAC of the station `frame` shows holding `address`, as a probe of that address reads it (probe.ts hands an answer to the probes of its address). */
function probeAnswerHolder(frame: Uint8Array, address: string, ourMac: Uint8Array): string | undefined {
  const answer = probeAnswer(frame, ourMac);
  return answer && Buffer.from(answer.address).equals(Buffer.from(bytes(address))) ? answer.mac : undefined;
}

describe('probeAnswer: which frames show another station holding a probed address', () => {
  const v4 = '198.51.100.201';
  const v6 = '2001:db8:1::201';
  // Our probe, and the foreign host's answer to it (as Linux sends it: to us, from the address).
  const reply = arpReplyFrame({ operation: ARP_REQUEST, senderMac: OURS, senderIp: new Uint8Array(4), targetMac: new Uint8Array(6), targetIp: bytes(v4) }, FOREIGN);

  test('an ARP reply from the address names the MAC; for another address, or from our own MAC, nothing', () => {
    expect(probeAnswerHolder(reply, v4, OURS)).toBe('02:00:00:00:00:77');
    expect(probeAnswerHolder(reply, '198.51.100.202', OURS)).toBeUndefined();
    expect(probeAnswerHolder(reply, v4, FOREIGN)).toBeUndefined();
  });

  test("another host's ARP probe for the same address does not hold it (sender 0.0.0.0)", () => {
    expect(probeAnswerHolder(arpProbeFrame(bytes(v4), FOREIGN), v4, OURS)).toBeUndefined();
  });

  test("a Neighbor Advertisement for the address names the MAC; another host's DAD solicitation does not", () => {
    expect(probeAnswerHolder(unsolicitedAdvertisementFrame(bytes(v6), FOREIGN), v6, OURS)).toBe('02:00:00:00:00:77');
    expect(probeAnswerHolder(unsolicitedAdvertisementFrame(bytes(v6), FOREIGN), '2001:db8:1::202', OURS)).toBeUndefined();
    expect(probeAnswerHolder(neighborSolicitationFrame(bytes(v6), FOREIGN), v6, OURS)).toBeUndefined();
  });

  test('frames that do not parse are nobody', () => {
    expect(probeAnswerHolder(reply.subarray(0, 20), v4, OURS)).toBeUndefined();
    expect(probeAnswerHolder(new Uint8Array(0), v4, OURS)).toBeUndefined();
  });
});
