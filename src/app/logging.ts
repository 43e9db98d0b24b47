import { createLogger, writeStderr, writeStdout, type Logger } from '../log.ts';
import { inertFlagsWarning, type Options } from '../options/index.ts';
import { resolveFeatureGates } from '../options/feature-gates.ts';
import { parseVModule } from '../util/vmodule.ts';

/**
 * The process logger from the logging flags: --logging-format, --v, --vmodule, and the split
 * streams (--log-text-split-stream / --log-json-split-stream: info to stdout, warnings and errors
 * to stderr; otherwise everything to stderr). --log-flush-frequency needs nothing: every line is
 * written as it happens.
 */
export function loggerFromOptions(options: Options): Logger {
  const vmodule = parseVModule(options.vmodule);
  const split = options.loggingFormat === 'json' ? options.logJsonSplitStream : options.logTextSplitStream;
  return createLogger({
    format: options.loggingFormat,
    verbosity: options.verbosity,
    vmodule: vmodule.ok ? vmodule.rules : [],
    ...(split ? { write: writeStdout, writeErrors: writeStderr } : {}),
  });
}

/** What the command line deserves a word about at start: flags that do nothing here, and upstream's feature gate warnings. */
export function logStartupWarnings(logger: Logger, options: Options): void {
  const inert = inertFlagsWarning(options.givenFlags);
  if (inert) logger.warn(inert);
  const gates = resolveFeatureGates(options.featureGates);
  if (gates.ok) for (const warning of gates.gates.warnings) logger.warn(warning);
}
