import { ptr } from 'bun:ffi';
import {
  AF_INET6, AF_PACKET, attachSocketFilter, EAGAIN, errno, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, IPV6_DROP_MEMBERSHIP, libc, SO_RCVBUF, SOCK_CLOEXEC, SOCK_DGRAM, SOCK_NONBLOCK,
  SOCK_RAW, SOL_SOCKET, SocketError, type BpfInstruction,
} from '../../util/libc.ts';

/**
 * Raw Ethernet frames on one interface through Linux AF_PACKET sockets, called in libc over
 * bun:ffi (src/util/libc.ts). Hand-written because nothing maintained offers raw
 * frames to Bun: node:dgram speaks UDP only, and the npm packet libraries are native Node addons
 * (node-gyp builds of libpcap or raw-socket) that `bun build --compile` cannot embed.
 *
 * The sockets are non-blocking and never wait: the caller reads them when a doorbell rings
 * (doorbell.ts). The binding is loaded on first use, so nothing here touches libc in processes
 * that never announce.
 */
const ARPHRD_ETHER = 1;
/** sizeof(struct sockaddr_ll). */
const SOCKADDR_LL_SIZE = 20;
export const ETH_P_ARP = 0x0806;
export const ETH_P_IPV6 = 0x86dd;

/** sll_pkttype of a received frame. */
export const PACKET_HOST = 0;
export const PACKET_BROADCAST = 1;
export const PACKET_MULTICAST = 2;
export const PACKET_OTHERHOST = 3;
export const PACKET_OUTGOING = 4;

/**
 * Reads `socket` until it is empty or `max` frames were read, true at the cap (a flood: the caller
 * reads again later), handing each frame (cut to `buffer`) with its packet type to `onFrame`. A
 * failed read goes to `onError` and ends it, as does a socket closed by `onFrame`.
 */
export function drainFrames(socket: PacketSocket, buffer: Uint8Array, max: number, onFrame: (frame: Uint8Array, packetType: number) => void, onError: (error: Error) => void): boolean {
  for (let i = 0; i < max; i++) {
    if (!socket.isOpen) return false;
    let received;
    try {
      received = socket.receive(buffer);
    } catch (e) {
      onError(e as Error);
      return false;
    }
    if (!received) return false;
    onFrame(buffer.subarray(0, received.length), received.packetType);
  }
  return true;
}

/** The kernel's index of an interface in this network namespace; throws naming it when there is none. */
export function interfaceIndex(name: string): number {
  const cName = new TextEncoder().encode(`${name}\0`);
  const index = libc().if_nametoindex(ptr(cName));
  if (index === 0) throw new SocketError(`interface ${JSON.stringify(name)}`);
  return index;
}

export type { BpfInstruction } from '../../util/libc.ts';

export interface ReceivedFrame {
  length: number;
  /** PACKET_HOST, PACKET_BROADCAST, PACKET_MULTICAST, PACKET_OTHERHOST or PACKET_OUTGOING. */
  packetType: number;
}

export class PacketSocket {
  private readonly peer = new Uint8Array(SOCKADDR_LL_SIZE);
  private readonly peerLength = new Uint32Array(1);
  private open = true;

  private constructor(
    readonly interfaceName: string,
    readonly interfaceIndex: number,
    private readonly fd: number,
  ) {}

  /**
   * A socket receiving the frames of `etherType` that reach `interfaceName`, after `filter` if
   * given. It is created listening to no protocol and bound afterwards, so no frame of another
   * interface or type is queued before the binding (and the filter) are in place.
   */
  static open(interfaceName: string, etherType: number, filter?: BpfInstruction[], options: { receiveBufferBytes?: number } = {}): PacketSocket {
    const index = interfaceIndex(interfaceName);
    const c = libc();
    const fd = c.socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw new SocketError(`socket(AF_PACKET) for ${interfaceName}`);
    const socket = new PacketSocket(interfaceName, index, fd);
    try {
      if (filter) socket.setFilter(filter);
      if (options.receiveBufferBytes !== undefined) socket.setReceiveBuffer(options.receiveBufferBytes);
      const address = new Uint8Array(SOCKADDR_LL_SIZE);
      const view = new DataView(address.buffer);
      view.setUint16(0, AF_PACKET, true);
      view.setUint16(2, etherType); // network order
      view.setInt32(4, index, true);
      if (c.bind(fd, ptr(address), SOCKADDR_LL_SIZE) !== 0) throw new SocketError(`bind(AF_PACKET) to ${interfaceName}`);
      const hardware = socket.hardwareType();
      if (hardware !== ARPHRD_ETHER) throw new Error(`interface ${interfaceName} is not Ethernet (ARP hardware type ${hardware})`);
    } catch (e) {
      socket.close();
      throw e;
    }
    return socket;
  }

  /** The interface's MAC address, read afresh (an administrator may change it). */
  mac(): Uint8Array {
    return this.localAddress().subarray(12, 18).slice();
  }

  private hardwareType(): number {
    return new DataView(this.localAddress().buffer).getUint16(8, true);
  }

  private localAddress(): Uint8Array {
    const address = new Uint8Array(SOCKADDR_LL_SIZE);
    const length = new Uint32Array([SOCKADDR_LL_SIZE]);
    if (libc().getsockname(this.fd, ptr(address), ptr(length)) !== 0) throw new SocketError(`getsockname on ${this.interfaceName}`);
    return address;
  }

  /** SO_RCVBUF: the kernel doubles the request and raises it to its floor (SOCK_MIN_RCVBUF, about 2.3 KB). */
  private setReceiveBuffer(bytes: number): void {
    const value = new Int32Array([bytes]);
    if (libc().setsockopt(this.fd, SOL_SOCKET, SO_RCVBUF, ptr(value), 4) !== 0) throw new SocketError(`setting the receive buffer on ${this.interfaceName}`);
  }

  /** Attaches `program`, or replaces the one attached (the kernel swaps them at once): frames are judged by one or the other. */
  setFilter(program: readonly BpfInstruction[]): void {
    attachSocketFilter(this.fd, program, `the frame filter on ${this.interfaceName}`);
  }

  /**
   * The next queued frame into `buffer`, or undefined when none is waiting. A frame longer than
   * the buffer arrives cut to it (the length says so).
   */
  receive(buffer: Uint8Array): ReceivedFrame | undefined {
    this.mustBeOpen();
    this.peerLength[0] = SOCKADDR_LL_SIZE;
    const n = Number(libc().recvfrom(this.fd, ptr(buffer), buffer.length, 0, ptr(this.peer), ptr(this.peerLength)));
    if (n < 0) {
      const code = errno();
      if (code === EAGAIN) return undefined;
      throw new SocketError(`receiving on ${this.interfaceName}`, code);
    }
    return { length: Math.min(n, buffer.length), packetType: this.peer[10]! };
  }

  /** Sends one whole frame (Ethernet header included) out of the bound interface. */
  send(frame: Uint8Array): void {
    this.mustBeOpen();
    const n = Number(libc().sendto(this.fd, ptr(frame), frame.length, 0, null, 0));
    if (n !== frame.length) throw new SocketError(`sending a ${frame.length}-byte frame on ${this.interfaceName}`);
  }

  /**
   * Bun's own reader of this socket: its event loop watches a duplicate of the descriptor (epoll)
   * and reads whatever arrives, with no frame boundaries or packet types (doorbell.ts uses it only
   * to be woken). Cancelling the reader closes the duplicate; this socket stays open until close().
   */
  readable(): ReadableStream<Uint8Array> {
    this.mustBeOpen();
    return Bun.file(this.fd).stream();
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** After close() the number may already belong to another descriptor: never call libc with it. */
  private mustBeOpen(): void {
    if (!this.open) throw new Error(`the packet socket on ${this.interfaceName} is closed`);
  }

  close(): void {
    if (!this.open) return;
    this.open = false;
    libc().close(this.fd);
  }
}

/**
 * Membership of IPv6 multicast groups on one interface, held by an ordinary UDP socket: the
 * kernel then both lets the group's frames in and sends the MLD reports that multicast-snooping
 * switches need before they forward a solicited-node group to this port. (PACKET_ADD_MEMBERSHIP
 * on the packet socket would open the MAC filter only, and ALLMULTI or PROMISC would let in every
 * group's traffic.) Closing the socket leaves every group.
 */
export class MulticastMembership {
  private open = true;

  private constructor(
    readonly interfaceName: string,
    private readonly interfaceIndex: number,
    private readonly fd: number,
  ) {}

  static open(interfaceName: string): MulticastMembership {
    const index = interfaceIndex(interfaceName);
    const fd = libc().socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw new SocketError(`socket(AF_INET6) for ${interfaceName}'s multicast groups`);
    return new MulticastMembership(interfaceName, index, fd);
  }

  join(group: Uint8Array): void {
    this.change(IPV6_ADD_MEMBERSHIP, group, 'joining');
  }

  leave(group: Uint8Array): void {
    this.change(IPV6_DROP_MEMBERSHIP, group, 'leaving');
  }

  private change(option: number, group: Uint8Array, verb: string): void {
    // struct ipv6_mreq: the group's 16 bytes, then the interface index.
    const request = new Uint8Array(20);
    request.set(group, 0);
    new DataView(request.buffer).setUint32(16, this.interfaceIndex, true);
    if (libc().setsockopt(this.fd, IPPROTO_IPV6, option, ptr(request), request.length) !== 0) {
      throw new SocketError(`${verb} a multicast group on ${this.interfaceName}`);
    }
  }

  close(): void {
    if (!this.open) return;
    this.open = false;
    libc().close(this.fd);
  }
}
