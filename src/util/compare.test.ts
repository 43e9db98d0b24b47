import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import fc from 'fast-check';
import { compareCodeUnits } from './compare.ts';

const ROOT = join(import.meta.dir, '../..');

/** Every source file of the program (src and providers), tests left out. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [path] : [];
  });
}

describe('compareCodeUnits', () => {
  test('orders any strings as sort() without a comparator does', () => {
    fc.assert(fc.property(fc.array(fc.string({ unit: 'binary' })), (xs) => {
      expect([...xs].sort(compareCodeUnits)).toEqual([...xs].sort());
    }));
  });

  test("differs from ICU's collation where the comment says (so the choice is one)", () => {
    expect(['2001:db8::10', '2001:db8::1:0'].sort(compareCodeUnits)).toEqual(['2001:db8::10', '2001:db8::1:0']);
    expect(['2001:db8::10', '2001:db8::1:0'].sort((a, b) => a.localeCompare(b))).toEqual(['2001:db8::1:0', '2001:db8::10']);
    expect(['b', 'A', 'a'].sort(compareCodeUnits)).toEqual(['A', 'a', 'b']);
  });

  test('no source file collates with ICU (localeCompare, Intl): it maps ICU into every process that does', () => {
    const files = [...sourceFiles(join(ROOT, 'src')), ...sourceFiles(join(ROOT, 'providers'))];
    expect(files.length).toBeGreaterThan(100); // the scan sees the code
    const offenders = files.filter((f) => /\.localeCompare\(|\bIntl\.|\.toLocale\w*String\(/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f)).filter((f) => f !== 'src/util/compare.ts');
    expect(offenders).toEqual([]);
  });
});
