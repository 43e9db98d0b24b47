import { describe, expect, test } from 'bun:test';
import { FlagErrors } from './errors.ts';
import { renderVipHelp } from './help.ts';
import { parseVipArgs, VIP_FLAGS } from './vip.ts';

function problems(argv: string[]): string[] {
  try {
    parseVipArgs(argv, {}, () => 'host');
  } catch (e) {
    if (e instanceof FlagErrors) return e.errors.map((x) => `${x.flag}: ${x.message}`);
    throw e;
  }
  return [];
}

const REQUIRED = ['--cloud-config=/etc/edge-ccm/config.yaml', '--liveness-key-file=/etc/edge-ccm/vip-key'];

describe('edge-ccm vip flags', () => {
  test('defaults; the node name from the flag, $NODE_NAME, else the hostname', () => {
    expect(parseVipArgs(REQUIRED, {}, () => 'cp9')).toEqual({
      cloudConfig: '/etc/edge-ccm/config.yaml', nodeName: 'cp9', livenessKeyFile: '/etc/edge-ccm/vip-key',
      metrics: { hostname: '127.0.0.1', port: 7473 }, loggingFormat: 'text', verbosity: 0,
    });
    expect(parseVipArgs(REQUIRED, { NODE_NAME: 'env' }, () => 'cp9')).toMatchObject({ nodeName: 'env' });
    expect(parseVipArgs([...REQUIRED, '--node-name=cp1', '--metrics-bind-address=0'], { NODE_NAME: 'env' })).toMatchObject({ nodeName: 'cp1', metrics: undefined });
    expect(parseVipArgs(['--help'], {})).toBe('help');
  });

  test('every problem at once, each naming its flag', () => {
    expect(problems(['--metrics-bind-address=nope', '--logging-format=xml', '--kubeconfig=/x'])).toEqual([
      '--kubeconfig: unknown flag',
      '--metrics-bind-address: "nope" is not HOST:PORT',
      '--logging-format: "xml" is not text or json',
      '--cloud-config: required (the file with the controlPlaneEndpoint section)',
      '--liveness-key-file: required (a shared secret signing the heartbeats)',
    ]);
  });

  test('--help lists every flag', () => {
    const help = renderVipHelp(100_000);
    for (const def of VIP_FLAGS) expect(help).toContain(`--${def.name}`);
  });
});
