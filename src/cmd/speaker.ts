import { loadKubeConfig } from '../app/kubeconfig.ts';
import { createRegistry, restClientObserver } from '../app/metrics.ts';
import { readCloudConfigFile } from '../cloud/config-file.ts';
import { EventBroadcaster } from '../kube/events.ts';
import { BunKubeTransport } from '../kube/transport.ts';
import { logHttpVersionChange, logHttpVersionAtStart } from '../kube/http-version.ts';
import { createLogger } from '../log.ts';
import { EXIT_FAILURE, EXIT_INVALID_INPUT, EXIT_OK, FLAG_ERROR_EXIT_CODE, FlagErrors, formatFlagError } from '../options/index.ts';
import { helpWidth, renderSpeakerHelp } from '../options/help.ts';
import { parseSpeakerArgs, type SpeakerOptions } from '../options/speaker.ts';
import { readBoundedFileSync } from '../util/bounded-file.ts';
import { errorMessage } from '../util/errors.ts';
import { formatConfigErrors } from '../config-file/yaml-load.ts';
import { WatchedConfig } from '../config-file/watch.ts';
import type { LoadBalancerConfig } from '../lb/config-model.ts';
import { loadSpeakerConfig } from '../announce/config.ts';
import { L2Announcer } from '../announce/l2/announcer.ts';
import { loadNodeBgpConfig, type NodeBgpConfig } from '../announce/bgp/node-config.ts';
import { NodeBgpAnnouncer } from '../announce/bgp/node-announcer.ts';
import { DEFAULT_PROBE_INTERVAL_MS } from '../net/l2/probe.ts';

/** The heartbeat key must be long enough that guessing it is hopeless. */
const MIN_KEY_BYTES = 32;

/** `edge-ccm speaker ...`: exits 0 on SIGTERM/SIGINT, 2 on bad flags or config, 1 on other failures. */
export async function runSpeaker(argv: string[]): Promise<number> {
  let flags: SpeakerOptions;
  try {
    const parsed = parseSpeakerArgs(argv);
    if (parsed === 'help') {
      console.log(renderSpeakerHelp(helpWidth()));
      return EXIT_OK;
    }
    flags = parsed;
  } catch (e) {
    if (!(e instanceof FlagErrors)) throw e;
    for (const err of e.errors) console.error(`error: speaker: ${formatFlagError(err)}`);
    console.error("Run 'edge-ccm speaker --help' for usage.");
    return FLAG_ERROR_EXIT_CODE;
  }
  const logger = createLogger({ format: flags.loggingFormat, verbosity: flags.verbosity });

  let text: string;
  let key: Uint8Array;
  try {
    text = readCloudConfigFile(flags.cloudConfig);
    // Trimmed: a key written with echo ends in a newline on some nodes' copies and not others'.
    key = Buffer.from(readBoundedFileSync(flags.livenessKeyFile, 4096).trim(), 'utf8');
  } catch (e) {
    console.error(`error: speaker: ${errorMessage(e)}`);
    return EXIT_INVALID_INPUT;
  }
  if (key.length < MIN_KEY_BYTES) {
    // The key itself is never printed, only its length.
    console.error(`error: speaker: --liveness-key-file: ${flags.livenessKeyFile} holds ${key.length} bytes; at least ${MIN_KEY_BYTES} are needed`);
    return EXIT_INVALID_INPUT;
  }
  const loaded = loadSpeakerConfig(text);
  if (!loaded.ok) {
    console.error(`error: speaker: --cloud-config: invalid configuration:\n${formatConfigErrors(flags.cloudConfig, loaded.errors)}`);
    return EXIT_INVALID_INPUT;
  }
  const loadedBgp = loadNodeBgpConfig(text);
  if (!loadedBgp.ok) {
    console.error(`error: speaker: --cloud-config: invalid configuration:\n${formatConfigErrors(flags.cloudConfig, loadedBgp.errors)}`);
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
    liveness: { key, port: flags.livenessPort, intervalMs: flags.heartbeatIntervalMs, timeoutMs: flags.livenessTimeoutMs },
    logger,
    registry,
    events: events.recorder('edge-ccm-speaker'),
    probe: { count: flags.addressProbes, intervalMs: DEFAULT_PROBE_INTERVAL_MS },
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
    logger.info('speaker starting', { node: flags.nodeName, pools: loaded.config.pools.filter((p) => p.announce === 'l2').map((p) => p.name).join(','), metrics: server ? `http://${flags.metrics!.hostname}:${server.port}` : 'off', livenessPort: flags.livenessPort });
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
