import { expect, test } from 'bun:test';
import { defaultLoadBalancerName } from './types.ts';

test('default load-balancer name: "a" + the service UID without dashes, cut to 32 characters (upstream)', () => {
  const uid = '3b5f11aa-22bb-33cc-44dd-55ee66ff7788';
  expect(defaultLoadBalancerName({ metadata: { uid } })).toBe('a3b5f11aa22bb33cc44dd55ee66ff778');
  expect(defaultLoadBalancerName({ metadata: { uid } })).toHaveLength(32);
  expect(defaultLoadBalancerName({ metadata: { uid: 'ab-cd' } })).toBe('aabcd');
});
