import { describe, expect, test } from 'bun:test';
import { silentLogger } from '../log.ts';
import { FileBackedProvider } from './file-backed-provider.ts';
import { WatchedConfig, type ConfigReloadResult } from './watch.ts';

/** A provider whose configuration is a number: "n" is good, "n!" good with a warning, anything else rejected. */
class NumberProvider extends FileBackedProvider<number> {
  value = 0;
  protected readonly file = new WatchedConfig<number>({
    owner: 'number provider',
    load: (text): ConfigReloadResult<number> => {
      const n = Number(text.replace(/!$/, ''));
      if (Number.isNaN(n)) return { ok: false, errors: [{ path: 'value', line: 1, message: `${JSON.stringify(text)} is not a number` }] };
      return { ok: true, config: n, warnings: text.endsWith('!') ? [{ path: 'value', line: 1, message: 'shouted', reason: 'Shouted' }] : [] };
    },
    apply: (n) => (this.value = n),
    logger: silentLogger,
  });
}

describe('FileBackedProvider: the six reload methods, once for every provider with a file', () => {
  test('forward to the provider\'s WatchedConfig: reload applies, each notice reaches its listener only', async () => {
    const provider = new NumberProvider();
    const seen: string[] = [];
    provider.onReload((r) => seen.push(r.ok ? `reload ok ${r.config}` : 'reload rejected'));
    provider.onChange(() => seen.push('change'));
    provider.onConfigRejected((problems) => seen.push(`rejected: ${problems}`));
    provider.onConfigWarning((reason) => seen.push(`warning ${reason}`));

    expect(provider.reload('7')).toEqual({ ok: true, config: 7, warnings: [] });
    expect(provider.value).toBe(7);
    expect(provider.reload('x').ok).toBe(false);
    expect(provider.value).toBe(7);
    provider.reload('8!');
    expect(seen).toEqual([
      'reload ok 7',
      'change',
      'reload rejected',
      'rejected: <cloud-config>:1: value: "x" is not a number',
      'reload ok 8',
      'change',
      'warning Shouted',
    ]);
    // No file to read: nothing changed.
    expect(await provider.reloadConfig()).toBe('unchanged');
  });

  test('an unsubscribed listener hears nothing more', () => {
    const provider = new NumberProvider();
    let changes = 0;
    const off = provider.onChange(() => changes++);
    provider.reload('1');
    off();
    provider.reload('2');
    expect(changes).toBe(1);
  });
});
