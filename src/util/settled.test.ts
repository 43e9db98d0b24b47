import { describe, expect, test } from 'bun:test';
import { Deadline } from './deadline.ts';
import { NOT_FULFILLED, fulfilledValue, isSettled } from './settled.ts';

describe('settled promises', () => {
  test('the value of a fulfilled promise is read at once; pending and rejected ones are not', () => {
    const rejected = Promise.reject(new Error('no'));
    rejected.catch(() => {});
    expect(fulfilledValue((async () => 7)())).toBe(7);
    expect(fulfilledValue(Promise.resolve(undefined))).toBeUndefined();
    expect(fulfilledValue(new Promise(() => {}))).toBe(NOT_FULFILLED);
    expect(fulfilledValue(rejected)).toBe(NOT_FULFILLED);
    expect(isSettled(rejected)).toBe(true);
    expect(isSettled(new Promise(() => {}))).toBe(false);
  });
});

describe('Deadline.race', () => {
  test('an answer already given is returned as it is; a pending one loses to the deadline', async () => {
    const deadline = new Deadline(20);
    try {
      const given = Promise.resolve('yes');
      expect(deadline.race(given)).toBe(given);
      await expect(deadline.race(new Promise(() => {}))).rejects.toThrow(/deadline of 20ms passed/);
      // Past the deadline, an answer that was given still counts.
      expect(await deadline.race(Promise.resolve('late but given'))).toBe('late but given');
    } finally {
      deadline.dispose();
    }
  });
});
