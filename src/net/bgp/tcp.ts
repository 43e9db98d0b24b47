import type { Socket, SocketHandler } from 'bun';
import { ptr } from 'bun:ffi';
import type { IP } from '../ip.ts';
import {
  AF_INET, AF_INET6, EINPROGRESS, errno, IP_TTL, IPPROTO_IP, IPPROTO_IPV6, IPPROTO_TCP, IPV6_UNICAST_HOPS, libc, POLLOUT, SO_ERROR, SOCK_CLOEXEC, SOCK_NONBLOCK,
  SOCK_STREAM, SocketError, SOL_SOCKET, TCP_MD5SIG,
} from '../../util/libc.ts';

/**
 * The socket options BGP needs and Bun's TCP API does not offer, set through libc over bun:ffi
 * (src/util/libc.ts): TCP-MD5 signatures (RFC 2385, Linux TCP_MD5SIG), the
 * outgoing TTL / hop limit (1 for directly connected eBGP, more for multihop) and binding a
 * source address. Bun exposes the descriptor of its listeners and sockets (`.fd`) and adopts a
 * connected descriptor (`Bun.connect({ fd })`), so:
 * - outgoing connections are made here (socket, options, bind, non-blocking connect, polled
 *   until connected) and then handed to Bun; the MD5 key must be on the socket before the SYN;
 * - the listener is Bun's; keys for each peer are set on its descriptor (accepted connections
 *   inherit them), and the TTL on each accepted socket.
 */
const TCP_MD5SIG_MAXKEYLEN = 80;
/** sizeof(struct tcp_md5sig): sockaddr_storage (128), flags, prefixlen, keylen (u16), ifindex (i32), key[80]. */
const TCP_MD5SIG_SIZE = 216;

/** A struct sockaddr_in or sockaddr_in6 for `ip`; `v6Socket` maps an IPv4 address for a dual-stack socket. */
function sockaddr(ip: IP, port: number, v6Socket = ip.family === 6): Uint8Array {
  const out = new Uint8Array(v6Socket ? 28 : 16);
  const v = new DataView(out.buffer);
  v.setUint16(0, v6Socket ? AF_INET6 : AF_INET, true);
  v.setUint16(2, port);
  if (!v6Socket) {
    v.setUint32(4, Number(ip.value));
    return out;
  }
  const value = ip.family === 4 ? (0xffffn << 32n) | ip.value : ip.value;
  for (let i = 0; i < 16; i++) out[8 + i] = Number((value >> BigInt(8 * (15 - i))) & 0xffn);
  return out;
}

function check(result: number, what: string): void {
  if (result < 0) throw new SocketError(what);
}

/**
 * Sets (or with `key` undefined, removes) the TCP-MD5 key for segments to and from `peer` on
 * `fd`. `v6Socket`: the socket is AF_INET6 (a dual-stack listener), so an IPv4 peer is given as
 * an IPv4-mapped address, which Linux files under the IPv4 key.
 */
export function setMd5Key(fd: number, peer: IP, key: string | undefined, v6Socket: boolean): void {
  const bytes = new TextEncoder().encode(key ?? '');
  if (bytes.length > TCP_MD5SIG_MAXKEYLEN) throw new Error(`TCP-MD5 password of ${bytes.length} bytes exceeds ${TCP_MD5SIG_MAXKEYLEN}`);
  const s = new Uint8Array(TCP_MD5SIG_SIZE);
  s.set(sockaddr(peer, 0, v6Socket), 0);
  new DataView(s.buffer).setUint16(130, bytes.length, true);
  s.set(bytes, 136);
  check(libc().setsockopt(fd, IPPROTO_TCP, TCP_MD5SIG, ptr(s), TCP_MD5SIG_SIZE), `setsockopt(TCP_MD5SIG) for ${key === undefined ? 'removing' : 'setting'} a peer key`);
}

/** The TTL (IPv4) or hop limit (IPv6) of the segments this socket sends. */
export function setTtl(fd: number, family: 4 | 6, ttl: number): void {
  const v = new Int32Array([ttl]);
  if (family === 4) check(libc().setsockopt(fd, IPPROTO_IP, IP_TTL, ptr(v), 4), `setsockopt(IP_TTL=${ttl})`);
  else check(libc().setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, ptr(v), 4), `setsockopt(IPV6_UNICAST_HOPS=${ttl})`);
}

export interface ConnectOptions {
  remote: IP;
  port: number;
  source?: IP;
  md5Key?: string;
  ttl?: number;
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * A TCP connection made through libc with the options applied before the SYN; resolves with
 * the connected, non-blocking descriptor for Bun.connect({ fd }). The connect is polled (no
 * blocking call on the event loop), every 20 ms, until done, failed, timed out or aborted.
 */
export async function connectTcp(o: ConnectOptions): Promise<number> {
  const lib = libc();
  const family = o.remote.family === 4 ? AF_INET : AF_INET6;
  const fd = lib.socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  check(fd, 'socket()');
  let handedOver = false;
  try {
    if (o.md5Key !== undefined) setMd5Key(fd, o.remote, o.md5Key, o.remote.family === 6);
    if (o.ttl !== undefined) setTtl(fd, o.remote.family, o.ttl);
    if (o.source) {
      if (o.source.family !== o.remote.family) throw new Error('source address and peer address are of different families');
      const sa = sockaddr(o.source, 0);
      check(lib.bind(fd, ptr(sa), sa.length), 'bind(source address)');
    }
    const sa = sockaddr(o.remote, o.port);
    if (lib.connect(fd, ptr(sa), sa.length) < 0) {
      const e = errno();
      if (e !== EINPROGRESS) throw new SocketError('connect()', e);
    }
    const pollfd = new Uint8Array(8);
    const pv = new DataView(pollfd.buffer);
    pv.setInt32(0, fd, true);
    pv.setInt16(4, POLLOUT, true);
    const deadline = performance.now() + o.timeoutMs;
    for (;;) {
      if (o.signal?.aborted) throw new Error('connect aborted');
      pv.setInt16(6, 0, true);
      const ready = lib.poll(ptr(pollfd), 1, 0);
      check(ready, 'poll()');
      if (ready > 0) break;
      if (performance.now() > deadline) throw new Error(`connect timed out after ${o.timeoutMs} ms`);
      await Bun.sleep(20);
    }
    const err = new Int32Array(1);
    const len = new Uint32Array([4]);
    check(lib.getsockopt(fd, SOL_SOCKET, SO_ERROR, ptr(err), ptr(len)), 'getsockopt(SO_ERROR)');
    if (err[0] !== 0) throw new SocketError('connect()', err[0]!);
    handedOver = true;
    return fd;
  } finally {
    if (!handedOver) lib.close(fd);
  }
}

/**
 * The descriptor of a Bun socket or listener. Bun has it at runtime (`.fd`) but not in its
 * type definitions (1.4.5), hence the narrow look-up.
 */
export function fdOf(socket: object): number | undefined {
  const fd = (socket as { fd?: unknown }).fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/**
 * Hands a connected descriptor to Bun (`Bun.connect({ fd })`, which Bun implements; its type
 * definitions list the option but no overload takes it). Bun owns and closes it from here on.
 */
export function adoptConnectedFd<T>(fd: number, socket: SocketHandler<T>): Promise<Socket<T>> {
  return (Bun.connect as unknown as (o: { fd: number; socket: SocketHandler<T> }) => Promise<Socket<T>>)({ fd, socket });
}
