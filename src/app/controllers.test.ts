import { describe, expect, test } from 'bun:test';
import { CONTROLLER_ALIASES, CONTROLLER_NAMES, NODE_CSR_APPROVAL_CONTROLLER } from '../names.ts';
import { CONTROLLERS } from './controllers.ts';

describe('the controller table and src/names.ts', () => {
  test('name the same controllers, in the same order; every alias names one of them', () => {
    expect(CONTROLLERS.map((c) => c.name)).toEqual([...CONTROLLER_NAMES]);
    for (const name of Object.values(CONTROLLER_ALIASES)) expect(CONTROLLER_NAMES).toContain(name);
    // Upstream's controllers have one alias each; node-csr-approval (Talos's name, beyond upstream) has none.
    expect([...new Set(Object.values(CONTROLLER_ALIASES))].sort()).toEqual(CONTROLLER_NAMES.filter((n) => n !== NODE_CSR_APPROVAL_CONTROLLER).sort());
  });
});
