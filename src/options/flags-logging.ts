/**
 * component-base's logging flags beyond --v and --logging-format (flags.ts): --vmodule,
 * --log-flush-frequency and the split-stream / buffer options, with component-base's checks.
 */
import * as v from 'valibot';
import { formatGoDuration } from '../util/duration.ts';
import { flag } from './flag-def.ts';
import { parseVModule } from '../util/vmodule.ts';

/** resource.Quantity as these flags take it: bytes with an optional SI or binary suffix. */
const QUANTITY = /^[+]?(\d+(\.\d+)?|\.\d+)([kKMGTPE]i?|[eE][+-]?\d+|m)?$/;

export const LOGGING_FLAGS = [
  flag({
    name: 'vmodule',
    key: 'vmodule',
    kind: 'string',
    default: '',
    group: 'global',
    typeName: 'pattern=N,...',
    help:
      'comma-separated list of pattern=N settings for file-filtered logging (only works for text log format). ' +
      'edge-ccm has no Go files: a pattern (a glob) matches the component a log line comes from: a controller ' +
      '(cloud-node-controller), the provider (static), or server, leader-election, informer names.',
    schema: v.pipe(
      v.string(),
      v.rawCheck(({ dataset, addIssue }) => {
        if (!dataset.typed) return;
        const parsed = parseVModule(dataset.value);
        if (!parsed.ok) addIssue({ message: parsed.error });
      }),
    ),
  }),
  flag({
    name: 'log-flush-frequency',
    key: 'logFlushFrequencyMs',
    kind: 'duration',
    default: 5000,
    group: 'global',
    help: 'Maximum number of seconds between log flushes. edge-ccm writes every line as it happens, well within it.',
    schema: v.pipe(v.number(), v.check((ms: number) => ms > 0, (issue) => `must be greater than zero, got ${formatGoDuration(issue.input as number)}`)),
  }),
  flag({
    name: 'log-text-split-stream',
    key: 'logTextSplitStream',
    kind: 'bool',
    default: false,
    group: 'global',
    help:
      '[Alpha] In text format, write error messages to stderr and info messages to stdout. The default is to write ' +
      'a single stream (stderr here). Enable the LoggingAlphaOptions feature gate to use this.',
  }),
  flag({
    name: 'log-text-info-buffer-size',
    key: 'logTextInfoBufferSize',
    kind: 'string',
    default: '0',
    group: 'global',
    typeName: 'quantity',
    help:
      '[Alpha] In text format with split output streams, the info messages can be buffered for a while to increase ' +
      'performance. The default value of zero bytes disables buffering. Enable the LoggingAlphaOptions feature gate to use this.',
    inert: 'log lines are never buffered here',
    schema: v.pipe(v.string(), v.regex(QUANTITY, 'must be a quantity such as 512, 1K, 2Ki or 5Mi')),
  }),
  flag({
    name: 'log-json-split-stream',
    key: 'logJsonSplitStream',
    kind: 'bool',
    default: false,
    group: 'global',
    help:
      '[Alpha] In JSON format, write error messages to stderr and info messages to stdout. The default is to write ' +
      'a single stream (stderr here). Enable the LoggingAlphaOptions feature gate to use this.',
  }),
  flag({
    name: 'log-json-info-buffer-size',
    key: 'logJsonInfoBufferSize',
    kind: 'string',
    default: '0',
    group: 'global',
    typeName: 'quantity',
    help:
      '[Alpha] In JSON format with split output streams, the info messages can be buffered for a while to increase ' +
      'performance. The default value of zero bytes disables buffering. Enable the LoggingAlphaOptions feature gate to use this.',
    inert: 'log lines are never buffered here',
    schema: v.pipe(v.string(), v.regex(QUANTITY, 'must be a quantity such as 512, 1K, 2Ki or 5Mi')),
  }),
] as const;
