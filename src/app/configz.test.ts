import { describe, expect, test } from 'bun:test';
import { configz } from './configz.ts';
import { parseArgs } from '../options/index.ts';
import fixtures from '../../test/fixtures/upstream-configz.json' with { type: 'json' };

// Each fixture is upstream's own /configz body for a command line (scripts/gen-upstream-flags.sh
// runs k8s.io/cloud-provider's option code on it): edge-ccm must serve the same for the same flags.
describe('/configz equals upstream\'s for the same command line', () => {
  test.each(fixtures.map((f) => [f.args.join(' '), f] as const))('%s', (_line, fixture) => {
    const { options } = parseArgs(fixture.args);
    // Key order too: JSON.stringify compares it, as a client diffing two bodies would.
    expect(JSON.stringify(configz(options))).toBe(JSON.stringify(fixture.configz));
  });

  test('the fixtures cover more than the defaults', () => {
    expect(fixtures.length).toBeGreaterThanOrEqual(4);
  });
});
