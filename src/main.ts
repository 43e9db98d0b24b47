import { ProviderRegistry } from './cloud/registry.ts';
import { runCli } from './cmd/cli.ts';
import { registerProviders } from './providers.ts';

// Parse flags -> build the app -> run; nothing else lives here.
const providers = new ProviderRegistry();
registerProviders(providers);
process.exit(await runCli(process.argv.slice(2), providers));
