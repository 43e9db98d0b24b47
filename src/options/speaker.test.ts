import { describe, expect, test } from 'bun:test';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_LIVENESS_PORT, DEFAULT_LIVENESS_TIMEOUT_MS } from '../announce/l2/liveness.ts';
import { DEFAULT_PROBE_COUNT } from '../net/l2/probe.ts';
import { FlagErrors } from './errors.ts';
import { renderSpeakerHelp } from './help.ts';
import { renderFlagsMarkdown } from './markdown.ts';
import { parseSpeakerArgs, SPEAKER_FLAGS } from './speaker.ts';

const REQUIRED = ['--cloud-config=/etc/edge-ccm/config.yaml', '--liveness-key-file=/etc/edge-ccm/key', '--node-name=n1'];

/** The problems parseSpeakerArgs reports, as "--flag: message" lines. */
function problems(argv: string[], env: Record<string, string> = {}): string[] {
  try {
    parseSpeakerArgs(argv, env);
  } catch (e) {
    if (e instanceof FlagErrors) return e.errors.map((err) => `${err.flag}: ${err.message}`);
    throw e;
  }
  return [];
}

describe('edge-ccm speaker flags', () => {
  test('defaults are the announcer\'s own, the metrics endpoint on 127.0.0.1:7472', () => {
    expect(parseSpeakerArgs(REQUIRED, {})).toEqual({
      cloudConfig: '/etc/edge-ccm/config.yaml',
      nodeName: 'n1',
      kubeconfig: undefined,
      livenessKeyFile: '/etc/edge-ccm/key',
      livenessPort: DEFAULT_LIVENESS_PORT,
      heartbeatIntervalMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
      livenessTimeoutMs: DEFAULT_LIVENESS_TIMEOUT_MS,
      addressProbes: DEFAULT_PROBE_COUNT,
      metrics: { hostname: '127.0.0.1', port: 7472 },
      loggingFormat: 'text',
      verbosity: 0,
    });
  });

  test('reads every flag, in both spellings; --node-name falls back to $NODE_NAME', () => {
    const options = parseSpeakerArgs(
      ['--cloud-config', 'c.yaml', '--liveness-key-file=k', '--kubeconfig=kc', '--liveness-port=7000', '--heartbeat-interval=500ms', '--liveness-timeout', '2s', '--address-probes=0', '--metrics-bind-address=[::1]:0', '--logging-format=json', '--v=2'],
      { NODE_NAME: 'from-env' },
    );
    expect(options).toMatchObject({ nodeName: 'from-env', kubeconfig: 'kc', livenessPort: 7000, heartbeatIntervalMs: 500, livenessTimeoutMs: 2000, addressProbes: 0, metrics: { hostname: '::1', port: 0 }, loggingFormat: 'json', verbosity: 2 });
    expect(parseSpeakerArgs([...REQUIRED, '--metrics-bind-address=0'], {})).toMatchObject({ metrics: undefined });
    expect(parseSpeakerArgs([...REQUIRED, '--node-name=flag'], { NODE_NAME: 'env' })).toMatchObject({ nodeName: 'flag' });
  });

  test('--help, -h', () => {
    expect(parseSpeakerArgs(['--help'], {})).toBe('help');
    expect(parseSpeakerArgs(['-h'], {})).toBe('help');
  });

  test('every problem at once, each under its flag', () => {
    expect(problems([])).toEqual([
      '--node-name: required (or set NODE_NAME, as the DaemonSet does from spec.nodeName)',
      '--cloud-config: required (the file with the loadBalancer pools)',
    ]);
    expect(problems([...REQUIRED, '--liveness-port=0', '--address-probes=11', '--metrics-bind-address=7472', '--logging-format=yaml', '--v=-1', '--heartbeat-interval=0s'])).toEqual([
      '--liveness-port: "0" is not a port',
      '--heartbeat-interval: must be positive, got 0s',
      '--address-probes: "11" is not an integer from 0 to 10',
      '--metrics-bind-address: "7472" is not HOST:PORT',
      '--logging-format: "yaml" is not text or json',
      '--v: "-1" is not a non-negative integer',
    ]);
    expect(problems([...REQUIRED, '--liveness-port=65536', '--metrics-bind-address=h:x'])).toEqual(['--liveness-port: "65536" is not a port', '--metrics-bind-address: "h:x" is not HOST:PORT']);
  });

  test('the liveness timeout must outlast the heartbeat interval', () => {
    expect(problems([...REQUIRED, '--heartbeat-interval=3s', '--liveness-timeout=3s'])).toEqual(['--liveness-timeout: 3000 ms must be longer than --heartbeat-interval (3000 ms)']);
    // An unreadable interval is reported once, not compared.
    expect(problems([...REQUIRED, '--heartbeat-interval=soon'])).toHaveLength(1);
  });

  test('unknown flags, the manager\'s flags and stray words are refused', () => {
    expect(problems([...REQUIRED, '--leader-elect'])).toEqual(['--leader-elect: unknown flag']);
    expect(problems([...REQUIRED, '--liveness-port=abc'])).toEqual(['--liveness-port: invalid integer "abc"']);
    expect(problems([...REQUIRED, 'extra'])).toEqual(['(arguments): unexpected argument "extra"']);
  });

  test('a misspelt required flag is one line, its suggestion; the other missing ones are still named', () => {
    expect(problems(['--cloud-confg=/etc/edge-ccm/config.yaml', '--liveness-key-file=/k', '--node-name=n1'])).toEqual(['--cloud-confg: unknown flag (did you mean --cloud-config?)']);
    expect(problems(['--cloud-confg=/etc/edge-ccm/config.yaml'])).toEqual([
      '--cloud-confg: unknown flag (did you mean --cloud-config?)',
      '--node-name: required (or set NODE_NAME, as the DaemonSet does from spec.nodeName)',
    ]);
  });

  test('--help and docs/flags.md list every speaker flag with its default, in the manager\'s layout', () => {
    const help = renderSpeakerHelp(100_000);
    const markdown = renderFlagsMarkdown();
    expect(help).toContain('Usage:\n  edge-ccm speaker --cloud-config FILE [--liveness-key-file FILE] [flags]\n');
    expect(help).toContain('\nExit codes:\n');
    for (const def of SPEAKER_FLAGS) {
      expect(help.split('\n').filter((l) => new RegExp(`^ +(-\\w, )?--${def.name} `).test(l))).toHaveLength(1);
      expect(markdown).toContain(`--${def.name}\``);
    }
    expect(help).toContain(`--liveness-port int `);
    expect(help).toMatch(new RegExp(`--liveness-port int +UDP port of the heartbeats. \\(default ${DEFAULT_LIVENESS_PORT}\\)`));
    expect(help).toMatch(/--metrics-bind-address host:port +.*\(default "?127\.0\.0\.1:7472"?\)/);
    expect(help).toMatch(/--heartbeat-interval duration +.*\(default 250ms\)/);
    expect(markdown).toContain('## `edge-ccm speaker` flags');
  });
});
