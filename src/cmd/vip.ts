import { createRegistry } from '../app/metrics.ts';
import { readCloudConfigFile } from '../cloud/config-file.ts';
import { formatConfigErrors } from '../config-file/yaml-load.ts';
import { createLogger } from '../log.ts';
import { EXIT_FAILURE, EXIT_INVALID_INPUT, EXIT_OK, FLAG_ERROR_EXIT_CODE, FlagErrors, formatFlagError } from '../options/index.ts';
import { helpWidth, renderVipHelp } from '../options/help.ts';
import { parseVipArgs, type VipOptions } from '../options/vip.ts';
import { readBoundedFileSync } from '../util/bounded-file.ts';
import { errorMessage } from '../util/errors.ts';
import { loadVipConfig } from '../announce/vip/config.ts';
import { VipAnnouncer } from '../announce/vip/announcer.ts';

/** The heartbeat key must be long enough that guessing it is hopeless (as the speaker's). */
const MIN_KEY_BYTES = 32;

/** `edge-ccm vip ...`: exits 0 on SIGTERM/SIGINT, 2 on bad flags or config, 1 on other failures. */
export async function runVip(argv: string[]): Promise<number> {
  let flags: VipOptions;
  try {
    const parsed = parseVipArgs(argv);
    if (parsed === 'help') {
      console.log(renderVipHelp(helpWidth()));
      return EXIT_OK;
    }
    flags = parsed;
  } catch (e) {
    if (!(e instanceof FlagErrors)) throw e;
    for (const err of e.errors) console.error(`error: vip: ${formatFlagError(err)}`);
    console.error("Run 'edge-ccm vip --help' for usage.");
    return FLAG_ERROR_EXIT_CODE;
  }
  const logger = createLogger({ format: flags.loggingFormat, verbosity: flags.verbosity });
  let text: string;
  let key: Uint8Array;
  try {
    text = readCloudConfigFile(flags.cloudConfig);
    key = Buffer.from(readBoundedFileSync(flags.livenessKeyFile, 4096).trim(), 'utf8');
  } catch (e) {
    console.error(`error: vip: ${errorMessage(e)}`);
    return EXIT_INVALID_INPUT;
  }
  if (key.length < MIN_KEY_BYTES) {
    console.error(`error: vip: --liveness-key-file: ${flags.livenessKeyFile} holds ${key.length} bytes; at least ${MIN_KEY_BYTES} are needed`);
    return EXIT_INVALID_INPUT;
  }
  const loaded = loadVipConfig(text);
  if (!loaded.ok) {
    console.error(`error: vip: --cloud-config: invalid configuration:\n${formatConfigErrors(flags.cloudConfig, loaded.errors)}`);
    return EXIT_INVALID_INPUT;
  }
  if (!loaded.config.hosts.has(flags.nodeName)) {
    console.error(`error: vip: --node-name: ${JSON.stringify(flags.nodeName)} is not in controlPlaneEndpoint.hosts (${[...loaded.config.hosts.keys()].join(', ')})`);
    return EXIT_INVALID_INPUT;
  }
  const registry = createRegistry();
  const vip = new VipAnnouncer({ node: flags.nodeName, config: loaded.config, key, logger, registry });
  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => stop.abort(sig));
  const server = flags.metrics && Bun.serve({
    hostname: flags.metrics.hostname,
    port: flags.metrics.port,
    fetch: async (req) => {
      const path = new URL(req.url).pathname;
      if (path === '/healthz') return new Response('ok');
      if (path === '/readyz') return vip.ready() ? new Response('ok') : new Response('warming up', { status: 503 });
      if (path === '/metrics') return new Response(await registry.metrics(), { headers: { 'content-type': registry.contentType } });
      return new Response('not found', { status: 404 });
    },
  });
  try {
    logger.info('vip starting', { node: flags.nodeName, addresses: loaded.config.addresses.map((a) => a.address).join(','), hosts: [...loaded.config.hosts.keys()].join(','), healthURL: loaded.config.healthURL, heartbeatPort: loaded.config.heartbeatPort, metrics: server ? `http://${flags.metrics!.hostname}:${server.port}` : 'off' });
    await vip.run(stop.signal);
    return EXIT_OK;
  } catch (e) {
    logger.error('vip failed', { error: errorMessage(e) });
    return EXIT_FAILURE;
  } finally {
    void server?.stop(true);
  }
}
