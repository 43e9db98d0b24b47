import { readCloudConfigFile } from '../cloud/config-file.ts';
import { EXIT_FAILURE, EXIT_INVALID_INPUT, EXIT_OK } from '../options/exit-codes.ts';
import { FLAG_ERROR_EXIT_CODE, FlagErrors, formatFlagError } from '../options/errors.ts';
import { errorMessage } from '../util/errors.ts';
import type { Registry } from 'prom-client';
import { formatConfigErrors, type ConfigLoadResult } from '../config-file/yaml-load.ts';
import { readBoundedFileSync } from '../util/bounded-file.ts';

/** What `edge-ccm speaker` and `edge-ccm vip` share before they start: their flags and the heartbeat key. */

/** The heartbeat key must be long enough that guessing it is hopeless. */
const MIN_KEY_BYTES = 32;

/**
 * The subcommand's options, or the exit code when there is nothing to run: 0 after printing
 * --help, FLAG_ERROR_EXIT_CODE after printing every flag problem.
 */
export function parseSubcommandFlags<T>(command: string, parse: () => T | 'help', help: () => string): T | number {
  try {
    const parsed = parse();
    if (parsed !== 'help') return parsed;
    console.log(help());
    return EXIT_OK;
  } catch (e) {
    if (!(e instanceof FlagErrors)) throw e;
    for (const err of e.errors) console.error(`error: ${command}: ${formatFlagError(err)}`);
    console.error(`Run 'edge-ccm ${command} --help' for usage.`);
    return FLAG_ERROR_EXIT_CODE;
  }
}

/** The heartbeat key in `path` (trimmed: a key written with echo ends in a newline on some hosts' copies and not others'); throws naming the file, never the key. */
export function readHeartbeatKey(path: string): Uint8Array {
  const key = Buffer.from(readBoundedFileSync(path, 4096).trim(), 'utf8');
  // The key itself is never printed, only its length.
  if (key.length < MIN_KEY_BYTES) throw new Error(`--liveness-key-file: ${path} holds ${key.length} bytes; at least ${MIN_KEY_BYTES} are needed`);
  return key;
}

/** The config file's text and the heartbeat key, or EXIT_INVALID_INPUT after printing why. */
export function readConfigAndKey(command: string, flags: { cloudConfig: string; livenessKeyFile: string }): { text: string; key: Uint8Array } | number {
  const read = readConfigAndOptionalKey(command, flags);
  if (typeof read === 'number' || read.key) return read as { text: string; key: Uint8Array } | number;
  console.error(`error: ${command}: --liveness-key-file: required (a shared secret signing the heartbeats)`);
  return FLAG_ERROR_EXIT_CODE;
}

/** As readConfigAndKey, the key read only when --liveness-key-file is given. */
export function readConfigAndOptionalKey(command: string, flags: { cloudConfig: string; livenessKeyFile: string }): { text: string; key?: Uint8Array } | number {
  try {
    return { text: readCloudConfigFile(flags.cloudConfig), key: flags.livenessKeyFile ? readHeartbeatKey(flags.livenessKeyFile) : undefined };
  } catch (e) {
    console.error(`error: ${command}: ${errorMessage(e)}`);
    return EXIT_INVALID_INPUT;
  }
}

/** The config file's section this subcommand reads, or EXIT_INVALID_INPUT after printing every problem with its line. */
export function loadSection<C>(command: string, path: string, result: ConfigLoadResult<C>): C | number {
  if (result.ok) return result.config;
  console.error(`error: ${command}: --cloud-config: invalid configuration:\n${formatConfigErrors(path, result.errors)}`);
  return EXIT_INVALID_INPUT;
}

/**
 * Plain-HTTP /metrics and /healthz (and /readyz when given) on `at`; undefined when it is off; an
 * exit code when it cannot listen (the port taken, e.g. by the previous process of a restart
 * still shutting down): said in one line naming the flag, not a stack.
 */
export function serveMetrics(command: string, at: { hostname: string; port: number } | undefined, registry: Registry, ready?: () => boolean): ReturnType<typeof Bun.serve> | undefined | number {
  if (!at) return undefined;
  try {
    return Bun.serve({
      hostname: at.hostname,
      port: at.port,
      fetch: async (req) => {
        const path = new URL(req.url).pathname;
        if (path === '/healthz') return new Response('ok');
        if (path === '/readyz' && ready) return ready() ? new Response('ok') : new Response('not ready', { status: 503 });
        if (path === '/metrics') return new Response(await registry.metrics(), { headers: { 'content-type': registry.contentType } });
        return new Response('not found', { status: 404 });
      },
    });
  } catch (e) {
    console.error(`error: ${command}: --metrics-bind-address=${at.hostname.includes(':') ? `[${at.hostname}]` : at.hostname}:${at.port}: cannot listen: ${errorMessage(e)}`);
    return EXIT_FAILURE;
  }
}
