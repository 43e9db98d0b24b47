import { ProviderRegistry } from './cloud/registry.ts';
import { runCli } from './cmd/cli.ts';

// Parse flags -> build the app -> run; nothing else lives here. The providers are imported only
// by the commands that use them (not by `speaker` and `vip`).
process.exit(await runCli(process.argv.slice(2), async () => {
  const providers = new ProviderRegistry();
  (await import('./providers.ts')).registerProviders(providers);
  return providers;
}));
