import { expect, test } from 'bun:test';
import { createLogger } from '../log.ts';
import { parseVModule } from './vmodule.ts';

test('--vmodule raises (or lowers) the verbosity of the loggers whose component matches, globs included', () => {
  const parsed = parseVModule('cloud-node-*=4,server=0');
  if (!parsed.ok) throw new Error(parsed.error);
  const lines: string[] = [];
  const root = createLogger({ verbosity: 2, vmodule: parsed.rules, write: (l) => lines.push(l) });
  root.with({ controller: 'cloud-node-controller' }).debug(4, 'node detail');
  root.with({ controller: 'service-lb-controller' }).debug(4, 'service detail');
  root.with({ component: 'server' }).debug(1, 'server detail');
  root.with({ component: 'leader-election' }).debug(2, 'lease detail');
  expect(lines.map((l) => /"([^"]+)"/.exec(l)?.[1])).toEqual(['node detail', 'lease detail']);
});

test('split streams: info to one writer, warnings and errors to the other', () => {
  const out: string[] = [];
  const err: string[] = [];
  const log = createLogger({ write: (l) => out.push(l), writeErrors: (l) => err.push(l) });
  log.info('a');
  log.warn('b');
  log.error('c');
  expect([out.length, err.length]).toEqual([1, 2]);
});

test('bad patterns are refused as klog does', () => {
  expect(parseVModule('x=')).toEqual({ ok: false, error: '"" in "x=" is not a verbosity level (0 to 2147483647)' });
  expect(parseVModule('=3')).toEqual({ ok: false, error: 'File pattern must not be empty' });
  expect(parseVModule('')).toEqual({ ok: true, rules: [] });
});
