import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BUILD_PLUGINS } from '../scripts/build-plugins.ts';

/**
 * `edge-ccm speaker` and `edge-ccm vip` run on every node: they must not load the controllers,
 * the providers or the manager (issue 38, BENCHMARKS.md "Footprint on every node"). Read from
 * the bundle scripts/build.ts makes (split, here unminified so each module keeps its path
 * comment): what the entry chunk and a subcommand's chunk load before it runs, following static
 * imports only (a dynamic import() is loaded when its command runs).
 */

const ROOT = resolve(import.meta.dir, '..');
const out = mkdtempSync(join(tmpdir(), 'edge-ccm-chunks-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const built = await Bun.build({ entrypoints: [join(ROOT, 'src/main.ts')], outdir: out, target: 'bun', format: 'esm', splitting: true, plugins: BUILD_PLUGINS });
if (!built.success) throw new Error(built.logs.join('\n'));
const chunks = new Map(readdirSync(out).map((f) => [f, readFileSync(join(out, f), 'utf8')]));

/** The chunks a chunk imports statically (`import ... from "./x.js"`, `import "./x.js"`), not `import("./x.js")`. */
function staticImports(code: string): string[] {
  return [...code.matchAll(/(?:\bfrom\s*|\bimport\s*)"\.\/([^"]+\.js)"/g)].map((m) => m[1]!);
}

/** The code of `chunk` and of every chunk it imports statically, transitively: what loading it evaluates. */
function loadedChunks(chunk: string): string[] {
  const seen = new Set<string>();
  const codes: string[] = [];
  const visit = (name: string) => {
    if (seen.has(name)) return;
    seen.add(name);
    const code = chunks.get(name);
    if (code === undefined) throw new Error(`chunk ${name} not in the build`);
    codes.push(code);
    staticImports(code).forEach(visit);
  };
  visit(chunk);
  return codes;
}

/** The source modules evaluated when `chunk` is loaded: its own and its static imports', transitively. */
function loadedModules(chunk: string): Set<string> {
  return new Set(loadedChunks(chunk).flatMap((code) => [...code.matchAll(/^\/\/ ((?:src|providers|node_modules)\/\S+)$/gm)].map((m) => m[1]!)));
}

/**
 * The runtime's modules (node:*, bun:*) that loading `chunk` evaluates: imported by a module of it
 * or its static imports, or required by a bundled CommonJS module as it loads (a `require` inside
 * a function runs when the function does, and is not counted).
 */
function runtimeModulesLoaded(chunk: string): Set<string> {
  const found = new Set<string>();
  for (const code of loadedChunks(chunk)) {
    for (const m of code.matchAll(/^import\s[^;]*?\sfrom\s*"([^".][^"]*)";$/gm)) found.add(m[1]!.replace(/^node:/, ''));
    // `x = __require("m");` on a line of its own: a CommonJS module's top level (a `return
    // __require(...)` or an arrow's is inside a function; an assignment inside one is counted too).
    for (const m of code.matchAll(/^\s*(?:(?:var|const|let)\s+)?[\w$]+\s*=\s*__require\("([^"]+)"\);$/gm)) found.add(m[1]!.replace(/^node:/, ''));
  }
  return found;
}

/** The chunk whose own modules include `source` (the chunk a dynamic import of it loads). */
function chunkOf(source: string): string {
  const found = [...chunks].find(([, code]) => code.includes(`\n// ${source}\n`));
  if (!found) throw new Error(`${source} is in no chunk`);
  return found[0];
}

const FORBIDDEN = [/^src\/controllers\//, /^providers\//, /^src\/providers\.ts$/, /^src\/cmd\/run\.ts$/, /^src\/app\/(manager|app|run)\b/];

/** The lifecycle's flag defaults, which src/options reads to parse the flags (docs/architecture.md allows it). */
const FLAG_DEFAULTS = 'src/controllers/nodelifecycle/options.ts';

function forbiddenIn(modules: Set<string>): string[] {
  return [...modules].filter((m) => m !== FLAG_DEFAULTS && FORBIDDEN.some((r) => r.test(m)));
}

test("the scan sees the bundle: the manager's chunk loads the controllers, the providers' chunk src/providers.ts", () => {
  const manager = loadedModules(chunkOf('src/cmd/run.ts'));
  expect([...manager].some((m) => m.startsWith('src/controllers/'))).toBe(true);
  expect(forbiddenIn(loadedModules(chunkOf('src/providers.ts')))).toContain('src/providers.ts');
});

test('the entry chunk loads no controller, provider or manager module before a command is chosen', () => {
  expect(forbiddenIn(loadedModules('main.js'))).toEqual([]);
});

for (const command of ['speaker', 'vip']) {
  test(`edge-ccm ${command} loads no controller, provider or manager module`, () => {
    const modules = new Set([...loadedModules('main.js'), ...loadedModules(chunkOf(`src/cmd/${command}.ts`))]);
    expect(modules.has(`src/cmd/${command}.ts`)).toBe(true);
    expect(forbiddenIn(modules)).toEqual([]);
  });

  // client-node's KubeConfig module loads its generated API (765 modules, 0.5 MB of code, 1-2.5 MiB
  // of heap and bytecode): the per-node processes read their kubeconfig with src/app/kubeconfig-reader.ts.
  test(`edge-ccm ${command} loads none of client-node's modules (its types are fine)`, () => {
    const modules = new Set([...loadedModules('main.js'), ...loadedModules(chunkOf(`src/cmd/${command}.ts`))]);
    expect([...modules].filter((m) => m.startsWith('node_modules/@kubernetes/client-node/'))).toEqual([]);
  });

  // prom-client's index loads its Pushgateway (node:http, node:https, node:zlib), its cluster
  // aggregator (node:cluster), Summary and collectDefaultMetrics (BENCHMARKS.md, "Footprint on
  // every node"). The metric classes come from src/util/prom.ts, one module each.
  test(`edge-ccm ${command} loads prom-client's metric classes, not its index`, () => {
    const modules = new Set([...loadedModules('main.js'), ...loadedModules(chunkOf(`src/cmd/${command}.ts`))]);
    expect(modules).toContain('node_modules/prom-client/lib/registry.js');
    expect([...modules].filter((m) => /^node_modules\/prom-client\/(index\.js|lib\/(pushgateway|cluster|summary|defaultMetrics)\.js)$/.test(m))).toEqual([]);
    // Its processCpuTotal loads @opentelemetry/api for exemplars: src/app/metrics.ts counts the CPU itself.
    expect([...modules].filter((m) => m.startsWith('node_modules/@opentelemetry/'))).toEqual([]);
  });

  // The manager's flag table (some 200 flags, their schemas and the controllers' defaults) is read
  // by the manager alone: src/cmd/cli.ts dispatches `speaker` and `vip` before parsing it.
  test(`edge-ccm ${command} loads its own flag table, not the manager's`, () => {
    const modules = new Set([...loadedModules('main.js'), ...loadedModules(chunkOf(`src/cmd/${command}.ts`))]);
    expect(modules).toContain(`src/options/${command}.ts`);
    expect([...modules].filter((m) => /^src\/options\/(index|flags(-[a-z]+)?|manager-help|validate)\.ts$/.test(m))).toEqual([]);
  });
}

// Each of node's modules written in JavaScript (node:crypto, node:dgram, node:util, process.stderr's
// stream...) costs a per-node process 1-2 MiB of heap and mapped code when loaded (BENCHMARKS.md,
// "What the runtime's node modules cost"): the sockets, hashes and console are the runtime's own.
// What is left: the file reads (node:fs), os, path, bun:ffi for the raw sockets, node:v8 for
// prom-client's nodejs_heap_space_* gauges; buffer and process are the runtime's own objects.
const RUNTIME_MODULES: Record<string, string[]> = {
  vip: ['buffer', 'bun:ffi', 'fs', 'os', 'process', 'v8'],
  speaker: ['buffer', 'bun:ffi', 'fs', 'fs/promises', 'os', 'path', 'process', 'v8'],
};
for (const [command, expected] of Object.entries(RUNTIME_MODULES)) {
  test(`edge-ccm ${command} loads only these of the runtime's modules at start: ${expected.join(', ')}`, () => {
    const loaded = new Set([...runtimeModulesLoaded('main.js'), ...runtimeModulesLoaded(chunkOf(`src/cmd/${command}.ts`))]);
    expect([...loaded].sort()).toEqual(expected);
  });
}

test("the scan sees the runtime's modules where they are loaded: the manager loads node:crypto, client-node's CommonJS node:util", () => {
  const manager = new Set([...runtimeModulesLoaded('main.js'), ...runtimeModulesLoaded(chunkOf('src/cmd/run.ts'))]);
  expect(manager).toContain('crypto');
  expect(manager).toContain('util');
});

// announce: bgp's output (BGP, BFD) is imported when it starts: a VIP announcing over L2 never loads it.
test('edge-ccm vip loads no BGP or BFD session code before its config asks for announce: bgp', () => {
  const modules = new Set([...loadedModules('main.js'), ...loadedModules(chunkOf('src/cmd/vip.ts'))]);
  expect(modules).toContain('src/announce/vip/l2-output.ts');
  // Its config's checks (src/net/bgp/config.ts, routes.ts, constants.ts) are loaded: the file is read whole.
  expect([...modules].filter((m) => /^src\/(net\/bfd\/|net\/bgp\/(?!config|routes|constants)|announce\/vip\/bgp-output\.ts$)/.test(m))).toEqual([]);
  expect(loadedModules(chunkOf('src/announce/vip/bgp-output.ts'))).toContain('src/net/bgp/peer.ts');
});

test("the scan sees the manager's flag table where it is loaded: the chunk src/options/index.ts is in loads src/options/flags.ts", () => {
  expect(loadedModules(chunkOf('src/options/index.ts'))).toContain('src/options/flags.ts');
});

test("the scan sees client-node where it is loaded: the manager's chunk loads its KubeConfig", () => {
  const manager = loadedModules(chunkOf('src/cmd/run.ts'));
  expect([...loadedModules('main.js'), ...manager]).toContain('node_modules/@kubernetes/client-node/dist/config.js');
});

// KubeConfig's module imports client-node's generated API for makeApiClient alone, which edge-ccm
// never calls; scripts/build-plugins.ts leaves it out of the bundle (4-13 MiB at the controller's
// and the floor's burst peak, BENCHMARKS.md).
test("the manager loads client-node's KubeConfig without its generated API", () => {
  const modules = new Set([...loadedModules('main.js'), ...loadedModules(chunkOf('src/cmd/run.ts'))]);
  expect(modules).toContain('node_modules/@kubernetes/client-node/dist/config.js');
  expect([...modules].filter((m) => m.startsWith('node_modules/@kubernetes/client-node/dist/gen/') && m !== 'node_modules/@kubernetes/client-node/dist/gen/rxjsStub.js')).toEqual([]);
  // Its stand-ins say where they come from if anything ever calls them.
  expect([...chunks.values()].some((code) => code.includes("client-node's makeApiClient is left out of edge-ccm's executable (scripts/build-plugins.ts)"))).toBe(true);
});
