/**
 * The flags of `edge-ccm speaker` (the per-node ARP/NDP announcer): a table in the shape of the
 * manager's (flag-def.ts), read by the same argv scanner, each value checked by its schema, the
 * cross-flag rules below, and presented by the same --help layout and docs/flags.md section.
 * Its own table, not rows of FLAGS: the manager must keep refusing --liveness-key-file.
 */
import * as v from 'valibot';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_LIVENESS_PORT, DEFAULT_LIVENESS_TIMEOUT_MS } from '../announce/l2/liveness.ts';
import { DEFAULT_PROBE_COUNT } from '../net/l2/probe.ts';
import { formatGoDuration } from '../util/duration.ts';
import { scanArgv } from './argv.ts';
import { FlagErrors, type FlagError } from './errors.ts';
import { flag } from './flag-def.ts';

const LOGGING_FORMATS = ['text', 'json'] as const;
const positive = v.pipe(v.number(), v.check((ms: number) => ms > 0, (issue) => `must be positive, got ${formatGoDuration(issue.input as number)}`));
const port = (zeroAllowed: boolean) =>
  v.pipe(v.number(), v.check((n: number) => n <= 65535 && (n > 0 || (zeroAllowed && n === 0)), (issue) => `${JSON.stringify(String(issue.input))} is not a port`));

export const SPEAKER_FLAGS = [
  flag({ name: 'help', shorthand: 'h', key: 'help', kind: 'bool', default: false, group: 'speaker', help: 'help for speaker' }),
  flag({
    name: 'cloud-config',
    key: 'cloudConfig',
    kind: 'string',
    default: '',
    group: 'speaker',
    help: "The controller's config file; only its loadBalancer and bgp sections are read (reloaded on change). Required.",
  }),
  flag({ name: 'node-name', key: 'nodeName', kind: 'string', default: '', group: 'speaker', help: "This node's name. Empty: $NODE_NAME (the DaemonSet sets it from spec.nodeName)." }),
  flag({ name: 'kubeconfig', key: 'kubeconfig', kind: 'string', default: '', group: 'speaker', help: 'API server credentials. Empty: the in-cluster service account.' }),
  flag({
    name: 'liveness-key-file',
    key: 'livenessKeyFile',
    kind: 'string',
    default: '',
    group: 'speaker',
    help: "The shared secret (at least 32 bytes) signing the speakers' heartbeats. Required when the file has an announce: l2 pool at start (the L2 part, heartbeats included, runs only then).",
  }),
  flag({ name: 'liveness-port', key: 'livenessPort', kind: 'int', default: DEFAULT_LIVENESS_PORT, group: 'speaker', help: 'UDP port of the heartbeats.', schema: port(false) }),
  flag({
    name: 'heartbeat-interval',
    key: 'heartbeatIntervalMs',
    kind: 'duration',
    default: DEFAULT_HEARTBEAT_INTERVAL_MS,
    group: 'speaker',
    help: 'How often each speaker tells every other node\'s speaker it is alive. Cost per node: 1/interval heartbeats (~150 bytes) to and from each other node (100 nodes at 250ms: ~400 packets/s each way, ~60 KB/s, 6% of a core measured).',
    schema: positive,
  }),
  flag({
    name: 'liveness-timeout',
    key: 'livenessTimeoutMs',
    kind: 'duration',
    default: DEFAULT_LIVENESS_TIMEOUT_MS,
    group: 'speaker',
    help: 'Silence after which a speaker counts as dead and its addresses move; longer than --heartbeat-interval (failover = timeout - up to one interval + the takeover).',
    schema: positive,
  }),
  flag({
    name: 'address-probes',
    key: 'addressProbes',
    kind: 'int',
    default: DEFAULT_PROBE_COUNT,
    group: 'speaker',
    help: 'ARP probes / DAD solicitations, 1 s apart, of a newly assigned address before it is first announced; a host answering holds it back. 0: no probe.',
    schema: v.pipe(v.number(), v.check((n: number) => n >= 0 && n <= 10, (issue) => `${JSON.stringify(String(issue.input))} is not an integer from 0 to 10`)),
  }),
  flag({
    name: 'metrics-bind-address',
    key: 'metricsBindAddress',
    kind: 'string',
    default: '127.0.0.1:7472',
    group: 'speaker',
    typeName: 'host:port',
    help: 'Plain-HTTP /metrics and /healthz. "0" turns it off.',
    schema: v.pipe(
      v.string(),
      v.check((text: string) => text === '0' || bindAddress(text) !== undefined, (issue) => `${JSON.stringify(issue.input)} is not HOST:PORT`),
    ),
  }),
  flag({
    name: 'logging-format',
    key: 'loggingFormat',
    kind: 'string',
    default: 'text',
    group: 'speaker',
    help: 'Sets the log format. Permitted formats: "text", "json".',
    schema: v.picklist(LOGGING_FORMATS, (issue) => `${JSON.stringify(issue.input)} is not text or json`),
  }),
  flag({
    name: 'v',
    key: 'verbosity',
    kind: 'int',
    default: 0,
    group: 'speaker',
    typeName: 'Level',
    help: 'number for the log level verbosity',
    schema: v.pipe(v.number(), v.check((n: number) => n >= 0, (issue) => `${JSON.stringify(String(issue.input))} is not a non-negative integer`)),
  }),
] as const;

export type SpeakerFlagDef = (typeof SPEAKER_FLAGS)[number];

/** What the speaker runs with, read from its flags (and $NODE_NAME). */
export interface SpeakerOptions {
  cloudConfig: string;
  nodeName: string;
  kubeconfig?: string;
  /** Empty: not given (needed only with an announce: l2 pool; the command checks it against the file). */
  livenessKeyFile: string;
  livenessPort: number;
  heartbeatIntervalMs: number;
  livenessTimeoutMs: number;
  addressProbes: number;
  /** Undefined when --metrics-bind-address=0. */
  metrics?: { hostname: string; port: number };
  loggingFormat: (typeof LOGGING_FORMATS)[number];
  verbosity: number;
}

/**
 * Reads `edge-ccm speaker`'s arguments: 'help' for --help, else the options; throws FlagErrors
 * naming every problem (the caller prints them and exits with FLAG_ERROR_EXIT_CODE).
 */
export function parseSpeakerArgs(argv: readonly string[], env: Record<string, string | undefined> = process.env): SpeakerOptions | 'help' {
  const scan = scanArgv(argv, SPEAKER_FLAGS);
  if (scan.values.help === true && scan.errors.length === 0) return 'help';
  const errors: FlagError[] = [...scan.errors];
  if (scan.command !== undefined) errors.push({ flag: '(arguments)', message: `unexpected argument ${JSON.stringify(scan.command)}` });
  const values = scan.values as { -readonly [D in SpeakerFlagDef as D['key']]: D['default'] };
  errors.push(...schemaErrors(SPEAKER_FLAGS, scan));
  const nodeName = values.nodeName || env.NODE_NAME || '';
  // A required flag an unknown one is the misspelling of ("did you mean" names it) is one mistake: one line.
  const missing = (flag: string, message: string) => {
    if (!scan.errors.some((e) => e.message.includes(`did you mean ${flag}?`))) errors.push({ flag, message });
  };
  if (!nodeName) missing('--node-name', 'required (or set NODE_NAME, as the DaemonSet does from spec.nodeName)');
  if (!values.cloudConfig) missing('--cloud-config', 'required (the file with the loadBalancer pools)');
  const timing = ['heartbeatIntervalMs', 'livenessTimeoutMs'] as const;
  if (!timing.some((key) => scan.unreadable.has(key)) && values.livenessTimeoutMs <= values.heartbeatIntervalMs) {
    errors.push({
      flag: '--liveness-timeout',
      message: `${values.livenessTimeoutMs} ms must be longer than --heartbeat-interval (${values.heartbeatIntervalMs} ms)`,
    });
  }
  if (errors.length) throw new FlagErrors(errors);
  return {
    cloudConfig: values.cloudConfig,
    nodeName,
    kubeconfig: values.kubeconfig || undefined,
    livenessKeyFile: values.livenessKeyFile,
    livenessPort: values.livenessPort,
    heartbeatIntervalMs: values.heartbeatIntervalMs,
    livenessTimeoutMs: values.livenessTimeoutMs,
    addressProbes: values.addressProbes,
    metrics: values.metricsBindAddress === '0' ? undefined : bindAddress(values.metricsBindAddress),
    loggingFormat: values.loggingFormat as SpeakerOptions['loggingFormat'],
    verbosity: values.verbosity,
  };
}

/** Each flag's value checked by its schema (a flag that could not be read is reported by the scan). */
export function schemaErrors(defs: readonly { name: string; key: string; schema?: unknown }[], scan: { values: Record<string, unknown>; unreadable: ReadonlySet<string> }): FlagError[] {
  const errors: FlagError[] = [];
  for (const def of defs) {
    if (!def.schema || scan.unreadable.has(def.key)) continue;
    const result = v.safeParse(def.schema as v.GenericSchema, scan.values[def.key]);
    if (!result.success) for (const issue of result.issues) errors.push({ flag: `--${def.name}`, message: issue.message });
  }
  return errors;
}

/** "host:port" or "[v6]:port" (port 0: any free one); undefined when it is neither. */
export function bindAddress(text: string): { hostname: string; port: number } | undefined {
  const colon = text.lastIndexOf(':');
  const hostname = text.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const portText = text.slice(colon + 1);
  if (colon <= 0 || !hostname || !/^\d+$/.test(portText) || Number(portText) > 65535) return undefined;
  return { hostname, port: Number(portText) };
}
