import { describe, expect, test } from 'bun:test';
import { CONTROLLER_NAMES, CONTROLLERS_DISABLED_BY_DEFAULT, resolveControllers, type ControllerName } from './controllers.ts';

function enabled(list: string[]): ControllerName[] {
  const selection = resolveControllers(list);
  if (!selection.ok) throw new Error(`unexpected errors: ${selection.errors.join('; ')}`);
  return [...selection.enabled].sort();
}

/** What `*` enables: every controller but upstream's disabled-by-default ones. */
const ALL = CONTROLLER_NAMES.filter((n) => !CONTROLLERS_DISABLED_BY_DEFAULT.has(n)).sort();

describe('resolveControllers (upstream IsControllerEnabled)', () => {
  test.each<[string[], ControllerName[]]>([
    [['*'], ALL],
    [['*'], ['cloud-node-controller', 'cloud-node-lifecycle-controller', 'node-route-controller', 'service-lb-controller']],
    [[], []],
    [['cloud-node-controller'], ['cloud-node-controller']],
    [['cloud-node'], ['cloud-node-controller']],
    [['service', 'route'], ['node-route-controller', 'service-lb-controller']],
    [['*', '-route'], ALL.filter((n) => n !== 'node-route-controller')],
    [['-route', '*'], ALL.filter((n) => n !== 'node-route-controller')],
    [['*', '-node-route-controller', '-service'], ['cloud-node-controller', 'cloud-node-lifecycle-controller']],
    [['-cloud-node'], []],
    // first match wins for a name, whatever its spelling
    [['route', '-route'], ['node-route-controller']],
    [['-route', 'route', '*'], ALL.filter((n) => n !== 'node-route-controller')],
    [['-node-route-controller', 'route'], []],
    [['node-route-controller', '-route', '*'], ALL],
    [['cloud-node-lifecycle'], ['cloud-node-lifecycle-controller']],
    // disabled by default: `*` leaves it off, naming it (or its alias) turns it on
    [['*', 'nodeipam'], [...ALL, 'node-ipam-controller' as const].sort()],
    [['node-ipam-controller'], ['node-ipam-controller']],
    [['*', '-nodeipam'], ALL],
    // node-csr-approval approves certificates: never by `*` alone
    [['*', 'node-csr-approval'], [...ALL, 'node-csr-approval' as const].sort()],
  ])('%p enables %p', (list, expected) => {
    expect(enabled(list)).toEqual(expected);
  });

  test('unknown names are rejected, every one, with the known names and aliases', () => {
    const selection = resolveControllers(['*', 'bogus', '-nope', 'route']);
    expect(selection.ok).toBe(false);
    if (selection.ok) return;
    expect(selection.errors).toHaveLength(2);
    expect(selection.errors[0]).toStartWith('"bogus" is not in the list of known controllers');
    expect(selection.errors[1]).toStartWith('"nope" is not in the list of known controllers');
    for (const name of [...CONTROLLER_NAMES, 'cloud-node', 'cloud-node-lifecycle', 'service', 'route']) {
      expect(selection.errors[0]).toContain(name);
    }
  });

  test('"-*" is not a controller name', () => {
    const selection = resolveControllers(['-*']);
    expect(selection.ok).toBe(false);
  });
});
