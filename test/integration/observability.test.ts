import { afterAll, beforeAll, expect, test } from 'bun:test';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ProxmoxResponder } from '../fakes/proxmox-responder.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { type ControlPlane, sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';

/**
 * docs/observability: the alert rules pass `promtool check rules` and their unit tests
 * (`promtool test rules`), and every metric the rules and the dashboard name is one a running
 * edge-ccm exports (scraped from the compiled binary with the static provider and with the
 * Proxmox provider, which has metrics of its own). The Helm chart ships the same rules as a
 * PrometheusRule (scripts/gen-manifests copies them; test/integration/helm-chart.test.ts).
 */
const ROOT = resolve(import.meta.dir, '../..');
const OBS = join(ROOT, 'docs/observability');
const RULES_PATH = join(OBS, 'edge-ccm.rules.yaml');
const RULES_TEST = join(OBS, 'edge-ccm.rules.test.yaml');
const DASHBOARD = join(OBS, 'edge-ccm-dashboard.json');
const INSTALL = 'bash scripts/install-test-deps.sh';

/** promtool as scripts/install-test-deps.sh builds it (its version is the one pinned there). */
function promtoolPath(): string {
  const script = readFileSync(join(ROOT, 'scripts/install-test-deps.sh'), 'utf8');
  const version = /PROMTOOL_MODULE_VERSION="\$\{EDGE_CCM_PROMTOOL_VERSION:-(v[\d.]+)\}"/.exec(script)?.[1];
  if (!version) throw new Error('scripts/install-test-deps.sh pins no promtool version');
  const cache = process.env.EDGE_CCM_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(process.env.HOME ?? '/root', '.cache'), 'edge-ccm');
  const path = join(cache, `promtool-${process.env.EDGE_CCM_PROMTOOL_VERSION ?? version}`, 'promtool');
  if (!existsSync(path)) throw new Error(`promtool is missing (${path}): run ${INSTALL}`);
  return path;
}

function promtool(args: string[]): { code: number; output: string } {
  const r = Bun.spawnSync([promtoolPath(), ...args], { cwd: OBS });
  return { code: r.exitCode, output: r.stdout.toString() + r.stderr.toString() };
}

const PROMQL_KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan', 'Inf', 'NaN']);

/**
 * The metric names a PromQL expression selects: identifiers left once strings, label matchers,
 * ranges and grouping label lists are taken out, other than functions (followed by "(") and
 * keywords. Enough for the expressions here; a parse mistake shows as a name the scrape lacks.
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (PROMQL_KEYWORDS.has(m[0])) continue;
    if (bare.slice((m.index ?? 0) + m[0].length).trimStart().startsWith('(')) continue;
    names.add(m[0]);
  }
  return [...names];
}

interface Rule { alert?: string; record?: string; expr: string }
const rulesFile = parseYaml(readFileSync(RULES_PATH, 'utf8')) as { groups: { name: string; rules: Rule[] }[] };
const rules = rulesFile.groups.flatMap((g) => g.rules);
interface Panel { title?: string; type: string; targets?: { expr: string }[]; panels?: Panel[] }
const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[]; templating: { list: { name: string }[] } };
const dashboardExprs = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

/** Every sample name a /metrics page can hold: each family's, with a histogram's _bucket/_sum/_count. */
function exportedNames(page: string): Set<string> {
  const names = new Set<string>();
  for (const m of page.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
    if (type === 'summary') for (const s of ['_sum', '_count']) names.add(name + s);
  }
  return names;
}

let cp: ControlPlane;
let responder: ProxmoxResponder | undefined;

beforeAll(async () => {
  promtoolPath(); // fails at once with the install command
  cp = await sharedControlPlane();
}, 240_000);

afterAll(async () => {
  await CcmProcess.stopAll('SIGKILL');
  responder?.stop();
});

test('promtool check rules: the rule file is valid', () => {
  const { code, output } = promtool(['check', 'rules', RULES_PATH]);
  expect({ code, output }).toMatchObject({ code: 0 });
  expect(output).toContain(`SUCCESS: ${rules.length} rules found`);
});

test('promtool test rules: every alert is unit-tested, firing where it should and quiet beside it', () => {
  const tested = new Set([...readFileSync(RULES_TEST, 'utf8').matchAll(/alertname: (\S+)/g)].map((m) => m[1]));
  const alerts = rules.flatMap((r) => (r.alert ? [r.alert] : []));
  expect(alerts.length).toBeGreaterThanOrEqual(10);
  expect(alerts.filter((a) => !tested.has(a))).toEqual([]);
  const { code, output } = promtool(['test', 'rules', RULES_TEST]);
  if (code !== 0) console.error(output);
  expect(code).toBe(0);
  expect(output).toContain('SUCCESS');
});

test('the metric-name reader finds what an expression selects and nothing else', () => {
  expect(metricNames('sum by (name, le) (rate(workqueue_work_duration_seconds_bucket{job="$job",name=~"a|b"}[$__rate_interval])) / on(pool) group_left(x) foo:bar > 0.5 and absent(up{job="edge-ccm"}) or bool 1e3'))
    .toEqual(['workqueue_work_duration_seconds_bucket', 'foo:bar', 'up']);
});

test('every rule selects job="edge-ccm" (other controller managers export workqueue_*, leader_election_*)', () => {
  for (const rule of rules) expect(rule.expr).toContain('job="edge-ccm"');
  const job = dashboard.templating.list.find((v) => v.name === 'job');
  expect(job).toBeDefined();
  for (const { expr } of dashboardExprs) expect(expr).toContain('job="$job"');
});

/** The compiled binary, leading, with its /metrics page once every controller has started. */
async function scrape(args: string[], lease: string): Promise<string> {
  const [port] = await freeLoopbackPorts(1);
  const ccm = CcmProcess.binary([
    ...args, `--kubeconfig=${cp.adminKubeconfig}`, '--bind-address=127.0.0.1', `--secure-port=${port}`,
    `--leader-elect-resource-name=${lease}`, '--leader-elect-retry-period=500ms',
  ]);
  await ccm.waitForLog('successfully acquired lease', 60_000);
  const token = /token: (\S+)/.exec(readFileSync(cp.tokenKubeconfig('admin'), 'utf8'))?.[1];
  const page = await eventually('a /metrics page with the work queues', async () => {
    const res = await fetch(`https://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${token}` }, tls: { rejectUnauthorized: false } });
    const text = await res.text();
    return res.status === 200 && /^workqueue_depth\{/m.test(text) ? text : undefined;
  }, 60_000);
  await ccm.stop();
  return page;
}

test('every metric the alert rules and the dashboard name is exported by a running edge-ccm', async () => {
  const dir = tempDir('edge-ccm-observability-');
  const inventory = join(dir, 'inventory.yaml');
  writeFileSync(inventory, [
    'inventory:',
    '  machines:',
    '    - { id: obs-a, addresses: [{ type: InternalIP, address: 10.7.0.1 }] }',
    'loadBalancer:',
    '  pools:',
    '    - { name: obs, addresses: [203.0.113.0/29] }',
    '',
  ].join('\n'));
  const tokenId = 'ccm@pve!obs';
  const secret = crypto.randomUUID();
  responder = ProxmoxResponder.start({ tokens: { [tokenId]: secret }, vms: [{ vmid: 301, name: 'obs-vm', node: 'pve1', cores: 2, memoryMiB: 2048, ipconfig: ['ip=10.7.1.1/24'] }] });
  writeFileSync(join(dir, 'token'), `${secret}\n`, { mode: 0o600 });
  const proxmoxConfig = join(dir, 'proxmox.yaml');
  writeFileSync(proxmoxConfig, [
    'clusters:', '  - region: obs', `    url: ${responder.url}`, '    allowInsecureHTTP: true',
    `    tokenId: ${tokenId}`, `    tokenSecretFile: ${join(dir, 'token')}`, '',
  ].join('\n'));

  const pages = [
    await scrape(['--cloud-provider=static', `--cloud-config=${inventory}`], `obs-static-${process.pid}`),
    await scrape(['--cloud-provider=proxmox', `--cloud-config=${proxmoxConfig}`, '--controllers=cloud-node,cloud-node-lifecycle'], `obs-proxmox-${process.pid}`),
  ];
  const exported = new Set(pages.flatMap((p) => [...exportedNames(p)]));
  // `up` is Prometheus's own, per scraped target.
  exported.add('up');

  const named = [
    ...rules.map((r) => ({ where: `rule ${r.alert ?? r.record}`, expr: r.expr })),
    ...dashboardExprs.map((d) => ({ where: `dashboard panel "${d.panel}"`, expr: d.expr })),
  ];
  expect(dashboardExprs.length).toBeGreaterThanOrEqual(20);
  const names = new Set(named.flatMap((n) => metricNames(n.expr)));
  // The reader really read them: the families each area of the issue asks for are among them.
  for (const n of ['edge_ccm_lb_pool_addresses_used', 'edge_ccm_node_deletion_breaker_open', 'edge_ccm_node_deletions_held_total',
    'leader_election_master_status', 'workqueue_depth', 'cloudprovider_proxmox_api_request_errors', 'edge_ccm_static_config_reload_errors_total']) {
    expect(names).toContain(n);
  }
  const missing = named.flatMap((n) => metricNames(n.expr).filter((m) => !exported.has(m)).map((m) => `${n.where}: ${m}`));
  expect(missing).toEqual([]);
}, 240_000);
