import { afterAll, beforeAll, expect, test } from 'bun:test';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from '../../src/options/index.ts';

/**
 * deploy/systemd/edge-ccm.service as systemd itself reads it (systemd-analyze verify and the
 * offline security audit), the hardening the project promises, and the command line it
 * produces with the example EnvironmentFile, parsed by edge-ccm's own flag parser.
 */
const ROOT = resolve(import.meta.dir, '../..');
const UNIT_PATH = join(ROOT, 'deploy/systemd/edge-ccm.service');
const ENV_PATH = join(ROOT, 'deploy/systemd/edge-ccm.env');
const unitText = readFileSync(UNIT_PATH, 'utf8');

let dir: string;
let systemdAnalyze: string;

beforeAll(() => {
  systemdAnalyze = ensureTool('systemd-analyze');
  dir = mkdtempSync(join(tmpdir(), 'edge-ccm-systemd-'));
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The tool on PATH, installing the Debian package behind it if missing, or a clear failure. */
function ensureTool(tool: string): string {
  const found = Bun.which(tool);
  if (found) return found;
  const install = Bun.spawnSync(['bash', join(ROOT, 'scripts/install-test-deps.sh')], { stdout: 'pipe', stderr: 'pipe' });
  const installed = Bun.which(tool);
  if (installed) return installed;
  throw new Error(
    `${tool} is not installed and scripts/install-test-deps.sh could not install it ` +
      `(exit ${install.exitCode}): ${install.stderr.toString().trim()}\n` +
      "Install Debian's systemd package (apt-get install systemd), which provides systemd-analyze.",
  );
}

/** Key -> every value it has in [section], in order (systemd keys may repeat). */
function unitSection(text: string, section: string): Map<string, string[]> {
  const keys = new Map<string, string[]>();
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = header[1] as string;
      continue;
    }
    const eq = line.indexOf('=');
    if (current !== section || eq < 0) continue;
    const key = line.slice(0, eq);
    keys.set(key, [...(keys.get(key) ?? []), line.slice(eq + 1)]);
  }
  return keys;
}

/** The unit in a temp dir, its ExecStart pointing at an executable placeholder (verify checks it exists). */
function unitCopy(name: string, edit: (text: string) => string = (t) => t): string {
  const placeholder = join(dir, 'edge-ccm');
  writeFileSync(placeholder, '#!/bin/sh\nexit 0\n');
  chmodSync(placeholder, 0o755);
  const path = join(dir, name);
  writeFileSync(path, edit(unitText.replace(/^ExecStart=\S+/m, `ExecStart=${placeholder}`)));
  return path;
}

function run(cmd: string[]): { exitCode: number; output: string } {
  const r = Bun.spawnSync(cmd, { cwd: dir, stdout: 'pipe', stderr: 'pipe' });
  return { exitCode: r.exitCode, output: (r.stdout.toString() + r.stderr.toString()).trim() };
}

test('systemd-analyze verify accepts the unit without a single warning', () => {
  const clean = run([systemdAnalyze, 'verify', unitCopy('edge-ccm.service')]);
  expect(clean).toEqual({ exitCode: 0, output: '' });
  // The check can fail: verify reports an unknown key (with exit code 0, hence the output check)
  // and an invalid value.
  const broken = run([systemdAnalyze, 'verify', unitCopy('broken.service', (t) => t.replace('Restart=on-failure', 'Restrat=on-failure').replace('Type=notify', 'Type=bogus'))]);
  expect(broken.output).toContain("Unknown key 'Restrat'");
  expect(broken.output).toContain('Failed to parse service type');
});

test('the offline security audit rates the unit 3.5 or better (lower is safer)', () => {
  const audit = run([systemdAnalyze, 'security', '--offline=yes', '--threshold=35', '--no-pager', unitCopy('edge-ccm.service')]);
  const level = /Overall exposure level for edge-ccm.service: ([\d.]+)/.exec(audit.output)?.[1];
  expect({ exitCode: audit.exitCode, level }).toEqual({ exitCode: 0, level: expect.any(String) });
  expect(Number(level)).toBeLessThanOrEqual(3.5);
});

test('the unit restarts on failure, runs as a dynamic user without privileges and reads only its credentials', () => {
  const service = unitSection(unitText, 'Service');
  const one = (key: string) => service.get(key)?.join('\n');
  expect({
    Type: one('Type'),
    NotifyAccess: one('NotifyAccess'),
    Restart: one('Restart'),
    DynamicUser: one('DynamicUser'),
    NoNewPrivileges: one('NoNewPrivileges'),
    ProtectSystem: one('ProtectSystem'),
    ProtectHome: one('ProtectHome'),
    PrivateTmp: one('PrivateTmp'),
    CapabilityBoundingSet: one('CapabilityBoundingSet'),
    AmbientCapabilities: one('AmbientCapabilities'),
    EnvironmentFile: one('EnvironmentFile'),
  }).toEqual({
    Type: 'notify', // src/systemd/notify.ts; proven by test/integration/systemd-notify.test.ts
    NotifyAccess: 'main',
    Restart: 'on-failure',
    DynamicUser: 'yes',
    NoNewPrivileges: 'yes',
    ProtectSystem: 'strict',
    ProtectHome: 'yes',
    PrivateTmp: 'yes',
    CapabilityBoundingSet: '',
    AmbientCapabilities: '',
    EnvironmentFile: '/etc/edge-ccm/edge-ccm.env',
  });
  // No writable path at all: ProtectSystem=strict with nothing added back.
  expect([...service.keys()].filter((k) => /^(ReadWritePaths|StateDirectory|CacheDirectory|LogsDirectory|RuntimeDirectory)$/.test(k))).toEqual([]);
  // The kubeconfig is a credential: read-only, readable by the service only. The cloud config is
  // read in place (it holds no secret), so its edits and `systemctl reload` (SIGHUP) reach edge-ccm:
  // a credential is a copy made at start (test/integration/systemd-boot.test.ts boots the unit).
  const credentials = (service.get('LoadCredential') ?? []).map((v) => v.split(':')[0]);
  const referenced = [...(one('ExecStart') ?? '').matchAll(/%d\/([\w.-]+)/g)].map((m) => m[1]);
  expect(referenced.sort()).toEqual(['kubeconfig']);
  expect(credentials.sort()).toEqual(referenced);
  expect(one('ExecReload')).toBe('kill -HUP $MAINPID');
});

test('ExecStart with the example EnvironmentFile is a valid edge-ccm command line', () => {
  // EnvironmentFile syntax as systemd reads it: KEY=VALUE or KEY="VALUE", # comments.
  const env = new Map<string, string>();
  for (const line of readFileSync(ENV_PATH, 'utf8').split('\n')) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(?:"([^"]*)"|(.*))$/.exec(line.trim());
    if (m) env.set(m[1] as string, (m[2] ?? m[3] ?? '').trim());
  }
  const execStart = unitSection(unitText, 'Service').get('ExecStart')?.[0] ?? '';
  // %d is /run/credentials/UNIT; unquoted $VAR becomes one argument per word.
  const argv = execStart
    .replaceAll('%d', '/run/credentials/edge-ccm.service')
    .split(/\s+/)
    .flatMap((word) => {
      const variable = /^\$(\w+)$/.exec(word)?.[1];
      if (variable === undefined) return [word];
      const value = env.get(variable);
      if (value === undefined) throw new Error(`ExecStart uses $${variable}, which ${ENV_PATH} does not set`);
      return value.split(/\s+/).filter(Boolean);
    });
  expect(argv[0]).toBe('/usr/local/bin/edge-ccm');
  const { options, command } = parseArgs(argv.slice(1));
  expect(command).toBeUndefined();
  expect(options.cloudProvider).toBe('static');
  expect(options.kubeconfig).toBe('/run/credentials/edge-ccm.service/kubeconfig');
  expect(options.cloudConfig).toBe('/etc/edge-ccm/cloud-config.yaml');
  expect(options.leaderElect).toBe(true);
});

const EXAMPLES = join(ROOT, 'examples');
/** Keys of the providers' configs whose value is a file edge-ccm reads. */
const FILE_KEYS = /^(passwordFile|tokenSecretFile|caFile)$/;

/** Every `key: value` of a YAML text whose key matches, comments included (a commented-out block is an example too). */
function yamlValues(text: string, key: RegExp): { key: string; value: string }[] {
  return [...text.matchAll(/^\s*#?\s*(?:- )?(\w+):\s*(\S+)/gm)].filter((m) => key.test(m[1] as string)).map((m) => ({ key: m[1] as string, value: m[2] as string }));
}

test('secrets never come through the EnvironmentFile: the examples name every file through ${CREDENTIALS_DIRECTORY}, none an environment variable or an inline secret', () => {
  // The EnvironmentFile is installed 0644 (docs/install.md): no variable in it may carry a secret.
  const envText = readFileSync(ENV_PATH, 'utf8');
  const variables = [...envText.matchAll(/^([A-Za-z_][A-Za-z0-9_]*)=/gm)].map((m) => m[1]);
  expect(variables).toEqual(['EDGE_CCM_ARGS']);
  expect(envText).toContain('LoadCredential=');
  for (const example of ['inventory.yaml', 'proxmox.yaml']) {
    const text = readFileSync(join(EXAMPLES, example), 'utf8');
    // (Not passwordEnv/tokenSecretEnv: under systemd the variable would live in a world-readable file.)
    expect({ example, secretsInline: yamlValues(text, /^(password|passwordEnv|tokenSecret|tokenSecretEnv)$/) }).toEqual({ example, secretsInline: [] });
    const files = yamlValues(text, FILE_KEYS);
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expect({ example, ...f }).toEqual({ example, key: f.key, value: expect.stringMatching(/^\$\{CREDENTIALS_DIRECTORY\}\/[\w.-]+$/) });
  }
});

test("the unit's LoadCredential= lines are what the config reads: the Proxmox example validates with systemd's CREDENTIALS_DIRECTORY, and not without it", () => {
  // The credentials directory as systemd lays it out for the unit: one file per LoadCredential= ID.
  const credentials = join(dir, 'credentials');
  mkdirSync(credentials);
  const example = readFileSync(join(EXAMPLES, 'proxmox.yaml'), 'utf8');
  const config = join(dir, 'cloud-config.yaml'); // read in place, not a credential
  writeFileSync(config, example);
  // The unit shows the LoadCredential= line of each file the example names.
  const shown = [...unitText.matchAll(/^#LoadCredential=([\w.-]+):\/etc\/edge-ccm\/\1$/gm)].map((m) => m[1]);
  expect(shown.sort()).toEqual(yamlValues(example, FILE_KEYS).map((f) => f.value.slice('${CREDENTIALS_DIRECTORY}/'.length)).sort());
  for (const f of yamlValues(example, FILE_KEYS)) {
    writeFileSync(join(credentials, f.value.slice('${CREDENTIALS_DIRECTORY}/'.length)), f.key === 'caFile' ? '-----BEGIN CERTIFICATE-----\n' : 'not-the-real-secret\n', { mode: 0o400 });
  }
  const validate = (env: Record<string, string>) => {
    const r = Bun.spawnSync([process.execPath, join(ROOT, 'src/main.ts'), 'validate', '--cloud-provider=proxmox', `--cloud-config=${config}`], {
      cwd: dir, env: { PATH: process.env.PATH ?? '', ...env }, stdout: 'pipe', stderr: 'pipe',
    });
    return { exitCode: r.exitCode, output: (r.stdout.toString() + r.stderr.toString()).trim() };
  };
  const ok = validate({ CREDENTIALS_DIRECTORY: credentials });
  expect(ok).toEqual({ exitCode: 0, output: `${config}: valid proxmox configuration` });
  // Outside systemd (no variable): each file is refused, naming the variable, and nothing secret is printed.
  const outside = validate({});
  expect(outside.exitCode).toBe(2);
  expect(outside.output).toContain('tokenSecretFile');
  expect(outside.output).toContain('CREDENTIALS_DIRECTORY is not set');
  expect(outside.output).not.toContain('not-the-real-secret');
});
