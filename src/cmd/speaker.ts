import { parseArgs } from 'node:util';
import { loadKubeConfig } from '../app/kubeconfig.ts';
import { createRegistry, restClientObserver } from '../app/metrics.ts';
import { readCloudConfigFile } from '../cloud/config-file.ts';
import { EventBroadcaster } from '../kube/events.ts';
import { BunKubeTransport } from '../kube/transport.ts';
import { logHttpVersionChange, logHttpVersionAtStart } from '../kube/http-version.ts';
import { createLogger, type LogFormat } from '../log.ts';
import { parseGoDuration } from '../util/duration.ts';
import { EXIT_FAILURE, EXIT_INVALID_INPUT, EXIT_OK, FLAG_ERROR_EXIT_CODE } from '../options/index.ts';
import { readBoundedFileSync } from '../util/bounded-file.ts';
import { errorMessage } from '../util/errors.ts';
import { formatConfigErrors } from '../config-file/yaml-load.ts';
import { WatchedConfig } from '../config-file/watch.ts';
import type { LoadBalancerConfig } from '../lb/config-model.ts';
import { loadSpeakerConfig } from '../announce/config.ts';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_LIVENESS_PORT, DEFAULT_LIVENESS_TIMEOUT_MS } from '../announce/l2/liveness.ts';
import { L2Announcer } from '../announce/l2/announcer.ts';
import { loadNodeBgpConfig, type NodeBgpConfig } from '../announce/bgp/node-config.ts';
import { NodeBgpAnnouncer } from '../announce/bgp/node-announcer.ts';
import { DEFAULT_PROBE_COUNT, DEFAULT_PROBE_INTERVAL_MS } from '../net/l2/probe.ts';

export const SPEAKER_USAGE = `Usage: edge-ccm speaker --cloud-config FILE --liveness-key-file FILE [flags]

Answers ARP and NDP for the load-balancer addresses of announce: l2 pools that this node is
elected for (docs/networking/l2.md); with bgp.loadBalancers.announceFrom: nodes, also announces
the addresses of announce: bgp pools this node may serve over its own BGP sessions, each tied
to a BFD session (docs/networking/bgp.md). Runs on every node with host networking.

Flags:
  --cloud-config FILE          the controller's config file; only its loadBalancer and bgp sections are read (reloaded on change)
  --node-name NAME             this node's name (default: $NODE_NAME)
  --kubeconfig FILE            API server credentials (default: in-cluster service account)
  --liveness-key-file FILE     shared secret (at least 32 bytes) signing the speakers' heartbeats
  --liveness-port PORT         UDP port of the heartbeats (default ${DEFAULT_LIVENESS_PORT})
  --heartbeat-interval DUR     how often each speaker tells the others it is alive (default ${DEFAULT_HEARTBEAT_INTERVAL_MS / 1000}s)
  --liveness-timeout DUR       silence after which a speaker counts as dead (default ${DEFAULT_LIVENESS_TIMEOUT_MS / 1000}s)
  --address-probes N           ARP probes / DAD solicitations, 1 s apart, of a newly assigned address before it is
                               first announced; a host answering holds it back (default ${DEFAULT_PROBE_COUNT}; 0: no probe)
  --metrics-bind-address A:P   plain-HTTP /metrics and /healthz (default 127.0.0.1:7472; "0" turns it off)
  --logging-format text|json   (default text)
  --v N                        log verbosity (default 0)
`;

/** The heartbeat key must be long enough that guessing it is hopeless. */
const MIN_KEY_BYTES = 32;

interface SpeakerFlags {
  cloudConfig: string;
  nodeName: string;
  kubeconfig?: string;
  keyFile: string;
  port: number;
  intervalMs: number;
  timeoutMs: number;
  probes: number;
  metrics?: { hostname: string; port: number };
  format: LogFormat;
  verbosity: number;
}

/** `edge-ccm speaker ...`: exits 0 on SIGTERM/SIGINT, 2 on bad flags or config, 1 on other failures. */
export async function runSpeaker(argv: string[]): Promise<number> {
  let flags: SpeakerFlags;
  try {
    const parsed = parseSpeakerFlags(argv);
    if (parsed === 'help') {
      console.log(SPEAKER_USAGE);
      return EXIT_OK;
    }
    flags = parsed;
  } catch (e) {
    for (const line of errorMessage(e).split('\n')) console.error(`error: speaker: ${line}`);
    console.error("Run 'edge-ccm speaker --help' for usage.");
    return FLAG_ERROR_EXIT_CODE;
  }
  const logger = createLogger({ format: flags.format, verbosity: flags.verbosity });

  let text: string;
  let key: Uint8Array;
  try {
    text = readCloudConfigFile(flags.cloudConfig);
    // Trimmed: a key written with echo ends in a newline on some nodes' copies and not others'.
    key = Buffer.from(readBoundedFileSync(flags.keyFile, 4096).trim(), 'utf8');
  } catch (e) {
    console.error(`error: speaker: ${errorMessage(e)}`);
    return EXIT_INVALID_INPUT;
  }
  if (key.length < MIN_KEY_BYTES) {
    // The key itself is never printed, only its length.
    console.error(`error: speaker: --liveness-key-file: ${flags.keyFile} holds ${key.length} bytes; at least ${MIN_KEY_BYTES} are needed`);
    return EXIT_INVALID_INPUT;
  }
  const loaded = loadSpeakerConfig(text);
  if (!loaded.ok) {
    console.error(formatConfigErrors(flags.cloudConfig, loaded.errors));
    return EXIT_INVALID_INPUT;
  }
  const loadedBgp = loadNodeBgpConfig(text);
  if (!loadedBgp.ok) {
    console.error(formatConfigErrors(flags.cloudConfig, loadedBgp.errors));
    return EXIT_INVALID_INPUT;
  }

  const registry = createRegistry();
  let transport: BunKubeTransport;
  try {
    transport = new BunKubeTransport(loadKubeConfig({ kubeconfig: flags.kubeconfig }), { userAgent: 'edge-ccm-speaker', observe: restClientObserver(registry), onHttpVersionChange: logHttpVersionChange(logger) });
    logHttpVersionAtStart(logger);
  } catch (e) {
    console.error(`error: speaker: ${errorMessage(e)}`);
    return EXIT_INVALID_INPUT;
  }
  const events = new EventBroadcaster({ transport, logger, instance: flags.nodeName });
  const speaker = new L2Announcer({
    node: flags.nodeName,
    transport,
    pools: loaded.config,
    liveness: { key, port: flags.port, intervalMs: flags.intervalMs, timeoutMs: flags.timeoutMs },
    logger,
    registry,
    events: events.recorder('edge-ccm-speaker'),
    probe: { count: flags.probes, intervalMs: DEFAULT_PROBE_INTERVAL_MS },
  });
  const nodeBgp = new NodeBgpAnnouncer({ node: flags.nodeName, transport, config: loadedBgp.config, logger, registry });
  const bgpConfig = new WatchedConfig<NodeBgpConfig>({ owner: 'speaker', path: flags.cloudConfig, initialText: text, load: (t) => loadNodeBgpConfig(t), apply: (c) => nodeBgp.setConfig(c), logger });
  const config = new WatchedConfig<LoadBalancerConfig>({
    owner: 'speaker',
    path: flags.cloudConfig,
    initialText: text,
    load: (t) => loadSpeakerConfig(t),
    apply: (pools) => speaker.setPools(pools),
    logger,
  });

  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => stop.abort(sig));
  const server = flags.metrics && Bun.serve({
    hostname: flags.metrics.hostname,
    port: flags.metrics.port,
    fetch: async (req) => {
      const path = new URL(req.url).pathname;
      if (path === '/healthz') return new Response('ok');
      if (path === '/metrics') return new Response(await registry.metrics(), { headers: { 'content-type': registry.contentType } });
      return new Response('not found', { status: 404 });
    },
  });
  try {
    await config.start();
    await bgpConfig.start();
    logger.info('speaker starting', { node: flags.nodeName, pools: loaded.config.pools.filter((p) => p.announce === 'l2').map((p) => p.name).join(','), metrics: server ? `http://${flags.metrics!.hostname}:${server.port}` : 'off', livenessPort: flags.port });
    await Promise.all([speaker.run(stop.signal), nodeBgp.run(stop.signal)]);
    return EXIT_OK;
  } catch (e) {
    logger.error('speaker failed', { error: errorMessage(e) });
    return EXIT_FAILURE;
  } finally {
    config.stop();
    bgpConfig.stop();
    void server?.stop(true);
    await events.close(2000);
  }
}

function parseSpeakerFlags(argv: string[]): SpeakerFlags | 'help' {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      'cloud-config': { type: 'string' },
      'node-name': { type: 'string' },
      kubeconfig: { type: 'string' },
      'liveness-key-file': { type: 'string' },
      'liveness-port': { type: 'string' },
      'heartbeat-interval': { type: 'string' },
      'liveness-timeout': { type: 'string' },
      'metrics-bind-address': { type: 'string' },
      'address-probes': { type: 'string' },
      'logging-format': { type: 'string' },
      v: { type: 'string' },
    },
  });
  if (values.help) return 'help';
  const errors: string[] = [];
  if (positionals.length) errors.push(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const nodeName = values['node-name'] || process.env.NODE_NAME || '';
  if (!nodeName) errors.push('--node-name: required (or set NODE_NAME, as the DaemonSet does from spec.nodeName)');
  if (!values['cloud-config']) errors.push('--cloud-config: required (the file with the loadBalancer pools)');
  if (!values['liveness-key-file']) errors.push('--liveness-key-file: required (a shared Secret signing the heartbeats)');
  const duration = (flag: string, fallback: number) => {
    const text = values[flag as keyof typeof values] as string | undefined;
    if (text === undefined) return fallback;
    try {
      const ms = parseGoDuration(text);
      if (ms <= 0) throw new Error('must be positive');
      return ms;
    } catch (e) {
      errors.push(`--${flag}: ${errorMessage(e)}`);
      return fallback;
    }
  };
  const intervalMs = duration('heartbeat-interval', DEFAULT_HEARTBEAT_INTERVAL_MS);
  const timeoutMs = duration('liveness-timeout', DEFAULT_LIVENESS_TIMEOUT_MS);
  if (timeoutMs <= intervalMs) errors.push(`--liveness-timeout (${timeoutMs} ms) must be longer than --heartbeat-interval (${intervalMs} ms)`);
  const probes = Number(values['address-probes'] ?? DEFAULT_PROBE_COUNT);
  if (!Number.isInteger(probes) || probes < 0 || probes > 10) errors.push(`--address-probes: ${JSON.stringify(values['address-probes'])} is not an integer from 0 to 10`);
  const port = portOf('--liveness-port', values['liveness-port'] ?? String(DEFAULT_LIVENESS_PORT), errors);
  let metrics: SpeakerFlags['metrics'];
  const bind = values['metrics-bind-address'] ?? '127.0.0.1:7472';
  if (bind !== '0') {
    const colon = bind.lastIndexOf(':');
    const hostname = bind.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
    if (colon <= 0 || !hostname) errors.push(`--metrics-bind-address: ${JSON.stringify(bind)} is not HOST:PORT`);
    else metrics = { hostname, port: portOf('--metrics-bind-address', bind.slice(colon + 1), errors, true) };
  }
  const format = values['logging-format'] ?? 'text';
  if (format !== 'text' && format !== 'json') errors.push(`--logging-format: ${JSON.stringify(format)} is not text or json`);
  const verbosity = Number(values.v ?? 0);
  if (!Number.isInteger(verbosity) || verbosity < 0) errors.push(`--v: ${JSON.stringify(values.v)} is not a non-negative integer`);
  if (errors.length) throw new Error(errors.join('\n'));
  return {
    cloudConfig: values['cloud-config']!,
    nodeName,
    kubeconfig: values.kubeconfig,
    keyFile: values['liveness-key-file']!,
    port,
    intervalMs,
    timeoutMs,
    probes,
    metrics,
    format: format as LogFormat,
    verbosity,
  };
}

function portOf(flag: string, text: string, errors: string[], allowZero = false): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || port > 65535 || (port === 0 && !allowZero)) errors.push(`${flag}: ${JSON.stringify(text)} is not a port`);
  return port;
}
