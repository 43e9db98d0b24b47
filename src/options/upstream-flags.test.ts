import { describe, expect, test } from 'bun:test';
import { parseArgs } from './index.ts';
import { FLAGS } from './flags.ts';
import { inertFlagsWarning } from './inert.ts';
import { parseGoDuration } from '../util/duration.ts';
import { UPSTREAM_FLAGS, UPSTREAM_MODULE, type UpstreamFlag } from './upstream-flags.ts';
import { resolveFeatureGates } from './feature-gates.ts';

/** Our kind (and --help type word) for each pflag type upstream uses. */
const KIND_FOR_TYPE: Record<string, { kind: string; typeName?: string }> = {
  bool: { kind: 'bool' },
  string: { kind: 'string' },
  duration: { kind: 'duration' },
  int: { kind: 'int' },
  int32: { kind: 'int', typeName: 'int32' },
  float32: { kind: 'float', typeName: 'float32' },
  stringSlice: { kind: 'list' },
  int32Slice: { kind: 'list', typeName: 'int32Slice' },
  mapStringBool: { kind: 'list', typeName: 'mapStringBool' },
  namedCertKey: { kind: 'repeated', typeName: 'namedCertKey' },
  ip: { kind: 'string', typeName: 'ip' },
  quantity: { kind: 'string', typeName: 'quantity' },
  Level: { kind: 'int', typeName: 'Level' },
  'pattern=N,...': { kind: 'string', typeName: 'pattern=N,...' },
  // --version=raw is a tristate upstream; edge-ccm prints its one version line.
  version: { kind: 'bool' },
};

/** pflag's printed default, read into our value for the kind. */
function upstreamDefault(f: UpstreamFlag, kind: string): unknown {
  switch (kind) {
    case 'bool':
      return f.default === 'true';
    case 'duration':
      return parseGoDuration(f.default);
    case 'int':
    case 'float':
      return Number(f.default);
    case 'list':
    case 'repeated':
      return f.default === '' || f.default === '[]' ? [] : f.default.replace(/^\[|\]$/g, '').split(',');
    default:
      return f.default;
  }
}

const byName = new Map(FLAGS.map((def) => [def.name, def]));

describe(`the flag table covers ${UPSTREAM_MODULE}`, () => {
  test.each(UPSTREAM_FLAGS.map((f) => [f.name, f] as const))('--%s: present, same section, type and default', (_name, f) => {
    const def = byName.get(f.name);
    expect(def, `--${f.name} is missing from src/options/flags*.ts`).toBeDefined();
    if (!def) return;
    expect(def.group as string).toBe(f.section);
    expect(def.shorthand ?? '').toBe(f.shorthand ?? '');
    const want = KIND_FOR_TYPE[f.type];
    expect(want, `no mapping for pflag type ${f.type}`).toBeDefined();
    expect(def.kind as string).toBe(want!.kind);
    if (want!.typeName) expect(def.typeName).toBe(want!.typeName);
    expect(def.default).toEqual(upstreamDefault(f, def.kind) as never);
  });

  test('every other flag is one of ours, in the edge-ccm section', () => {
    const upstream = new Set(UPSTREAM_FLAGS.map((f) => f.name));
    // The nodeipam section is upstream's too, added by cmd/cloud-controller-manager (not k8s.io/cloud-provider).
    const extra = FLAGS.filter((def) => !upstream.has(def.name) && def.group !== 'nodeipam controller');
    expect(extra.length).toBeGreaterThan(0);
    for (const def of extra) expect(`${def.name}: ${def.group}`).toBe(`${def.name}: edge-ccm`);
  });

  test('every upstream flag parses when given its default value, and the command line is accepted', () => {
    // An empty namedCertKey is refused upstream too ("expected comma separated certificate and key file paths").
    const argv = UPSTREAM_FLAGS.filter((f) => !['help', 'version'].includes(f.name) && f.type !== 'namedCertKey').map((f) => {
      const value = f.default === '[]' ? '' : f.default.replace(/^\[|\]$/g, '');
      return `--${f.name}=${value}`;
    });
    argv.push('--cloud-provider=static');
    const parsed = parseArgs(argv);
    expect(parsed.options.cloudProvider).toBe('static');
    expect(parsed.options.givenFlags.size).toBe(argv.length - 1); // --cloud-provider twice
  });
});

describe('the nodeipam controller section (cmd/cloud-controller-manager, kube-controller-manager\'s NodeIPAMControllerOptions)', () => {
  test('has upstream\'s four flags, types and zero defaults', () => {
    const section = FLAGS.filter((def) => def.group === 'nodeipam controller').map((def) => [def.name, def.typeName ?? def.kind, def.default]);
    expect(section).toEqual([
      ['node-cidr-mask-size', 'int32', 0],
      ['node-cidr-mask-size-ipv4', 'int32', 0],
      ['node-cidr-mask-size-ipv6', 'int32', 0],
      ['service-cluster-ip-range', 'string', ''],
    ]);
  });
});

describe('flags without meaning here', () => {
  test('give one warning line naming each flag given and why; none when none given', () => {
    const { options } = parseArgs(['--cloud-provider=static', '--webhook-secure-port=0', '--external-cloud-volume-plugin=gce', '--v=2']);
    const line = inertFlagsWarning(options.givenFlags);
    expect(line).toContain('--webhook-secure-port (edge-ccm serves no admission webhooks');
    expect(line).toContain('--external-cloud-volume-plugin (');
    expect(line).not.toContain('--v ');
    expect(line!.split('\n')).toHaveLength(1);
    expect(inertFlagsWarning(parseArgs(['--cloud-provider=static', '--v=2']).options.givenFlags)).toBeUndefined();
  });

  test('are still checked as upstream checks them', () => {
    expect(() => parseArgs(['--cloud-provider=static', '--webhooks=foo'])).toThrow('--webhooks: "foo" is not in the list of known webhooks');
    expect(() => parseArgs(['--cloud-provider=static', '--secure-port=10260'])).toThrow('--webhook-secure-port: cannot be the same value as --secure-port');
    expect(() => parseArgs(['--cloud-provider=static', '--tls-curve-preferences=P256'])).toThrow('--tls-curve-preferences');
    expect(() => parseArgs(['--cloud-provider=static', '--webhook-bind-address=nope'])).toThrow('invalid IP address');
  });
});

describe('--feature-gates', () => {
  test('knows the gates upstream knows, refuses others, and honours locks', () => {
    expect(parseArgs(['--cloud-provider=static', '--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true']).options.featureGates)
      .toEqual(['CloudControllerManagerWatchBasedRoutesReconciliation=true']);
    expect(() => parseArgs(['--cloud-provider=static', '--feature-gates=NoSuchGate=true'])).toThrow('--feature-gates: unrecognized feature gate: NoSuchGate');
    expect(() => parseArgs(['--cloud-provider=static', '--feature-gates=APIServerTracing=false'])).toThrow(
      'cannot set feature gate APIServerTracing to false, feature is locked to true',
    );
    expect(() => parseArgs(['--cloud-provider=static', '--feature-gates=ContextualLogging=maybe'])).toThrow('invalid value of ContextualLogging=maybe');
    expect(() => parseArgs(['--cloud-provider=static', '--feature-gates=ContextualLogging'])).toThrow('missing bool value for ContextualLogging');
  });

  test('AllAlpha switches alpha gates not named themselves; defaults otherwise', () => {
    const r = resolveFeatureGates(['AllAlpha=true', 'LoggingAlphaOptions=false']);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.gates.enabled('CloudControllerManagerWatchBasedRoutesReconciliation')).toBe(true);
    expect(r.gates.enabled('LoggingAlphaOptions')).toBe(false);
    const d = resolveFeatureGates([]);
    expect(d.ok && d.gates.enabled('CloudControllerManagerWatchBasedRoutesReconciliation')).toBe(false);
  });

  test('uses accumulate like pflag mapStringBool; GA and deprecated gates warn', () => {
    const { options } = parseArgs(['--cloud-provider=static', '--feature-gates=ContextualLogging=false', '--feature-gates=KMSv1=true']);
    const r = resolveFeatureGates(options.featureGates);
    expect(r.ok && [...r.gates.explicit.keys()]).toEqual(['ContextualLogging', 'KMSv1']);
    expect(r.ok && r.gates.warnings.join('\n')).toContain('deprecated feature gate KMSv1=true');
  });

  test('the logging alpha options need their gate; vmodule needs text', () => {
    expect(() => parseArgs(['--cloud-provider=static', '--log-text-split-stream'])).toThrow('--log-text-split-stream: Feature LoggingAlphaOptions is disabled');
    expect(parseArgs(['--cloud-provider=static', '--log-text-split-stream', '--feature-gates=LoggingAlphaOptions=true']).options.logTextSplitStream).toBe(true);
    expect(() => parseArgs(['--cloud-provider=static', '--vmodule=server=4', '--logging-format=json'])).toThrow('--vmodule: Only supported for text log format');
    expect(() => parseArgs(['--cloud-provider=static', '--vmodule=server'])).toThrow('--vmodule: "server" does not have the pattern=N format');
  });
});
