import { runControllerManager } from '../app/app.ts';
import { ConfigurationError } from '../app/settings.ts';
import type { ProviderRegistry } from '../cloud/registry.ts';
import { EXIT_FAILURE, EXIT_INVALID_INPUT, type Options } from '../options/index.ts';

/**
 * `edge-ccm` without a subcommand: the controller manager until SIGTERM or SIGINT. A problem with
 * the flags or their files exits 2 (every one of them printed), a failure while running 1.
 */
export async function runManager(options: Options, providers: ProviderRegistry): Promise<number> {
  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => stop.abort(sig));
  try {
    return await runControllerManager(options, providers, stop.signal);
  } catch (e) {
    if (e instanceof ConfigurationError) {
      for (const line of e.message.split('\n')) console.error(`error: ${line}`);
      return EXIT_INVALID_INPUT;
    }
    console.error(`error: ${e instanceof Error ? e.message : String(e)}`);
    return EXIT_FAILURE;
  }
}
