import { ptr } from 'bun:ffi';
import { AF_UNIX, libc, MSG_NOSIGNAL, SOCK_CLOEXEC, SOCK_DGRAM } from '../util/libc.ts';

/**
 * Unix datagram sockets through libc (src/util/libc.ts), for sd_notify. Neither Bun nor
 * node:dgram speaks AF_UNIX datagrams, and the notify protocol is one sendto() of a short text.
 */

/** sizeof(struct sockaddr_un): a 2-byte family and 108 bytes of path. */
const SOCKADDR_UN_SIZE = 110;

/**
 * A struct sockaddr_un for a path; "@name" is Linux's abstract namespace (a leading NUL, no
 * terminating one), as systemd writes it in NOTIFY_SOCKET.
 */
export function unixAddress(path: string): { bytes: Uint8Array; length: number } {
  const abstract = path.startsWith('@');
  const name = new TextEncoder().encode(abstract ? path.slice(1) : path);
  if (name.length + 1 > SOCKADDR_UN_SIZE - 2) throw new Error(`unix socket path too long (${name.length} bytes): ${path}`);
  const bytes = new Uint8Array(SOCKADDR_UN_SIZE);
  new DataView(bytes.buffer).setUint16(0, AF_UNIX, true);
  bytes.set(name, abstract ? 3 : 2);
  return { bytes, length: 2 + name.length + 1 };
}

export function openDatagramSocket(): number {
  const fd = libc().socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw new Error('socket(AF_UNIX, SOCK_DGRAM) failed');
  return fd;
}

/** Sends one datagram to the socket at `path`; false when it could not be sent. */
export function sendDatagram(path: string, text: string): boolean {
  const c = libc();
  const fd = openDatagramSocket();
  try {
    const address = unixAddress(path);
    const message = new TextEncoder().encode(text);
    return Number(c.sendto(fd, ptr(message), message.length, MSG_NOSIGNAL, ptr(address.bytes), address.length)) === message.length;
  } finally {
    c.close(fd);
  }
}
