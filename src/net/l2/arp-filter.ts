import { ETHERTYPE_ARP, MAC_LENGTH } from './ethernet.ts';
import { ARP_PACKET_LENGTH, ARP_REPLY, ARP_REQUEST, HTYPE_ETHERNET, PTYPE_IPV4 } from './arp.ts';
import type { BpfInstruction } from './packet-socket.ts';

/**
 * The kernel-side filter of the ARP socket: only frames that can matter to this node reach it.
 *
 * Why: a packet socket bound to ARP receives every ARP broadcast on the segment, and each one
 * wakes the process to be read and ignored (issue 38: on a plain switch every host's ARP for every
 * other host reaches every speaker and every VIP host, standby ones included). The filter drops,
 * in the kernel, exactly the frames handleArpFrame (answer.ts) can only ignore or count as martian:
 * well-formed Ethernet/IPv4 ARP requests and replies whose sender and target address are both not
 * announced here. Everything else still reaches userspace: short frames, other hardware or
 * protocol types and unknown operations (counted as malformed, as before), and every frame
 * naming an announced address as sender (a claim) or target (a request to answer). What is lost:
 * the martian count of frames about other hosts' addresses (Linux ignores those too).
 *
 * Each address costs four instructions (a compare and an accept, for the sender and the target);
 * above MAX_FILTERED_ADDRESSES the socket takes every ARP frame, as it did without a filter (the
 * kernel caps a program at 4096 instructions). Proven against handleArpFrame by
 * arp-filter.property.test.ts, and against the kernel with real frames by
 * test/integration/l2-idle.test.ts and l2-announce.test.ts.
 */
export const MAX_FILTERED_ADDRESSES = 1000;

/** Accept: the whole frame (the frame socket's own buffer cuts it). */
const ACCEPT = 0x40000;
const LD_LEN = 0x80; //   BPF_LD | BPF_W | BPF_LEN
const LD_W_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const LD_H_ABS = 0x28; // BPF_LD | BPF_H | BPF_ABS
const LD_B_ABS = 0x30; // BPF_LD | BPF_B | BPF_ABS
const JEQ_K = 0x15; //    BPF_JMP | BPF_JEQ | BPF_K
const JGE_K = 0x35; //    BPF_JMP | BPF_JGE | BPF_K
const RET_K = 0x06; //    BPF_RET | BPF_K

const ETHERNET_HEADER = 14;
const SENDER_IP_OFFSET = ETHERNET_HEADER + 14;
const TARGET_IP_OFFSET = ETHERNET_HEADER + 24;

const op = (code: number, k: number, jt = 0, jf = 0): BpfInstruction => ({ code, jt, jf, k });
const accept = op(RET_K, ACCEPT);
const drop = op(RET_K, 0);

/** Falls through when A equals k; otherwise `otherwise` (accept: the frame goes to userspace, or drop). */
const unless = (k: number, otherwise: BpfInstruction): BpfInstruction[] => [op(JEQ_K, k, 1, 0), otherwise];

/** A dotted-quad IPv4 address as formatIP writes it -> its 32-bit value (parseIP costs about 9 us; a speaker may hold 1,000). */
function ipv4Word(text: string): number {
  const parts = text.split('.');
  if (parts.length !== 4) throw new Error(`${JSON.stringify(text)} is not an IPv4 address as formatIP writes it`);
  return parts.reduce((word, part) => word * 256 + Number(part), 0);
}

/**
 * IPv4 addresses (dotted quads as formatIP writes them) -> the socket's filter; above
 * MAX_FILTERED_ADDRESSES one that takes every frame.
 */
export function arpFilter(addresses: ReadonlySet<string> | readonly string[]): BpfInstruction[] {
  const unique = new Set(addresses);
  if (unique.size > MAX_FILTERED_ADDRESSES) return [accept];
  const words = [...unique].map(ipv4Word);
  // A matching address accepts; the next instruction is skipped otherwise.
  const acceptAny = words.flatMap((word) => [op(JEQ_K, word, 0, 1), accept]);
  return [
    // Not a whole Ethernet/IPv4 ARP frame: userspace counts it as malformed (a load past the end would drop it).
    op(LD_LEN, 0), op(JGE_K, ETHERNET_HEADER + ARP_PACKET_LENGTH, 1, 0), accept,
    // Not ARP at all (cannot happen on a socket bound to ARP): userspace would ignore it.
    op(LD_H_ABS, 12), ...unless(ETHERTYPE_ARP, drop),
    op(LD_H_ABS, ETHERNET_HEADER), ...unless(HTYPE_ETHERNET, accept),
    op(LD_H_ABS, ETHERNET_HEADER + 2), ...unless(PTYPE_IPV4, accept),
    op(LD_B_ABS, ETHERNET_HEADER + 4), ...unless(MAC_LENGTH, accept),
    op(LD_B_ABS, ETHERNET_HEADER + 5), ...unless(4, accept),
    // An operation other than request and reply: malformed, to userspace.
    op(LD_H_ABS, ETHERNET_HEADER + 6), op(JEQ_K, ARP_REQUEST, 2, 0), op(JEQ_K, ARP_REPLY, 1, 0), accept,
    op(LD_W_ABS, SENDER_IP_OFFSET), ...acceptAny,
    op(LD_W_ABS, TARGET_IP_OFFSET), ...acceptAny,
    drop,
  ];
}
