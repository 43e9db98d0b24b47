/**
 * The flags of `edge-ccm vip` (the control-plane VIP, docs/networking/control-plane-vip.md): the
 * speaker's table pattern (flag-def.ts, the same argv scanner, help layout and docs/flags.md
 * section). The heartbeat key, the logging and --v rows are the speaker's own; the rest differ
 * (no kubeconfig: the VIP needs no API server; its own metrics port, beside a speaker's).
 */
import { hostname as osHostname } from 'node:os';
import * as v from 'valibot';
import { scanArgv } from './argv.ts';
import { FlagErrors, type FlagError } from './errors.ts';
import { flag } from './flag-def.ts';
import { SPEAKER_FLAGS, bindAddress, schemaErrors } from './speaker.ts';

const speakerFlag = (name: string) => SPEAKER_FLAGS.find((f) => f.name === name)!;

export const VIP_FLAGS = [
  flag({ name: 'help', shorthand: 'h', key: 'help', kind: 'bool', default: false, group: 'vip', help: 'help for vip' }),
  flag({
    name: 'cloud-config',
    key: 'cloudConfig',
    kind: 'string',
    default: '',
    group: 'vip',
    help: "The controller's config file; only its controlPlaneEndpoint section is read. Required.",
  }),
  flag({ name: 'node-name', key: 'nodeName', kind: 'string', default: '', group: 'vip', help: "This host's name in controlPlaneEndpoint.hosts. Empty: $NODE_NAME, else the hostname." }),
  { ...speakerFlag('liveness-key-file'), group: 'vip', help: "The shared secret (at least 32 bytes, the same file on every control-plane host) signing the hosts' heartbeats. Required." },
  flag({
    name: 'metrics-bind-address',
    key: 'metricsBindAddress',
    kind: 'string',
    default: '127.0.0.1:7473',
    group: 'vip',
    typeName: 'host:port',
    help: 'Plain-HTTP /metrics, /healthz and /readyz. "0" turns it off.',
    schema: v.pipe(v.string(), v.check((text: string) => text === '0' || bindAddress(text) !== undefined, (issue) => `${JSON.stringify(issue.input)} is not HOST:PORT`)),
  }),
  { ...speakerFlag('logging-format'), group: 'vip' },
  { ...speakerFlag('v'), group: 'vip' },
] as const;

export interface VipOptions {
  cloudConfig: string;
  nodeName: string;
  livenessKeyFile: string;
  /** Undefined when --metrics-bind-address=0. */
  metrics?: { hostname: string; port: number };
  loggingFormat: 'text' | 'json';
  verbosity: number;
}

/** Reads `edge-ccm vip`'s arguments: 'help' for --help, else the options; throws FlagErrors naming every problem. */
export function parseVipArgs(argv: readonly string[], env: Record<string, string | undefined> = process.env, hostname = osHostname): VipOptions | 'help' {
  const scan = scanArgv(argv, VIP_FLAGS);
  if (scan.values.help === true && scan.errors.length === 0) return 'help';
  const errors: FlagError[] = [...scan.errors, ...schemaErrors(VIP_FLAGS, scan)];
  if (scan.command !== undefined) errors.push({ flag: '(arguments)', message: `unexpected argument ${JSON.stringify(scan.command)}` });
  const values = scan.values as { cloudConfig: string; nodeName: string; livenessKeyFile: string; metricsBindAddress: string; loggingFormat: string; verbosity: number };
  const missing = (flag: string, message: string) => {
    if (!scan.errors.some((e) => e.message.includes(`did you mean ${flag}?`))) errors.push({ flag, message });
  };
  if (!values.cloudConfig) missing('--cloud-config', 'required (the file with the controlPlaneEndpoint section)');
  if (!values.livenessKeyFile) missing('--liveness-key-file', 'required (a shared secret signing the heartbeats)');
  if (errors.length) throw new FlagErrors(errors);
  return {
    cloudConfig: values.cloudConfig,
    nodeName: values.nodeName || env.NODE_NAME || hostname(),
    livenessKeyFile: values.livenessKeyFile,
    metrics: values.metricsBindAddress === '0' ? undefined : bindAddress(values.metricsBindAddress),
    loggingFormat: values.loggingFormat as VipOptions['loggingFormat'],
    verbosity: values.verbosity,
  };
}
