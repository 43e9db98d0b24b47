import { dlopen, FFIType, ptr, read } from 'bun:ffi';

/**
 * The libc socket calls Bun does not offer, over bun:ffi, in one binding for every user: the BGP
 * speaker's TCP options (src/net/bgp/tcp.ts), the L2 responder's packet sockets
 * (src/net/l2/packet-socket.ts) and sd_notify's Unix datagrams (src/systemd). The binary is linked
 * against glibc already (libc.so.6 is in every image it runs in); the binding is opened on first
 * use, so a process that never needs it never loads it.
 */

// Linux's numbers, the same on x86-64 and arm64.
export const AF_UNIX = 1;
export const AF_INET = 2;
export const AF_INET6 = 10;
export const AF_PACKET = 17;
export const SOCK_STREAM = 1;
export const SOCK_DGRAM = 2;
export const SOCK_RAW = 3;
export const SOCK_NONBLOCK = 0o4000;
export const SOCK_CLOEXEC = 0o2000000;
export const SOL_SOCKET = 1;
export const IPPROTO_IP = 0;
export const IPPROTO_TCP = 6;
export const IPPROTO_IPV6 = 41;
export const MSG_DONTWAIT = 0x40;
export const MSG_NOSIGNAL = 0x4000;
export const EAGAIN = 11;
export const EINPROGRESS = 115;
// Socket options and poll events, as <sys/socket.h>, <netinet/in.h>, <netinet/tcp.h>, <poll.h>
// number them (a struct's layout stays beside the code that builds it).
export const SO_ERROR = 4;
export const SO_RCVBUF = 8;
export const SO_ATTACH_FILTER = 26;
export const IP_TTL = 2;
export const IPV6_UNICAST_HOPS = 16;
export const IPV6_ADD_MEMBERSHIP = 20;
export const IPV6_DROP_MEMBERSHIP = 21;
export const TCP_MD5SIG = 14;
export const POLLOUT = 4;

function openLibc() {
  return dlopen('libc.so.6', {
    socket: { args: [FFIType.i32, FFIType.i32, FFIType.i32], returns: FFIType.i32 },
    bind: { args: [FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
    connect: { args: [FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
    setsockopt: { args: [FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
    getsockopt: { args: [FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    getsockname: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    recv: { args: [FFIType.i32, FFIType.ptr, FFIType.u64, FFIType.i32], returns: FFIType.i64 },
    recvfrom: { args: [FFIType.i32, FFIType.ptr, FFIType.u64, FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i64 },
    sendto: { args: [FFIType.i32, FFIType.ptr, FFIType.u64, FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i64 },
    poll: { args: [FFIType.ptr, FFIType.u64, FFIType.i32], returns: FFIType.i32 },
    close: { args: [FFIType.i32], returns: FFIType.i32 },
    if_nametoindex: { args: [FFIType.ptr], returns: FFIType.u32 },
    strerror: { args: [FFIType.i32], returns: FFIType.cstring },
    __errno_location: { args: [], returns: FFIType.ptr },
  }).symbols;
}

export type Libc = ReturnType<typeof openLibc>;
let binding: Libc | undefined;

/** The binding, opened on first use. */
export function libc(): Libc {
  binding ??= openLibc();
  return binding;
}

/** The calling thread's errno, as the last failed call left it. */
export function errno(): number {
  const p = libc().__errno_location();
  return p ? read.i32(p, 0) : 0;
}

/** libc's text of an errno value with the number: "No such device (errno 19)". */
export function errnoText(code: number): string {
  return `${String(libc().strerror(code))} (errno ${code})`;
}

/** A failed libc call: what was attempted, with libc's text and number of its errno. */
export class SocketError extends Error {
  readonly errno: number;
  constructor(what: string, code: number = errno()) {
    super(`${what}: ${errnoText(code)}`);
    this.name = 'SocketError';
    this.errno = code;
  }
}

/** One classic BPF instruction (struct sock_filter). */
export interface BpfInstruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

/**
 * Attaches a classic BPF program to a socket (SO_ATTACH_FILTER): the kernel drops what it rejects
 * before anything is queued. `what` names the filter in the error.
 */
export function attachSocketFilter(fd: number, program: readonly BpfInstruction[], what: string): void {
  const instructions = new Uint8Array(program.length * 8);
  const view = new DataView(instructions.buffer);
  program.forEach((op, i) => {
    view.setUint16(i * 8, op.code, true);
    instructions[i * 8 + 2] = op.jt;
    instructions[i * 8 + 3] = op.jf;
    view.setUint32(i * 8 + 4, op.k, true);
  });
  // struct sock_fprog: unsigned short len, (padding), struct sock_filter *filter.
  const fprog = new Uint8Array(16);
  const fview = new DataView(fprog.buffer);
  fview.setUint16(0, program.length, true);
  fview.setBigUint64(8, BigInt(ptr(instructions)), true);
  if (libc().setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, ptr(fprog), fprog.length) !== 0) throw new SocketError(`attaching ${what}`);
}
