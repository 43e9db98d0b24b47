import { join } from 'node:path';
import { ARP_REQUEST, serializeArp } from '../../src/net/l2/arp.ts';
import { BROADCAST_MAC, buildEthernet, ETHERTYPE_ARP, ZERO_MAC } from '../../src/net/l2/ethernet.ts';
import { ipToBytes, parseIP } from '../../src/net/ip.ts';
import { mustRun, type NetnsLab } from './netns.ts';

const FRAME_SENDER = join(import.meta.dir, '..', 'fakes', 'l2-frame-sender-main.ts');

/** Sends raw Ethernet frames out of `iface` in `role`'s namespace (test/fakes/l2-frame-sender-main.ts), each list `repeat` times. */
export function sendRawFrames(lab: NetnsLab, role: string, iface: string, frames: readonly Uint8Array[], o: { repeat?: number; timeoutMs?: number } = {}): Promise<string> {
  const hex = frames.map((f) => Buffer.from(f).toString('hex'));
  return mustRun(['ip', 'netns', 'exec', lab.ns(role), process.execPath, FRAME_SENDER, iface, ...(o.repeat ? [`--repeat=${o.repeat}`] : []), ...hex], o.timeoutMs);
}

/** A broadcast ARP frame (a request unless `operation` says otherwise) from `mac`, speaking as `sender` about `target`. */
export function arpFrame(o: { mac: Uint8Array; sender: string; target: string; operation?: number; senderMac?: Uint8Array }): Uint8Array {
  return buildEthernet(BROADCAST_MAC, o.mac, ETHERTYPE_ARP, serializeArp({
    operation: o.operation ?? ARP_REQUEST, senderMac: o.senderMac ?? o.mac, senderIp: ipToBytes(parseIP(o.sender)!), targetMac: ZERO_MAC, targetIp: ipToBytes(parseIP(o.target)!),
  }));
}
