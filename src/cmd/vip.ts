import { createRegistry } from '../app/metrics.ts';
import { createLogger } from '../log.ts';
import { EXIT_FAILURE, EXIT_INVALID_INPUT, EXIT_OK } from '../options/exit-codes.ts';
import { helpWidth, renderVipHelp } from '../options/help.ts';
import { parseVipArgs, type VipOptions } from '../options/vip.ts';
import { errorMessage } from '../util/errors.ts';
import { loadVipConfig } from '../announce/vip/config.ts';
import { VipAnnouncer } from '../announce/vip/announcer.ts';
import { describeHealthRequest } from '../announce/vip/health-credentials.ts';
import { loadSection, parseSubcommandFlags, readConfigAndKey, serveMetrics } from './subcommand.ts';

/** `edge-ccm vip ...`: exits 0 on SIGTERM/SIGINT, 2 on bad flags or config, 1 on other failures. */
export async function runVip(argv: string[]): Promise<number> {
  const flags = parseSubcommandFlags<VipOptions>('vip', () => parseVipArgs(argv), () => renderVipHelp(helpWidth()));
  if (typeof flags === 'number') return flags;
  const logger = createLogger({ format: flags.loggingFormat, verbosity: flags.verbosity });
  const inputs = readConfigAndKey('vip', flags);
  if (typeof inputs === 'number') return inputs;
  const { text, key } = inputs;
  const config = loadSection('vip', flags.cloudConfig, loadVipConfig(text));
  if (typeof config === 'number') return config;
  if (!config.hosts.has(flags.nodeName)) {
    console.error(`error: vip: --node-name: ${JSON.stringify(flags.nodeName)} is not in controlPlaneEndpoint.hosts (${[...config.hosts.keys()].join(', ')})`);
    return EXIT_INVALID_INPUT;
  }
  const registry = createRegistry();
  const vip = new VipAnnouncer({ node: flags.nodeName, config, key, healthRequest: config.healthRequest, logger, registry });
  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => stop.abort(sig));
  const server = serveMetrics('vip', flags.metrics, registry, () => vip.ready());
  if (typeof server === 'number') return server;
  try {
    logger.info('vip starting', { node: flags.nodeName, addresses: config.addresses.map((a) => a.address).join(','), announce: config.announce, hosts: [...config.hosts.keys()].join(','), healthURL: config.healthURL, ...describeHealthRequest(config.healthRequest), heartbeatPort: config.heartbeatPort, metrics: server ? `http://${flags.metrics!.hostname}:${server.port}` : 'off' });
    await vip.run(stop.signal);
    return EXIT_OK;
  } catch (e) {
    logger.error('vip failed', { error: errorMessage(e) });
    return EXIT_FAILURE;
  } finally {
    void server?.stop(true);
  }
}
