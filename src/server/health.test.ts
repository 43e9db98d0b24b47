import { describe, expect, test } from 'bun:test';
import { HealthChecks, renderAggregate, renderSingle } from './health.ts';

describe('HealthChecks', () => {
  test('a check that returns is healthy; one that throws or rejects is not, with its reason', async () => {
    const checks = new HealthChecks();
    checks.add('sync-ok', () => {});
    checks.add('async-ok', async () => {});
    checks.add('sync-bad', () => {
      throw new Error('no leader');
    });
    checks.add('async-bad', async () => {
      throw new Error('controller stopped');
    });
    expect(await checks.run('healthz')).toEqual([
      { name: 'sync-ok' },
      { name: 'async-ok' },
      { name: 'sync-bad', error: 'no leader' },
      { name: 'async-bad', error: 'controller stopped' },
    ]);
  });

  test('each check runs on the endpoints it is tagged with, all three by default', async () => {
    const checks = new HealthChecks();
    checks.add('leader-election', () => {}, { endpoints: ['healthz', 'livez'] });
    checks.add('informers-synced', () => {}, { endpoints: ['readyz'] });
    checks.add('ping', () => {});
    expect(checks.names('healthz')).toEqual(['leader-election', 'ping']);
    expect(checks.names('livez')).toEqual(['leader-election', 'ping']);
    expect(checks.names('readyz')).toEqual(['informers-synced', 'ping']);
    expect((await checks.run('readyz')).map((r) => r.name)).toEqual(['informers-synced', 'ping']);
  });

  test('checks run together, and answers keep the order the checks were added in', async () => {
    const checks = new HealthChecks();
    let release!: () => void;
    const slowGate = new Promise<void>((r) => (release = r));
    let fastRan = false;
    checks.add('slow', () => slowGate);
    checks.add('fast', () => {
      fastRan = true;
      release(); // would never run if checks ran one after another
    });
    expect((await checks.run('healthz')).map((r) => r.name)).toEqual(['slow', 'fast']);
    expect(fastRan).toBe(true);
  });

  test('a check that does not answer in time fails instead of hanging the probe', async () => {
    const checks = new HealthChecks({ timeoutMs: 20 });
    checks.add('stuck', () => new Promise<void>(() => {}));
    expect(await checks.run('healthz')).toEqual([{ name: 'stuck', error: 'timed out after 20ms' }]);
  });

  test('excluded checks are not run', async () => {
    const checks = new HealthChecks();
    let ran = false;
    checks.add('flaky', () => {
      ran = true;
      throw new Error('x');
    });
    expect(await checks.run('healthz', new Set(['flaky']))).toEqual([{ name: 'flaky', excluded: true }]);
    expect(ran).toBe(false);
  });

  test('runOne answers only for a check of that endpoint', async () => {
    const checks = new HealthChecks();
    checks.add('synced', () => {}, { endpoints: ['readyz'] });
    expect(await checks.runOne('readyz', 'synced')).toEqual({ name: 'synced' });
    expect(await checks.runOne('healthz', 'synced')).toBeUndefined();
    expect(await checks.runOne('readyz', 'missing')).toBeUndefined();
  });

  test('names are unique path segments; removed checks stop running', async () => {
    const checks = new HealthChecks();
    checks.add('node-controller', () => {});
    expect(() => checks.add('node-controller', () => {})).toThrow('already registered');
    expect(() => checks.add('a/b', () => {})).toThrow('invalid health check name');
    expect(() => checks.add('', () => {})).toThrow('invalid health check name');
    expect(checks.remove('node-controller')).toBe(true);
    expect(checks.remove('node-controller')).toBe(false);
    expect(await checks.run('healthz')).toEqual([]);
  });
});

describe('health output', () => {
  test('all passing: "ok", or with ?verbose every check and a closing line', () => {
    const results = [{ name: 'ping' }, { name: 'leader-election' }];
    expect(renderAggregate('healthz', results, false)).toEqual({ status: 200, body: 'ok' });
    expect(renderAggregate('readyz', results, true)).toEqual({
      status: 200,
      body: '[+]ping ok\n[+]leader-election ok\nreadyz check passed\n',
    });
  });

  test('no checks at all is healthy', () => {
    expect(renderAggregate('livez', [], false)).toEqual({ status: 200, body: 'ok' });
    expect(renderAggregate('livez', [], true)).toEqual({ status: 200, body: 'livez check passed\n' });
  });

  test('a failure: 500 listing every check, reasons withheld, verbose or not', () => {
    const results = [{ name: 'ping' }, { name: 'leader-election', error: 'lease lost to host-b' }];
    const expected = {
      status: 500,
      body: '[+]ping ok\n[-]leader-election failed: reason withheld\nhealthz check failed\n',
    };
    expect(renderAggregate('healthz', results, false)).toEqual(expected);
    expect(renderAggregate('healthz', results, true)).toEqual(expected);
  });

  test('excluded checks and exclusions that match nothing are reported', () => {
    const results = [{ name: 'ping' }, { name: 'flaky', excluded: true }];
    expect(renderAggregate('healthz', results, true, ['typo'])).toEqual({
      status: 200,
      body: '[+]ping ok\n[+]flaky excluded: ok\nwarn: some health checks cannot be excluded: no matches for "typo"\nhealthz check passed\n',
    });
  });

  test('a single check: "ok", or 500 with the reason only when it may be shown', () => {
    expect(renderSingle({ name: 'ping' }, false)).toEqual({ status: 200, body: 'ok' });
    const failed = { name: 'leader-election', error: 'lease lost' };
    expect(renderSingle(failed, true)).toEqual({ status: 500, body: 'internal server error: lease lost\n' });
    expect(renderSingle(failed, false)).toEqual({ status: 500, body: 'internal server error: reason withheld\n' });
  });
});
