import { readKubeconfig } from '../app/kubeconfig-reader.ts';
import { createRegistry, restClientObserver } from '../app/metrics.ts';
import { EventBroadcaster } from '../kube/events.ts';
import { BunKubeTransport } from '../kube/transport.ts';
import { logHttpVersionChange, logHttpVersionAtStart } from '../kube/http-version.ts';
import { createLogger } from '../log.ts';
import { EXIT_FAILURE, EXIT_INVALID_INPUT, EXIT_OK } from '../options/exit-codes.ts';
import { helpWidth, renderSpeakerHelp } from '../options/help.ts';
import { parseSpeakerArgs, type SpeakerOptions } from '../options/speaker.ts';
import { errorMessage } from '../util/errors.ts';
import { WatchedConfig } from '../config-file/watch.ts';
import type { LoadBalancerConfig } from '../lb/config-model.ts';
import { loadSpeakerConfig } from '../announce/config.ts';
import { L2Announcer } from '../announce/l2/announcer.ts';
import { loadNodeBgpConfig, type NodeBgpConfig } from '../announce/bgp/node-config.ts';
import { NodeBgpAnnouncer } from '../announce/bgp/node-announcer.ts';
import { DEFAULT_PROBE_INTERVAL_MS } from '../net/l2/probe.ts';
import { FLAG_ERROR_EXIT_CODE } from '../options/errors.ts';
import { loadSection, parseSubcommandFlags, readConfigAndOptionalKey, serveMetrics } from './subcommand.ts';

/** `edge-ccm speaker ...`: exits 0 on SIGTERM/SIGINT, 2 on bad flags or config, 1 on other failures. */
export async function runSpeaker(argv: string[]): Promise<number> {
  const flags = parseSubcommandFlags<SpeakerOptions>('speaker', () => parseSpeakerArgs(argv), () => renderSpeakerHelp(helpWidth()));
  if (typeof flags === 'number') return flags;
  const logger = createLogger({ format: flags.loggingFormat, verbosity: flags.verbosity });

  const inputs = readConfigAndOptionalKey('speaker', flags);
  if (typeof inputs === 'number') return inputs;
  const { text, key } = inputs;
  const pools = loadSection('speaker', flags.cloudConfig, loadSpeakerConfig(text));
  if (typeof pools === 'number') return pools;
  const nodeBgpConfig = loadSection('speaker', flags.cloudConfig, loadNodeBgpConfig(text));
  if (typeof nodeBgpConfig === 'number') return nodeBgpConfig;
  // The L2 part (ARP/NDP answers and the heartbeats it elects by) runs only for a file with an
  // announce: l2 pool at start: a BGP-only speaker (announceFrom: nodes) needs no key and sends no heartbeats.
  const l2Pools = l2PoolNames(pools);
  if (l2Pools.length > 0 && !key) {
    console.error(`error: speaker: --liveness-key-file: required: ${flags.cloudConfig} has announce: l2 pools (${l2Pools.join(', ')}), whose answering speakers elect by signed heartbeats`);
    return FLAG_ERROR_EXIT_CODE;
  }

  const registry = createRegistry();
  let transport: BunKubeTransport;
  try {
    transport = new BunKubeTransport(readKubeconfig({ kubeconfig: flags.kubeconfig }), { userAgent: 'edge-ccm-speaker', observe: restClientObserver(registry), onHttpVersionChange: logHttpVersionChange(logger) });
    logHttpVersionAtStart(logger);
  } catch (e) {
    console.error(`error: speaker: ${errorMessage(e)}`);
    return EXIT_INVALID_INPUT;
  }
  const events = new EventBroadcaster({ transport, logger, instance: flags.nodeName });
  const speaker = l2Pools.length === 0 || !key ? undefined : new L2Announcer({
    node: flags.nodeName,
    transport,
    pools: pools,
    liveness: { key, port: flags.livenessPort, intervalMs: flags.heartbeatIntervalMs, timeoutMs: flags.livenessTimeoutMs },
    logger,
    registry,
    events: events.recorder('edge-ccm-speaker'),
    probe: { count: flags.addressProbes, intervalMs: DEFAULT_PROBE_INTERVAL_MS },
  });
  const nodeBgp = new NodeBgpAnnouncer({ node: flags.nodeName, transport, config: nodeBgpConfig, logger, registry });
  const bgpConfig = new WatchedConfig<NodeBgpConfig>({ owner: 'speaker', path: flags.cloudConfig, initialText: text, load: (t) => loadNodeBgpConfig(t), apply: (c) => nodeBgp.setConfig(c), logger });
  const config = new WatchedConfig<LoadBalancerConfig>({
    owner: 'speaker',
    path: flags.cloudConfig,
    initialText: text,
    load: (t) => loadSpeakerConfig(t),
    apply: (pools) => {
      if (speaker) return speaker.setPools(pools);
      const added = l2PoolNames(pools);
      if (added.length > 0) logger.error('the file has announce: l2 pools now, but this speaker started without any: restart it (with --liveness-key-file) to answer ARP/NDP for them', { pools: added.join(',') });
    },
    logger,
  });

  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => stop.abort(sig));
  const server = serveMetrics('speaker', flags.metrics, registry);
  if (typeof server === 'number') return server;
  try {
    await config.start();
    await bgpConfig.start();
    logger.info('speaker starting', { node: flags.nodeName, pools: l2Pools.join(','), l2: speaker ? 'on' : 'off (no announce: l2 pool at start)', metrics: server ? `http://${flags.metrics!.hostname}:${server.port}` : 'off', livenessPort: speaker ? flags.livenessPort : 'off' });
    await Promise.all([speaker?.run(stop.signal), nodeBgp.run(stop.signal)]);
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

function l2PoolNames(config: LoadBalancerConfig): string[] {
  return config.pools.filter((p) => p.announce === 'l2').map((p) => p.name);
}
