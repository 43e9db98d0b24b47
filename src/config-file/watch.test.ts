import { expect, test } from 'bun:test';
import { WatchedConfig, type ConfigReloadResult } from './watch.ts';
import { silentLogger } from '../log.ts';

/** A config that is a number; "bad" does not parse, "boom" parses but cannot be applied. */
function numbers() {
  const applied: number[] = [];
  const results: ConfigReloadResult<number>[] = [];
  const rejected: string[] = [];
  let changes = 0;
  const file = new WatchedConfig<number>({
    owner: 'test provider',
    path: '/etc/edge-ccm/test.yaml',
    load: (text) => (text === 'bad' ? { ok: false, errors: [{ path: 'value', line: 3, message: 'not a number' }] } : { ok: true, config: text === 'boom' ? -1 : Number(text) }),
    apply: (n) => {
      if (n < 0) throw new Error('negative numbers cannot be put in force');
      applied.push(n);
    },
    logger: silentLogger,
  });
  file.onReload((r) => results.push(r));
  file.onChange(() => changes++);
  file.onConfigRejected((problems) => rejected.push(problems));
  return { file, applied, results, rejected, changes: () => changes };
}

test('a good text is applied, counted and announced; a bad one is reported with FILE:LINE and changes nothing', () => {
  const t = numbers();
  expect(t.file.reload('7').ok).toBe(true);
  expect(t.file.reload('bad').ok).toBe(false);
  expect(t.applied).toEqual([7]);
  expect(t.changes()).toBe(1);
  expect(t.rejected).toEqual(['/etc/edge-ccm/test.yaml:3: value: not a number']);
  expect(t.file.reloads()).toEqual({ success: 1, error: 1 });
});

test('a config whose apply throws is rejected like an invalid one, never lost silently', () => {
  const t = numbers();
  const result = t.file.reload('boom');
  expect(result.ok).toBe(false);
  expect(t.rejected).toEqual(['/etc/edge-ccm/test.yaml:1: could not be applied: negative numbers cannot be put in force']);
  expect(t.changes()).toBe(0);
  expect(t.file.reloads()).toEqual({ success: 0, error: 1 });
  // The next good edit still goes through.
  expect(t.file.reload('8').ok).toBe(true);
  expect(t.applied).toEqual([8]);
});

test('a listener that throws does not stop the others', () => {
  const t = numbers();
  t.file.onReload(() => {
    throw new Error('listener bug');
  });
  let after = 0;
  t.file.onReload(() => after++);
  t.file.reload('1');
  expect(after).toBe(1);
  expect(t.results).toHaveLength(1);
});
