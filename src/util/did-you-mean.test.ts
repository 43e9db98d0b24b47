import { expect, test } from 'bun:test';
import { didYouMean, editDistance, nearestName } from './did-you-mean.ts';

test('edit distance counts insertions, deletions and substitutions', () => {
  expect(editDistance('zone', 'zone')).toBe(0);
  expect(editDistance('zoen', 'zone')).toBe(2); // a swap is two edits
  expect(editDistance('rgion', 'region')).toBe(1);
  expect(editDistance('', 'abc')).toBe(3);
  expect(editDistance('kitten', 'sitting')).toBe(3);
});

test('the nearest known name within two edits, case ignored; nothing beyond', () => {
  const known = ['cloud-provider', 'cloud-config', 'kubeconfig'];
  expect(nearestName('cloud-provder', known)).toBe('cloud-provider');
  expect(nearestName('Cloud-Provider', known)).toBe('cloud-provider');
  expect(nearestName('kube-config', known)).toBe('kubeconfig');
  expect(nearestName('cloud-prov', known)).toBeUndefined(); // four edits
  expect(nearestName('bogus', known)).toBeUndefined();
  // Equally near: the first in the known order.
  expect(nearestName('ab', ['ac', 'ad'])).toBe('ac');
});

test('didYouMean formats the suggestion or says nothing', () => {
  expect(didYouMean('pasword', ['password', 'username'], (n) => JSON.stringify(n))).toBe(' (did you mean "password"?)');
  expect(didYouMean('x', ['password'])).toBe('');
});
