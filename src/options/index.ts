/**
 * edge-ccm's command line: parseArgs turns argv into typed, validated Options or throws
 * FlagErrors listing every problem (the caller prints them and exits with FLAG_ERROR_EXIT_CODE).
 */
import { scanArgv } from './argv.ts';
import { resolveControllers, type ControllerName } from './controllers.ts';
import { FlagErrors } from './errors.ts';
import { FLAGS, type FlagValues } from './flags.ts';
import { validateFlagValues } from './validate.ts';

export type Options = FlagValues & {
  /** The controllers --controllers selects, by canonical name. */
  enabledControllers: ReadonlySet<ControllerName>;
  /** Keys of the flags given on the command line (the others hold their defaults). */
  givenFlags: ReadonlySet<string>;
};

export interface ParsedArgs {
  /** The first positional word (a subcommand such as "validate"), if any. */
  command?: string;
  /** Everything after the command, unparsed: the command reads its own flags. */
  args: string[];
  /** The flags before the command (all of them when there is none). */
  options: Options;
}

/**
 * Parses and validates flags. --cloud-provider is required only to run the manager (no command),
 * and is not reported missing beside an unknown flag (which may be it, misspelt).
 * With --help or --version only unreadable or unknown flags are errors, as upstream prints help
 * or version before validating; the other values are then returned unchecked.
 */
export function parseArgs(argv: readonly string[]): ParsedArgs {
  const scan = scanArgv(argv, FLAGS);
  const rest = { command: scan.command, args: scan.args };
  if (scan.values.help === true || scan.values.version === true) {
    if (scan.errors.length > 0) throw new FlagErrors(scan.errors);
    return { ...rest, options: withEnabledControllers(scan.values as FlagValues, scan.given) };
  }

  // An unknown flag may be the missing --cloud-provider misspelt: "is required" would then be a
  // second line for one mistake, so it waits until every flag is known.
  const unknownFlag = scan.errors.some((e) => e.message.startsWith('unknown'));
  const validation = validateFlagValues(scan.values, {
    requireCloudProvider: scan.command === undefined && !unknownFlag,
    unreadable: scan.unreadable,
  });
  if (!validation.ok) throw new FlagErrors([...scan.errors, ...validation.errors]);
  if (scan.errors.length > 0) throw new FlagErrors(scan.errors);
  return { ...rest, options: withEnabledControllers(validation.values, scan.given) };
}

function withEnabledControllers(values: FlagValues, given: ReadonlySet<string>): Options {
  const selection = resolveControllers(values.controllers);
  return { ...values, enabledControllers: selection.ok ? selection.enabled : new Set(), givenFlags: given };
}

export { FlagErrors, FLAG_ERROR_EXIT_CODE, formatFlagError, type FlagError } from './errors.ts';
export { parseGoDuration, formatGoDuration } from '../util/duration.ts';
export {
  CONTROLLER_ALIASES,
  CONTROLLER_NAMES,
  resolveControllers,
  type ControllerName,
  type ResolvedControllers,
} from './controllers.ts';
export { parseClusterCIDRs, type ClusterCIDRs, type ClusterCIDRsResult } from './cluster-cidr.ts';
export { FLAGS, FLAG_GROUPS, type FlagDef, type FlagGroup, type FlagValues } from './flags.ts';
export { renderHelp } from './manager-help.ts';
export { EXIT_CODES, EXIT_FAILURE, EXIT_INVALID_INPUT, EXIT_OK } from './exit-codes.ts';
export { renderFlagsMarkdown } from './markdown.ts';
export { inertFlagsWarning } from './inert.ts';
