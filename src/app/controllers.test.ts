import { describe, expect, test } from 'bun:test';
import { CONTROLLER_ALIASES, CONTROLLER_NAMES } from '../names.ts';
import { CONTROLLERS } from './controllers.ts';

describe('the controller table and src/names.ts', () => {
  test('name the same controllers, in the same order; every alias names one of them', () => {
    expect(CONTROLLERS.map((c) => c.name)).toEqual([...CONTROLLER_NAMES]);
    for (const name of Object.values(CONTROLLER_ALIASES)) expect(CONTROLLER_NAMES).toContain(name);
    expect(new Set(Object.values(CONTROLLER_ALIASES)).size).toBe(CONTROLLER_NAMES.length);
  });
});
