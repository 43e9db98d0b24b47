import type { ProviderRegistry } from '../cloud/registry.ts';
import { COMMANDS, commandNames } from './commands.ts';
import { versionLine } from '../version.ts';
import { didYouMean } from '../util/did-you-mean.ts';

/** Builds the registry of linked providers: only the commands that need one call it. */
export type LoadProviders = () => ProviderRegistry | Promise<ProviderRegistry>;

/**
 * The command line: flags -> subcommand (one module each in src/cmd) or the controller manager
 * (run.ts) -> exit code. Shared by the real entry point (src/main.ts) and the test entry point
 * that also links the fake provider.
 *
 * Each subcommand's module, and the providers, are imported when that command runs: `speaker`
 * and `vip` run on every node and must not evaluate the controllers, the providers and their
 * clients (BENCHMARKS.md, footprint: `edge-ccm --version` peaks at 38 MiB instead of 54). Given
 * first, as every manifest and unit writes them, they do not load the manager's flag table
 * either: they read their own flags.
 */
export async function runCli(argv: string[], loadProviders: LoadProviders): Promise<number> {
  if (argv[0] === 'speaker') return (await import('./speaker.ts')).runSpeaker(argv.slice(1));
  if (argv[0] === 'vip') return (await import('./vip.ts')).runVip(argv.slice(1));
  const [{ FLAG_ERROR_EXIT_CODE, FlagErrors, parseArgs, renderHelp }, { helpWidth }] = await Promise.all([import('../options/index.ts'), import('../options/help.ts')]);
  let parsed;
  try {
    parsed = parseArgs(argv);
  } catch (e) {
    if (!(e instanceof FlagErrors)) throw e;
    for (const err of e.errors) console.error(`error: ${err.flag}: ${err.message}`);
    console.error("Run 'edge-ccm --help' for usage.");
    return FLAG_ERROR_EXIT_CODE;
  }
  const { options, command, args } = parsed;
  if (options.help) {
    console.log(renderHelp({ width: helpWidth(), providers: (await loadProviders()).names(), commands: COMMANDS }));
    return 0;
  }
  // `validate --help`, `selftest --help`: the commands without a flag parser of their own.
  const usage = COMMANDS.find((c) => c.name === command)?.usage;
  if (usage && args.some((a) => a === '--help' || a === '-h')) {
    console.log(usage);
    return 0;
  }
  if (options.version) {
    console.log(versionLine());
    return 0;
  }
  switch (command) {
    case undefined:
      break;
    case 'validate':
      return (await import('./validate.ts')).runValidate(argv.filter((a) => a !== 'validate'), await loadProviders(), args);
    case 'selftest': {
      const i = args.indexOf('--kubeconfig');
      const path = i >= 0 ? args[i + 1] : args.find((a) => a.startsWith('--kubeconfig='))?.slice('--kubeconfig='.length);
      if (!path) {
        console.error('error: selftest: --kubeconfig is required');
        return FLAG_ERROR_EXIT_CODE;
      }
      return (await import('./selftest.ts')).runSelfTest(path);
    }
    case 'speaker':
      return (await import('./speaker.ts')).runSpeaker(argv.slice(argv.indexOf('speaker') + 1));
    case 'vip':
      return (await import('./vip.ts')).runVip(argv.slice(argv.indexOf('vip') + 1));
    case 'import':
      return (await import('./import.ts')).runImport(argv.slice(argv.indexOf('import') + 1));
    default:
      console.error(`error: unknown command "${command}"${didYouMean(command, COMMANDS.map((c) => c.name), (n) => `"${n}"`)} (commands: ${commandNames()})`);
      return FLAG_ERROR_EXIT_CODE;
  }

  return (await import('./run.ts')).runManager(options, await loadProviders());
}
