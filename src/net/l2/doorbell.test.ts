import { expect, test } from 'bun:test';
import { doorbellFilter } from './doorbell.ts';
import { NEIGHBOR_DISCOVERY_FILTER } from './responder.ts';

test("the doorbell's filter lets in what the socket's does, keeping 1 byte of each frame", () => {
  const original = structuredClone(NEIGHBOR_DISCOVERY_FILTER);
  const bell = doorbellFilter(NEIGHBOR_DISCOVERY_FILTER);
  const RET = 0x06;
  expect(bell.filter((op) => op.code !== RET)).toEqual(NEIGHBOR_DISCOVERY_FILTER.filter((op) => op.code !== RET));
  expect(bell.map(({ code, jt, jf }) => ({ code, jt, jf }))).toEqual(NEIGHBOR_DISCOVERY_FILTER.map(({ code, jt, jf }) => ({ code, jt, jf })));
  expect(bell.filter((op) => op.code === RET).map((op) => op.k)).toEqual([1, 0]); // accept 1 byte; a drop stays a drop
  expect(NEIGHBOR_DISCOVERY_FILTER).toEqual(original);
});

test('with no filter (ARP), the doorbell accepts every frame, 1 byte of it', () => {
  expect(doorbellFilter(undefined)).toEqual([{ code: 0x06, jt: 0, jf: 0, k: 1 }]);
});
