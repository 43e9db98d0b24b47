import { describe, expect, test } from 'bun:test';
import { formatGoDuration, parseGoDuration } from './duration.ts';

describe('parseGoDuration (Go time.ParseDuration)', () => {
  test.each([
    ['0', 0],
    ['-0', 0],
    ['+0', 0],
    ['15s', 15_000],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['300ms', 300],
    ['2h45m30.5s', 9_930_500],
    ['1.s', 1_000],
    ['.5s', 500],
    ['-1.5s', -1_500],
    ['+2s', 2_000],
    ['1500us', 1.5],
    ['1500µs', 1.5],
    ['1500μs', 1.5],
    ['250000ns', 0.25],
    ['0s', 0],
    ['1h1m1s1ms', 3_661_001],
    ['1.1s', 1_100],
  ])('%p is %p ms', (text, ms) => {
    expect(parseGoDuration(text)).toBe(ms);
  });

  test.each([
    ['15', 'invalid duration "15": missing unit'],
    ['5', 'invalid duration "5": missing unit'],
    ['1h30', 'invalid duration "1h30": missing unit'],
    ['1d', 'invalid duration "1d": unknown unit "d"'],
    ['10S', 'invalid duration "10S": unknown unit "S"'],
    ['', 'invalid duration ""'],
    ['s', 'invalid duration "s"'],
    ['.s', 'invalid duration ".s"'],
    ['-', 'invalid duration "-"'],
    ['1.2.3s', 'invalid duration "1.2.3s"'],
    [' 1s', 'invalid duration " 1s"'],
    ['3000000h', 'invalid duration "3000000h": out of range'],
  ])('%p is rejected', (text, message) => {
    expect(() => parseGoDuration(text)).toThrow(message);
  });

  test('an unknown unit lists the valid ones', () => {
    expect(() => parseGoDuration('2w')).toThrow('valid units: ns, us, µs, ms, s, m, h');
  });
});

describe('formatGoDuration (Go Duration.String)', () => {
  test.each([
    [0, '0s'],
    [15_000, '15s'],
    [10_000, '10s'],
    [2_000, '2s'],
    [300_000, '5m0s'],
    [43_200_000, '12h0m0s'],
    [5_400_000, '1h30m0s'],
    [1_500, '1.5s'],
    [300, '300ms'],
    [1.5, '1.5ms'],
    [0.001_5, '1.5µs'],
    [0.000_5, '500ns'],
    [-1_500, '-1.5s'],
    [90_061_001, '25h1m1.001s'],
  ])('%p ms is %p', (ms, text) => {
    expect(formatGoDuration(ms)).toBe(text);
  });

  test.each(['15s', '1h30m0s', '300ms', '2h45m30.5s', '1.5µs'])('%p survives a round trip', (text) => {
    expect(formatGoDuration(parseGoDuration(text))).toBe(text);
  });
});
