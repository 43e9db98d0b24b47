import { describe, expect, test } from 'bun:test';
import { createLogger } from './log.ts';

const at = () => new Date('2026-01-02T03:04:05.000Z');

describe('logger', () => {
  test('json: one object per line with stable keys; errors as their message', () => {
    const lines: string[] = [];
    const log = createLogger({ format: 'json', write: (l) => lines.push(l), now: at }).with({ controller: 'cloud-node-controller' });
    log.error('sync failed', { node: 'n1', error: new Error('boom') });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toEqual({ ts: '2026-01-02T03:04:05.000Z', level: 'error', msg: 'sync failed', controller: 'cloud-node-controller', node: 'n1', error: 'boom' });
  });

  test('text: klog-like key=value, quoting values with spaces', () => {
    const lines: string[] = [];
    createLogger({ write: (l) => lines.push(l), now: at }).info('synced', { service: 'ns/web', error: 'a b' });
    expect(lines[0]).toBe('2026-01-02T03:04:05.000Z INFO "synced" service=ns/web error="a b"');
  });

  test('-v: debug lines only up to the verbosity', () => {
    const lines: string[] = [];
    const log = createLogger({ verbosity: 2, write: (l) => lines.push(l), now: at });
    log.debug(2, 'shown');
    log.debug(3, 'hidden');
    expect(lines.map((l) => l.includes('shown'))).toEqual([true]);
    expect(log.enabled(3)).toBe(false);
  });
});
