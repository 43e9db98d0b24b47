import { expect, test } from 'bun:test';
import { chooseKubectl, clientMinor } from './demo-kubectl.ts';

test('a kubectl built beside the API server first; else one on PATH within one minor version; else how to get one', () => {
  expect(chooseKubectl('v1.36.3', '/cache/kubectl', { minor: 32 })).toEqual({ command: '/cache/kubectl', note: 'kubectl v1.36.3, built beside the API server' });
  expect(chooseKubectl('v1.36.3', undefined, { minor: 35 }).command).toBe('kubectl');
  expect(chooseKubectl('v1.36.3', undefined, { minor: 37 }).command).toBe('kubectl');
  const old = chooseKubectl('v1.36.3', undefined, { minor: 32 });
  expect(old.command).toBeUndefined();
  expect(old.note).toBe('the kubectl on PATH is v1.32, outside the supported skew of the API server v1.36.3; to get one: bash scripts/build-control-plane.sh kubectl (builds kubectl v1.36.3 from the same Go module, about a minute once, cached beside the API server), or any kubectl v1.35 to v1.37');
  expect(chooseKubectl('v1.36.3', undefined, undefined).note).toStartWith('no kubectl on PATH; to get one: bash scripts/build-control-plane.sh kubectl');
});

test("a kubectl's client minor version, as `kubectl version --client -o json` prints it", () => {
  expect(clientMinor('{"clientVersion":{"major":"1","minor":"32+","gitVersion":"v1.32.4-dispatcher"}}')).toBe(32);
  expect(clientMinor('{"clientVersion":{"minor":"36"}}')).toBe(36);
  expect(clientMinor('not json')).toBeUndefined();
});
