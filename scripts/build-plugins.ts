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

/** Every plugin the executable's bundle is built with (scripts/build.ts, test/subcommand-loading.test.ts). */
export const BUILD_PLUGINS: BunPlugin[] = [promClientLazyUtil];
