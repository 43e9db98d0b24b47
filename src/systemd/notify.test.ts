import { afterEach, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SystemdNotifier } from './notify.ts';
import { unixAddress } from './unix-datagram.ts';
import { createLogger, silentLogger } from '../log.ts';
import { NotifySocket } from '../../test/harness/notify-socket.ts';

const dirs: string[] = [];
const sockets: NotifySocket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function socket(): NotifySocket {
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-notify-'));
  dirs.push(dir);
  const s = new NotifySocket(dir);
  sockets.push(s);
  return s;
}

test('sockaddr_un: a path NUL-terminated after the family; "@name" in the abstract namespace', () => {
  const path = unixAddress('/run/systemd/notify');
  expect([...path.bytes.subarray(0, 2)]).toEqual([1, 0]); // AF_UNIX, little-endian
  expect(new TextDecoder().decode(path.bytes.subarray(2, 2 + 19))).toBe('/run/systemd/notify');
  expect(path.bytes[2 + 19]).toBe(0);
  expect(path.length).toBe(2 + 19 + 1);
  const abstract = unixAddress('@/org/freedesktop/systemd1/notify/42');
  expect(abstract.bytes[2]).toBe(0);
  expect(new TextDecoder().decode(abstract.bytes.subarray(3, 3 + 35))).toBe('/org/freedesktop/systemd1/notify/42');
  expect(() => unixAddress(`/${'x'.repeat(120)}`)).toThrow('unix socket path too long');
});

test('READY, STATUS and STOPPING reach the socket NOTIFY_SOCKET names', async () => {
  const s = socket();
  const notifier = SystemdNotifier.fromEnv(silentLogger, { NOTIFY_SOCKET: s.path });
  expect(notifier.enabled).toBe(true);
  notifier.ready('standby');
  notifier.status('leading');
  notifier.stopping('bye');
  expect(s.lines()).toEqual(['READY=1', 'STATUS=standby', 'STATUS=leading', 'STOPPING=1', 'STATUS=bye']);
});

test('without NOTIFY_SOCKET nothing is sent; a socket that is gone is warned about once, never thrown', () => {
  expect(SystemdNotifier.fromEnv(silentLogger, {}).enabled).toBe(false);
  SystemdNotifier.fromEnv(silentLogger, {}).ready('x'); // no-op, no throw
  const lines: string[] = [];
  const logger = createLogger({ write: (l) => lines.push(l) });
  const gone = SystemdNotifier.fromEnv(logger, { NOTIFY_SOCKET: '/nonexistent/edge-ccm/notify.sock' });
  gone.ready('x');
  gone.status('y');
  expect(lines.filter((l) => l.includes('cannot notify systemd'))).toHaveLength(1);
});
