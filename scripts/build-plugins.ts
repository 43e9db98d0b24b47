import type { BunPlugin } from 'bun';
import { readFileSync } from 'node:fs';

/**
 * prom-client's metric classes (counter.js, gauge.js, histogram.js, validation.js) `require('util')`
 * at load for error messages only: `util.format` for a value that is not a number, `util.inspect`
 * for labels a metric was not declared with.
 * Loading node:util's JavaScript costs a process 1.1 MiB of heap and 1.3 MiB of mapped code
 * (BENCHMARKS.md, "What the runtime's node modules cost"), paid by the speaker and the vip for a
 * message they never build. Bundled, those files get a `util` whose `format` and `inspect` require
 * node:util on their first call (the bundler resolves node's modules before any plugin sees the
 * import, so the files' text is changed). The bundle only: tests run prom-client as published.
 * A prom-client whose files no longer read so fails the build.
 */
const EAGER_UTIL = "const util = require('util');";
const LAZY_UTIL = "const util = { format: (...args) => require('util').format(...args), inspect: (...args) => require('util').inspect(...args) };";

export const promClientLazyUtil: BunPlugin = {
  name: 'prom-client-lazy-util',
  setup(build) {
    build.onLoad({ filter: /[\\/]node_modules[\\/]prom-client[\\/]lib[\\/](counter|gauge|histogram|validation)\.js$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes(EAGER_UTIL)) throw new Error(`${args.path}: no "${EAGER_UTIL}" to defer (scripts/build-plugins.ts): prom-client changed`);
      return { loader: 'js', contents: text.replace(EAGER_UTIL, LAZY_UTIL) };
    });
  },
};

/**
 * client-node's KubeConfig module (dist/config.js) imports its generated API (`./gen/index.js`:
 * every model class and API client, 765 modules) for one method, `makeApiClient`, which edge-ccm
 * never calls: it reads the kubeconfig with KubeConfig and talks to the API server through
 * src/kube/transport.ts. Loading the generated API cost the controller 1.6-2.3 MiB at start and
 * 4-6 MiB at the 5,000-node burst's peak, the bench's floor 13 MiB there (BENCHMARKS.md, session
 * 18). Bundled, config.js gets two stand-ins that throw, naming this file, if ever called.
 * The bundle only: tests run client-node as published. A config.js that no longer imports exactly
 * these two names from there fails the build, as does a bundle that still holds the generated API
 * (test/subcommand-loading.test.ts).
 */
const GENERATED_API_IMPORT = "import { createConfiguration, ServerConfiguration, } from './gen/index.js';";
const GENERATED_API_LEFT_OUT = [
  "const leftOut = () => { throw new Error(\"client-node's makeApiClient is left out of edge-ccm's executable (scripts/build-plugins.ts)\"); };",
  'const createConfiguration = leftOut;',
  'class ServerConfiguration { constructor() { leftOut(); } }',
].join(' ');

export const clientNodeWithoutGeneratedApi: BunPlugin = {
  name: 'client-node-without-generated-api',
  setup(build) {
    build.onLoad({ filter: /[\\/]node_modules[\\/]@kubernetes[\\/]client-node[\\/]dist[\\/]config\.js$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes(GENERATED_API_IMPORT)) throw new Error(`${args.path}: no "${GENERATED_API_IMPORT}" to leave out (scripts/build-plugins.ts): client-node changed`);
      return { loader: 'js', contents: text.replace(GENERATED_API_IMPORT, GENERATED_API_LEFT_OUT) };
    });
  },
};

/** Every plugin the executable's bundle is built with (scripts/compile.ts, test/subcommand-loading.test.ts). */
export const BUILD_PLUGINS: BunPlugin[] = [promClientLazyUtil, clientNodeWithoutGeneratedApi];
