import { describe, expect, test } from 'bun:test';
import { FLAGS, FlagErrors, parseArgs, type FlagError, type Options } from './index.ts';

const PROVIDER = '--cloud-provider=fake';

function options(...argv: string[]): Options {
  return parseArgs([PROVIDER, ...argv]).options;
}

/** The errors parseArgs throws for argv (fails the test when it does not throw FlagErrors). */
function flagErrors(argv: string[]): readonly FlagError[] {
  try {
    parseArgs(argv);
  } catch (error) {
    if (error instanceof FlagErrors) return error.errors;
    throw error;
  }
  throw new Error(`expected FlagErrors for ${JSON.stringify(argv)}`);
}

describe('defaults', () => {
  test('match the upstream cloud-controller-manager', () => {
    const o = parseArgs([PROVIDER]).options;
    expect(o).toMatchObject({
      cloudProvider: 'fake',
      cloudConfig: '',
      kubeconfig: '',
      master: '',
      controllers: ['*'],
      leaderElect: true,
      leaderElectLeaseDurationMs: 15_000,
      leaderElectRenewDeadlineMs: 10_000,
      leaderElectRetryPeriodMs: 2_000,
      leaderElectResourceName: 'cloud-controller-manager',
      leaderElectResourceNamespace: 'kube-system',
      leaderElectResourceLock: 'leases',
      concurrentNodeSyncs: 1,
      concurrentServiceSyncs: 1,
      nodeMonitorPeriodMs: 5_000,
      nodeStatusUpdateFrequencyMs: 300_000,
      routeReconciliationPeriodMs: 10_000,
      configureCloudRoutes: true,
      clusterCIDR: '',
      allocateNodeCIDRs: false,
      clusterName: 'kubernetes',
      bindAddress: '0.0.0.0',
      securePort: 10258,
      tlsCertFile: '',
      tlsPrivateKeyFile: '',
      authenticationKubeconfig: '',
      authorizationKubeconfig: '',
      authenticationSkipLookup: false,
      authorizationAlwaysAllowPaths: ['/healthz', '/readyz', '/livez'],
      kubeApiQps: 20,
      kubeApiBurst: 30,
      kubeApiContentType: 'application/vnd.kubernetes.protobuf',
      useServiceAccountCredentials: false,
      verbosity: 0,
      loggingFormat: 'text',
      version: false,
      help: false,
      minResyncPeriodMs: 43_200_000,
      shutdownGracePeriodMs: 30_000,
    });
    expect([...o.enabledControllers].sort()).toEqual([
      'cloud-node-controller',
      'cloud-node-lifecycle-controller',
      'node-route-controller',
      'service-lb-controller',
    ]);
  });

  test('a parse does not share the default lists with the table or another parse', () => {
    const first = options('--controllers=service');
    const second = options();
    expect(first.controllers).toEqual(['service']);
    expect(second.controllers).toEqual(['*']);
    second.controllers.push('route');
    expect(options().controllers).toEqual(['*']);
  });
});

/** A value other than the default for every flag, and what it becomes. */
const SAMPLES: Record<string, [text: string, value: unknown]> = {
  'cloud-provider': ['other', 'other'],
  'cloud-config': ['/etc/cloud.yaml', '/etc/cloud.yaml'],
  controllers: ['service,-route', ['service', '-route']],
  'leader-elect': ['false', false],
  'leader-elect-lease-duration': ['1m', 60_000],
  'leader-elect-renew-deadline': ['12s', 12_000],
  'leader-elect-retry-period': ['500ms', 500],
  'leader-elect-resource-lock': ['leases', 'leases'],
  'leader-elect-resource-name': ['my-ccm', 'my-ccm'],
  'leader-elect-resource-namespace': ['ccm-system', 'ccm-system'],
  'kube-api-qps': ['7.5', 7.5],
  'kube-api-burst': ['11', 11],
  'kube-api-content-type': ['application/json', 'application/json'],
  'min-resync-period': ['1h30m', 5_400_000],
  'use-service-account-credentials': ['true', true],
  'node-monitor-period': ['7s', 7_000],
  'route-reconciliation-period': ['1m', 60_000],
  'configure-cloud-routes': ['false', false],
  'cluster-cidr': ['10.244.0.0/16,fd00::/56', '10.244.0.0/16,fd00::/56'],
  'node-cidr-mask-size': ['25', 25],
  'node-cidr-mask-size-ipv4': ['26', 26],
  'node-cidr-mask-size-ipv6': ['80', 80],
  'service-cluster-ip-range': ['10.96.0.0/12,fd00:1::/112', '10.96.0.0/12,fd00:1::/112'],
  'allocate-node-cidrs': ['true', true],
  'cluster-name': ['edge', 'edge'],
  'concurrent-node-syncs': ['4', 4],
  'concurrent-service-syncs': ['3', 3],
  'bind-address': ['::', '::'],
  'secure-port': ['0', 0],
  'tls-cert-file': ['/tls/crt', '/tls/crt'],
  'tls-private-key-file': ['/tls/key', '/tls/key'],
  'authentication-kubeconfig': ['/authn.conf', '/authn.conf'],
  'authentication-skip-lookup': ['true', true],
  'authorization-kubeconfig': ['/authz.conf', '/authz.conf'],
  'authorization-always-allow-paths': ['/healthz,/metrics', ['/healthz', '/metrics']],
  kubeconfig: ['/kube.conf', '/kube.conf'],
  master: ['https://10.0.0.1:6443', 'https://10.0.0.1:6443'],
  'node-status-update-frequency': ['1m', 60_000],
  'logging-format': ['json', 'json'],
  v: ['4', 4],
  'shutdown-grace-period': ['0', 0],
  'exit-on-lease-loss': ['true', true],
  'managed-node-provider-id-prefixes': ['static://,metal://', ['static://', 'metal://']],
  'managed-node-selector': ['edge-ccm.io/managed=true', 'edge-ccm.io/managed=true'],
  'node-deletion-policy': ['taint', 'taint'],
  'node-deletion-grace-period': ['90s', 90_000],
  'node-deletion-not-found-threshold': ['5', 5],
  'node-deletion-breaker-max-share': ['0.5', 0.5],
  'node-deletion-breaker-max-count': ['7', 7],
  'node-deletion-breaker-window': ['1h', 3_600_000],
  'node-deletion-breaker-acknowledged': ['true', true],
  'node-lifecycle-provider-timeout': ['3s', 3_000],
  'node-deletion-shrink-max-share': ['0.25', 0.25],
  'node-label-resync': ['true', true],
  'kube-vip-annotation': ['true', true],
  // the rest of upstream's surface (src/options/flags-*.ts)
  profiling: ['false', false],
  'contention-profiling': ['true', true],
  'enable-leader-migration': ['true', true],
  'leader-migration-config': ['/lm.yaml', '/lm.yaml'],
  'feature-gates': ['CloudControllerManagerWatchBasedRoutesReconciliation=true,LoggingAlphaOptions=true', ['CloudControllerManagerWatchBasedRoutesReconciliation=true', 'LoggingAlphaOptions=true']],
  'controller-start-interval': ['2s', 2_000],
  'cidr-allocator-type': ['CloudAllocator', 'CloudAllocator'],
  'external-cloud-volume-plugin': ['gce', 'gce'],
  'allow-untagged-cloud': ['true', true],
  'node-sync-period': ['1m', 60_000],
  'concurrent-node-status-updates': ['6', 6],
  'cert-dir': ['/var/run/ccm', '/var/run/ccm'],
  'tls-cipher-suites': ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256', ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_AES_128_GCM_SHA256']],
  'tls-curve-preferences': ['23,29', ['23', '29']],
  'tls-min-version': ['VersionTLS13', 'VersionTLS13'],
  'tls-sni-cert-key': ['a.crt,a.key:a.example,*.a.example', ['a.crt,a.key:a.example,*.a.example']],
  'disable-http2-serving': ['true', true],
  'http2-max-streams-per-connection': ['100', 100],
  'permit-address-sharing': ['true', true],
  'permit-port-sharing': ['true', true],
  webhooks: ['*', ['*']],
  'webhook-bind-address': ['127.0.0.1', '127.0.0.1'],
  'webhook-cert-dir': ['/wh', '/wh'],
  'webhook-disable-http2-serving': ['true', true],
  'webhook-secure-port': ['0', 0],
  'webhook-tls-cert-file': ['/wh.crt', '/wh.crt'],
  'webhook-tls-cipher-suites': ['TLS_RSA_WITH_AES_128_CBC_SHA', ['TLS_RSA_WITH_AES_128_CBC_SHA']],
  'webhook-tls-curve-preferences': ['24', ['24']],
  'webhook-tls-min-version': ['VersionTLS12', 'VersionTLS12'],
  'webhook-tls-private-key-file': ['/wh.key', '/wh.key'],
  'webhook-tls-sni-cert-key': ['w.crt,w.key', ['w.crt,w.key']],
  'authentication-token-webhook-cache-ttl': ['30s', 30_000],
  'authentication-tolerate-lookup-failure': ['true', true],
  'client-ca-file': ['/ca.crt', '/ca.crt'],
  'requestheader-allowed-names': ['front-proxy-client', ['front-proxy-client']],
  'requestheader-client-ca-file': ['/fp-ca.crt', '/fp-ca.crt'],
  'requestheader-extra-headers-prefix': ['X-Extra-', ['X-Extra-']],
  'requestheader-group-headers': ['X-Group', ['X-Group']],
  'requestheader-uid-headers': ['X-Uid', ['X-Uid']],
  'requestheader-username-headers': ['X-User', ['X-User']],
  'authorization-webhook-cache-authorized-ttl': ['1m', 60_000],
  'authorization-webhook-cache-unauthorized-ttl': ['5s', 5_000],
  vmodule: ['cloud-node-*=4,server=2', 'cloud-node-*=4,server=2'],
  'log-flush-frequency': ['1s', 1_000],
  'log-text-split-stream': ['true', true],
  'log-text-info-buffer-size': ['64Ki', '64Ki'],
  'log-json-split-stream': ['true', true],
  'log-json-info-buffer-size': ['1M', '1M'],
};
const NOT_SAMPLED = new Set(['help', 'version']); // they stop validation; tested on their own
/** Flags that are only valid together with another. */
const COMPANIONS: Record<string, string[]> = {
  'tls-cert-file': ['--tls-private-key-file=/k'],
  'tls-private-key-file': ['--tls-cert-file=/c'],
  'log-text-split-stream': ['--feature-gates=LoggingAlphaOptions=true'],
  'log-json-split-stream': ['--feature-gates=LoggingAlphaOptions=true'],
};

describe('every flag', () => {
  test('has a sample here', () => {
    const names = FLAGS.map((def) => def.name).filter((name) => !NOT_SAMPLED.has(name));
    expect(Object.keys(SAMPLES).sort()).toEqual(names.sort());
  });

  const sampled = FLAGS.filter((def) => !NOT_SAMPLED.has(def.name));
  test.each(sampled.map((def) => [def.name, def.key, def.kind] as const))('--%s (%s, %s) is set', (name, key, kind) => {
    const [text, value] = SAMPLES[name] as [string, unknown];
    const companions = COMPANIONS[name] ?? [];
    const valueOf = (argv: string[]): unknown => parseArgs([PROVIDER, ...companions, ...argv]).options[key];
    expect(valueOf([`--${name}=${text}`])).toEqual(value);
    // `--name value` works for every kind but booleans (see below).
    if (kind !== 'bool') expect(valueOf([`--${name}`, text])).toEqual(value);
  });

  test('all at once', () => {
    // --vmodule is refused beside the json format sampled for --logging-format, as upstream.
    const argv = Object.entries(SAMPLES).filter(([name]) => name !== 'vmodule').map(([name, [text]]) => `--${name}=${text}`);
    const o = parseArgs(argv).options;
    for (const def of FLAGS) {
      const sample = def.name === 'vmodule' ? undefined : SAMPLES[def.name];
      if (sample) expect(o[def.key] as unknown).toEqual(sample[1]);
    }
    expect([...o.enabledControllers]).toEqual(['service-lb-controller']);
  });
});

describe('booleans, as pflag', () => {
  test('a bare flag is true', () => {
    expect(options('--allocate-node-cidrs').allocateNodeCIDRs).toBe(true);
  });

  test.each([
    ['true', true],
    ['True', true],
    ['TRUE', true],
    ['t', true],
    ['T', true],
    ['1', true],
    ['false', false],
    ['False', false],
    ['FALSE', false],
    ['f', false],
    ['F', false],
    ['0', false],
  ])('--leader-elect=%s is %p', (text, value) => {
    expect(options(`--leader-elect=${text}`).leaderElect).toBe(value);
  });

  test('a following word is not a boolean value: "--leader-elect false" is a subcommand "false"', () => {
    const parsed = parseArgs([PROVIDER, '--leader-elect', 'false']);
    expect(parsed.options.leaderElect).toBe(true);
    expect(parsed.command).toBe('false');
  });

  test.each(['yes', 'no', 'on', ''])('--leader-elect=%p is an error', (text) => {
    expect(flagErrors([PROVIDER, `--leader-elect=${text}`])).toEqual([
      { flag: '--leader-elect', message: `invalid boolean ${JSON.stringify(text)} (use true or false)` },
    ]);
  });
});

describe('verbosity and shorthands', () => {
  test.each([[['-v=2']], [['-v2']], [['--v=2']], [['-v', '2']], [['--v', '2']]])('%p', (argv) => {
    expect(options(...argv).verbosity).toBe(2);
  });

  test('-h is --help; bool shorthands combine with a following one', () => {
    const o = parseArgs(['-hv=3']).options;
    expect(o.help).toBe(true);
    expect(o.verbosity).toBe(3);
  });

  test('a long name with one dash is read as shorthands, as pflag does', () => {
    expect(flagErrors([PROVIDER, '-cloud-provider=x'])).toEqual([
      { flag: '-c', message: "unknown shorthand flag: 'c' in -cloud-provider=x" },
    ]);
  });

  test('-v without a value', () => {
    expect(flagErrors([PROVIDER, '-v'])).toEqual([{ flag: '--v', message: "flag needs an argument: 'v' in -v" }]);
  });

  test.each(['-1', 'x', '2.5'])('-v=%s is an error', (text) => {
    const errors = flagErrors([PROVIDER, `-v=${text}`]);
    expect(errors).toHaveLength(1);
    expect(errors[0]?.flag).toBe('--v');
  });
});

describe('argument grammar', () => {
  test('the last of a repeated flag wins', () => {
    expect(options('--cluster-name=a', '--cluster-name', 'b').clusterName).toBe('b');
    expect(options('--kube-api-qps=5', '--kube-api-qps=6').kubeApiQps).toBe(6);
  });

  test('list flags accumulate like pflag StringSlice, replacing the default first', () => {
    expect(options('--controllers=service', '--controllers=route,cloud-node').controllers).toEqual([
      'service',
      'route',
      'cloud-node',
    ]);
  });

  test('list values are CSV: quotes protect commas', () => {
    expect(options('--authorization-always-allow-paths="/a,b",/c').authorizationAlwaysAllowPaths).toEqual(['/a,b', '/c']);
    expect(options('--authorization-always-allow-paths=').authorizationAlwaysAllowPaths).toEqual([]);
    expect(flagErrors([PROVIDER, '--controllers=a"b'])[0]?.flag).toBe('--controllers');
  });

  test('underscores in names read as dashes (WordSepNormalizeFunc)', () => {
    expect(options('--leader_elect=false', '--concurrent_node_syncs=2')).toMatchObject({
      leaderElect: false,
      concurrentNodeSyncs: 2,
    });
  });

  test('a value flag takes the next word even when it starts with a dash', () => {
    expect(options('--cluster-name', '-odd').clusterName).toBe('-odd');
  });

  test('a value may contain "="', () => {
    expect(options('--master=https://h/?a=b').master).toBe('https://h/?a=b');
  });

  test('empty arguments are ignored', () => {
    const parsed = parseArgs(['', PROVIDER, '']);
    expect(parsed.command).toBeUndefined();
    expect(parsed.options.cloudProvider).toBe('fake');
  });

  test('a value flag at the end without a value', () => {
    expect(flagErrors([PROVIDER, '--cluster-name'])).toEqual([{ flag: '--cluster-name', message: 'flag needs an argument' }]);
  });

  test.each([['--bogus'], ['--bogus=1']])('unknown flag %p', (arg) => {
    const name = arg.split('=')[0];
    expect(flagErrors([PROVIDER, arg])).toEqual([{ flag: name as string, message: 'unknown flag' }]);
  });

  test.each([
    ['--Cloud-Provider=x', '--cloud-provider'],
    ['--cloud-provder=static', '--cloud-provider'],
    ['--kube-config=x', '--kubeconfig'],
    ['--node-monitor-perod=5s', '--node-monitor-period'],
  ])('an unknown flag near a known one (2 edits or less) %p: did you mean it?', (arg, known) => {
    const name = arg.split('=')[0];
    expect(flagErrors([PROVIDER, arg])).toEqual([{ flag: name as string, message: `unknown flag (did you mean ${known}?)` }]);
  });

  test('an unknown flag alone is one line: --cloud-provider is not also reported missing (the unknown one may be it)', () => {
    expect(flagErrors(['--cloud-provder=static'])).toEqual([{ flag: '--cloud-provder', message: 'unknown flag (did you mean --cloud-provider?)' }]);
    expect(flagErrors(['--bogus'])).toEqual([{ flag: '--bogus', message: 'unknown flag' }]);
    expect(flagErrors(['-cloud-provider=static'])).toEqual([{ flag: '-c', message: "unknown shorthand flag: 'c' in -cloud-provider=static" }]);
    // Every flag known: the missing one is a real problem again.
    expect(flagErrors(['--v=x'])).toEqual([{ flag: '--v', message: 'invalid integer "x"' }, { flag: '--cloud-provider', message: 'is required' }]);
  });

  test.each(['---x', '--=x'])('bad syntax %p', (arg) => {
    expect(flagErrors([PROVIDER, arg])).toEqual([{ flag: arg, message: 'bad flag syntax' }]);
  });

  test.each(['5', '15', '1d'])('durations need Go syntax: %p', (text) => {
    const errors = flagErrors([PROVIDER, `--node-monitor-period=${text}`]);
    expect(errors).toHaveLength(1);
    expect(errors[0]?.flag).toBe('--node-monitor-period');
    expect(errors[0]?.message).toStartWith(`invalid duration "${text}"`);
  });

  test.each([
    ['--concurrent-node-syncs=two', 'invalid integer "two"'],
    ['--concurrent-node-syncs=1.5', 'invalid integer "1.5"'],
    ['--kube-api-burst=99999999999', 'integer 99999999999 out of range'],
    ['--kube-api-qps=fast', 'invalid number "fast"'],
  ])('numbers: %p', (arg, message) => {
    expect(flagErrors([PROVIDER, arg])).toEqual([{ flag: arg.split('=')[0] as string, message }]);
  });
});

describe('subcommands', () => {
  test('the first positional word is the command; what follows is left unparsed', () => {
    const parsed = parseArgs(['validate', '--cloud-provider=x', '--not-a-flag', 'more']);
    expect(parsed.command).toBe('validate');
    expect(parsed.args).toEqual(['--cloud-provider=x', '--not-a-flag', 'more']);
  });

  test('flags before the command are parsed and validated, --cloud-provider is not required', () => {
    const parsed = parseArgs(['-v=2', 'selftest']);
    expect(parsed.command).toBe('selftest');
    expect(parsed.options.verbosity).toBe(2);
    expect(parsed.options.cloudProvider).toBe('');
    expect(flagErrors(['--secure-port=-1', 'selftest'])[0]?.flag).toBe('--secure-port');
  });

  test('"--" ends the flags', () => {
    const parsed = parseArgs([PROVIDER, '--', '--looks-like-a-flag', 'x']);
    expect(parsed.command).toBe('--looks-like-a-flag');
    expect(parsed.args).toEqual(['x']);
  });

  test('without a command, args is empty', () => {
    expect(parseArgs([PROVIDER]).args).toEqual([]);
  });
});

describe('--help and --version', () => {
  test.each([['--help'], ['-h'], ['--version']])('%p needs no --cloud-provider and skips value checks', (arg) => {
    const o = parseArgs([arg, '--secure-port=70000']).options;
    expect(o.help || o.version).toBe(true);
  });

  test('unknown or unreadable flags are still errors', () => {
    expect(flagErrors(['--help', '--bogus', '--node-monitor-period=5']).map((e) => e.flag)).toEqual([
      '--bogus',
      '--node-monitor-period',
    ]);
  });
});

describe('validation', () => {
  test('--cloud-provider is required to run the manager', () => {
    expect(flagErrors([])).toEqual([{ flag: '--cloud-provider', message: 'is required' }]);
    expect(flagErrors(['--cloud-provider='])).toEqual([{ flag: '--cloud-provider', message: 'is required' }]);
  });

  test('every problem is reported at once, each naming its flag', () => {
    const errors = flagErrors([
      '--node-monitor-period=5',
      '--bogus',
      '--concurrent-node-syncs=0',
      '--concurrent-service-syncs=-2',
      '--secure-port=65536',
      '--logging-format=xml',
      '--kube-api-qps=0',
      '--kube-api-burst=0',
      '--controllers=*,nope',
      '--bind-address=not-an-ip',
    ]);
    expect(errors).toEqual([
      { flag: '--node-monitor-period', message: 'invalid duration "5": missing unit' },
      { flag: '--bogus', message: 'unknown flag' },
      expect.objectContaining({ flag: '--controllers', message: expect.stringContaining('"nope" is not in the list') }),
      { flag: '--kube-api-qps', message: 'must be greater than 0, got 0' },
      { flag: '--kube-api-burst', message: 'must be at least 1, got 0' },
      { flag: '--concurrent-node-syncs', message: 'must be a positive number, got 0' },
      { flag: '--concurrent-service-syncs', message: 'must be a positive number, got -2' },
      { flag: '--bind-address', message: 'invalid IP address "not-an-ip"' },
      { flag: '--secure-port', message: '65536 must be between 0 and 65535, inclusive. 0 for turning off secure port' },
      { flag: '--logging-format', message: 'unsupported log format "xml" (permitted: json, text)' },
    ]);
  });

  test('FlagErrors prints one "flag: message" line per problem', () => {
    try {
      parseArgs(['--bogus', '--v=x', '--concurrent-node-syncs=0']);
      throw new Error('no error');
    } catch (error) {
      expect((error as Error).message).toBe('--bogus: unknown flag\n--v: invalid integer "x"\n--concurrent-node-syncs: must be a positive number, got 0');
    }
  });

  test('a flag that could not be read is reported once, not again by the checks on its default', () => {
    // 20s is not less than the default lease duration, but the lease duration given was 9 (unreadable).
    expect(flagErrors([PROVIDER, '--leader-elect-lease-duration=9', '--leader-elect-renew-deadline=20s'])).toEqual([
      { flag: '--leader-elect-lease-duration', message: 'invalid duration "9": missing unit' },
    ]);
    // ... but a later readable value of the same flag is checked.
    expect(flagErrors([PROVIDER, '--secure-port=x', '--secure-port=70000'])).toEqual([
      { flag: '--secure-port', message: 'invalid integer "x"' },
      { flag: '--secure-port', message: '70000 must be between 0 and 65535, inclusive. 0 for turning off secure port' },
    ]);
  });

  test.each([
    ['--secure-port=0', 'securePort', 0],
    ['--secure-port=65535', 'securePort', 65535],
    ['--kube-api-burst=1', 'kubeApiBurst', 1],
    ['--kube-api-qps=0.5', 'kubeApiQps', 0.5],
  ] as const)('boundary %p is accepted', (arg, key, value) => {
    expect(options(arg)[key]).toBe(value);
  });

  test.each([
    ['--node-monitor-period=0', '--node-monitor-period', 'must be greater than zero, got 0s'],
    ['--route-reconciliation-period=-1s', '--route-reconciliation-period', 'must be greater than zero, got -1s'],
    ['--node-status-update-frequency=0s', '--node-status-update-frequency', 'must be greater than zero, got 0s'],
    ['--min-resync-period=0', '--min-resync-period', 'must be greater than zero, got 0s'],
    ['--shutdown-grace-period=-5s', '--shutdown-grace-period', 'must not be negative, got -5s'],
    ['--secure-port=-1', '--secure-port', '-1 must be between 0 and 65535, inclusive. 0 for turning off secure port'],
    ['--node-deletion-shrink-max-share=1.5', '--node-deletion-shrink-max-share', 'must be between 0 and 1, got 1.5'],
  ])('%p', (arg, flag, message) => {
    expect(flagErrors([PROVIDER, arg])).toEqual([{ flag, message }]);
  });

  describe('TLS files come in pairs', () => {
    test('both or neither', () => {
      expect(options('--tls-cert-file=/c', '--tls-private-key-file=/k')).toMatchObject({ tlsCertFile: '/c', tlsPrivateKeyFile: '/k' });
      expect(options().tlsCertFile).toBe('');
    });
    test('cert without key', () => {
      expect(flagErrors([PROVIDER, '--tls-cert-file=/c'])).toEqual([
        { flag: '--tls-private-key-file', message: 'is required when --tls-cert-file is set' },
      ]);
    });
    test('key without cert', () => {
      expect(flagErrors([PROVIDER, '--tls-private-key-file=/k'])).toEqual([
        { flag: '--tls-cert-file', message: 'is required when --tls-private-key-file is set' },
      ]);
    });
  });

  describe('leader election (component-base and client-go rules)', () => {
    test('the renew deadline must be less than the lease duration', () => {
      expect(flagErrors([PROVIDER, '--leader-elect-renew-deadline=15s'])).toEqual([
        { flag: '--leader-elect-renew-deadline', message: '15s must be less than --leader-elect-lease-duration (15s)' },
      ]);
      expect(options('--leader-elect-renew-deadline=14s').leaderElectRenewDeadlineMs).toBe(14_000);
    });

    test('the renew deadline must exceed 1.2 x the retry period', () => {
      expect(flagErrors([PROVIDER, '--leader-elect-retry-period=9s'])).toEqual([
        {
          flag: '--leader-elect-retry-period',
          message: '9s is too long: --leader-elect-renew-deadline (10s) must be greater than 1.2 x --leader-elect-retry-period',
        },
      ]);
      expect(flagErrors([PROVIDER, '--leader-elect-retry-period=10s'])).toHaveLength(1);
      expect(options('--leader-elect-retry-period=8s').leaderElectRetryPeriodMs).toBe(8_000);
    });

    test('durations must be positive', () => {
      expect(flagErrors([PROVIDER, '--leader-elect-lease-duration=0', '--leader-elect-renew-deadline=0', '--leader-elect-retry-period=0'])).toEqual([
        { flag: '--leader-elect-lease-duration', message: 'must be greater than zero, got 0s' },
        { flag: '--leader-elect-renew-deadline', message: 'must be greater than zero, got 0s' },
        { flag: '--leader-elect-retry-period', message: 'must be greater than zero, got 0s' },
      ]);
    });

    test('only "leases" locks, and a lock name and namespace are needed', () => {
      expect(
        flagErrors([PROVIDER, '--leader-elect-resource-lock=endpoints', '--leader-elect-resource-name=', '--leader-elect-resource-namespace=']),
      ).toEqual([
        { flag: '--leader-elect-resource-lock', message: 'unsupported lock type "endpoints": must be "leases"' },
        { flag: '--leader-elect-resource-name', message: 'is required when --leader-elect is set' },
        { flag: '--leader-elect-resource-namespace', message: 'is required when --leader-elect is set' },
      ]);
    });

    test('nothing is checked when leader election is off, as upstream', () => {
      const o = options('--leader-elect=false', '--leader-elect-renew-deadline=1m', '--leader-elect-resource-lock=endpoints');
      expect(o.leaderElect).toBe(false);
      expect(o.leaderElectRenewDeadlineMs).toBe(60_000);
    });
  });

  test('--controllers selects enabledControllers', () => {
    expect([...options('--controllers=*,-service,-cloud-node-lifecycle').enabledControllers].sort()).toEqual([
      'cloud-node-controller',
      'node-route-controller',
    ]);
    expect([...options('--controllers=').enabledControllers]).toEqual([]);
  });

  test('--cluster-cidr is checked whenever it is given, routes or not; kept as given', () => {
    expect(options('--cluster-cidr= 10.244.1.7/16 ').clusterCIDR).toBe(' 10.244.1.7/16 ');
    expect(options('--cluster-cidr=').clusterCIDR).toBe('');
    expect(flagErrors([PROVIDER, '--cluster-cidr=10.0.0.0/33'])).toEqual([{ flag: '--cluster-cidr', message: 'invalid CIDR "10.0.0.0/33"' }]);
    expect(flagErrors([PROVIDER, '--cluster-cidr=garbage,10.0.0.0/8,10.1.0.0/16'])).toEqual([
      { flag: '--cluster-cidr', message: 'at most two CIDRs (one IPv4, one IPv6) are allowed, got 3' },
    ]);
  });

  test('--authorization-always-allow-paths takes a * only at the end, as the server\'s path matcher', () => {
    expect(options('--authorization-always-allow-paths=/healthz,/debug/*,*').authorizationAlwaysAllowPaths).toEqual(['/healthz', '/debug/*', '*']);
    expect(flagErrors([PROVIDER, '--authorization-always-allow-paths=/ok,/a*b,/*/x'])).toEqual([
      { flag: '--authorization-always-allow-paths', message: 'only a trailing * is allowed in always-allow path "/a*b"' },
      { flag: '--authorization-always-allow-paths', message: 'only a trailing * is allowed in always-allow path "/*/x"' },
    ]);
  });
});
