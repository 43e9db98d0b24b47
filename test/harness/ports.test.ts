import { expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { freeLoopbackPorts } from './ports.ts';

test('free loopback ports are distinct, below the ephemeral range, and bindable', async () => {
  const ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  const ports = await freeLoopbackPorts(5);
  expect(new Set(ports).size).toBe(5);
  for (const port of ports) {
    expect(port).toBeGreaterThanOrEqual(10_000);
    expect(port).toBeLessThan(ephemeralLow);
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
