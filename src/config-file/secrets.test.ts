import { afterEach, describe, expect, test } from 'bun:test';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadProxmoxConfig } from '../../providers/proxmox/config-load.ts';
import { createProxmoxProvider } from '../../providers/proxmox/provider.ts';
import { processSecrets, type SecretSource } from './secrets.ts';
import { formatConfigErrors } from './yaml-load.ts';
import { loadStaticConfig, validateStaticConfig } from '../../providers/static/config-load.ts';
import { createStaticProvider } from '../../providers/static/provider.ts';
import { createLogger } from '../log.ts';
import { giveToForeignGroup } from '../../test/harness/files.ts';

/**
 * Issue 11, items 3 and 4: no secret value in a config error, a log line or an event; a URL
 * carrying user:password@ is refused without echoing it; a secret file others can read is
 * warned about (log and InsecureSecretFile), without its content.
 */

const SECRET = '80211942';
const noFiles: SecretSource = {
  readFile: (p) => {
    throw new Error(`ENOENT: no such file ${p}`);
  },
  env: () => undefined,
};

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempFile(name: string, text: string, mode: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-config-secrets-'));
  dirs.push(dir);
  const path = join(dir, name);
  writeFileSync(path, text);
  chmodSync(path, mode);
  return path;
}

function recording() {
  const lines: string[] = [];
  return { logger: createLogger({ write: (l) => lines.push(l), verbosity: 5 }), lines };
}

/** Every text a failing load produced, for grepping. */
function allText(r: { ok: boolean; errors?: unknown; warnings?: unknown }): string {
  return JSON.stringify(r);
}

const staticWith = (redfish: string) => `inventory:\n  machines:\n    - id: m1\n      redfish: ${redfish}\n`;
const proxmoxWith = (cluster: string[]) => ['clusters:', '  - region: fra1', ...cluster.map((l) => `    ${l}`), ''].join('\n');

describe('a secret value is never echoed in a config error', () => {
  test.each([
    ['a number', `{ endpoint: "https://10.0.1.11", username: admin, password: ${SECRET} }`],
    ['a list', `{ endpoint: "https://10.0.1.11", username: admin, password: [${SECRET}] }`],
    ['a mapping', `{ endpoint: "https://10.0.1.11", username: admin, password: { x: ${SECRET} } }`],
  ])('static: redfish.password as %s is a type error that does not show it', (_kind, redfish) => {
    const r = loadStaticConfig(staticWith(redfish), noFiles);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path)).toEqual(['inventory.machines[0].redfish.password']);
    expect(r.errors[0]!.message).toContain('wrong type');
    expect(allText(r)).not.toContain(SECRET);
  });

  test('static: a secret in inventory.defaults or a rack is not shown either', () => {
    const r = loadStaticConfig(`inventory:\n  defaults:\n    redfish: { password: ${SECRET} }\n  racks:\n    r1:\n      redfish: { password: ${SECRET}1 }\n`, noFiles);
    expect(r.ok).toBe(false);
    expect(allText(r)).not.toContain(SECRET);
  });

  test('proxmox: a numeric tokenSecret or password is a type error that does not show it', () => {
    for (const lines of [
      ['url: https://pve1.example.com:8006', 'tokenId: ccm@pve!edge-ccm', `tokenSecret: ${SECRET}`],
      ['url: https://pve1.example.com:8006', 'username: ccm@pve', `password: ${SECRET}`],
    ]) {
      const r = loadProxmoxConfig(proxmoxWith(lines), noFiles);
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect(r.errors.some((e) => /^clusters\[0\]\.(tokenSecret|password)$/.test(e.path) && e.message.includes('wrong type'))).toBe(true);
      expect(allText(r)).not.toContain(SECRET);
    }
  });

  test('a Redfish endpoint with user:password@ is refused without echoing either', () => {
    const r = loadStaticConfig(staticWith(`{ endpoint: "https://admin:${SECRET}@10.0.1.11", username: admin, passwordEnv: BMC }`), { ...noFiles, env: () => 'x' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path)).toEqual(['inventory.machines[0].redfish.endpoint']);
    expect(r.errors[0]!.message).toContain('user or password');
    expect(allText(r)).not.toContain(SECRET);
    expect(allText(r)).not.toContain('admin:');
  });

  test('a Proxmox url with user:password@ is refused without echoing either', () => {
    const r = loadProxmoxConfig(proxmoxWith([`url: https://root%40pam:${SECRET}@pve1.example.com:8006`, 'tokenId: ccm@pve!edge-ccm', 'tokenSecretEnv: T']), { ...noFiles, env: () => 'x' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path)).toEqual(['clusters[0].url']);
    expect(allText(r)).not.toContain(SECRET);
    expect(allText(r)).not.toContain('root');
  });

  test('in-process: a rejected reload logs and reports no secret (static provider)', () => {
    const { logger, lines } = recording();
    const p = createStaticProvider({ config: 'inventory: {}\n', configPath: '/etc/edge-ccm/inventory.yaml', logger, secrets: noFiles });
    const rejected: string[] = [];
    p.onConfigRejected((problems) => rejected.push(problems));
    const r = p.reload(staticWith(`{ endpoint: "https://admin:${SECRET}@10.0.1.11", username: admin, password: ${SECRET} }`));
    expect(r.ok).toBe(false);
    expect(rejected).toHaveLength(1);
    expect(lines.some((l) => l.includes('configuration rejected'))).toBe(true);
    for (const text of [...lines, ...rejected]) expect(text).not.toContain(SECRET);
  });

  test('in-process: a rejected reload logs and reports no secret (proxmox provider)', () => {
    const { logger, lines } = recording();
    const good = proxmoxWith(['url: https://pve1.example.com:8006', 'tokenId: ccm@pve!edge-ccm', 'tokenSecretEnv: T']);
    const p = createProxmoxProvider({ config: good, configPath: '/etc/edge-ccm/proxmox.yaml', logger, secrets: { ...noFiles, env: () => 'x' } });
    const rejected: string[] = [];
    p.onConfigRejected((problems) => rejected.push(problems));
    expect(p.reload(proxmoxWith(['url: https://pve1.example.com:8006', 'tokenId: ccm@pve!edge-ccm', `tokenSecret: ${SECRET}`])).ok).toBe(false);
    expect(rejected).toHaveLength(1);
    for (const text of [...lines, ...rejected]) expect(text).not.toContain(SECRET);
    void p.close();
  });
});

describe('a secret file readable by group or others is warned about', () => {
  const SECRET_TEXT = 'hunter2-secret';

  test('static: passwordFile mode 0644 loads, with an InsecureSecretFile warning naming the file and mode but not the secret', () => {
    const file = tempFile('bmc', `${SECRET_TEXT}\n`, 0o644);
    const r = loadStaticConfig(staticWith(`{ endpoint: "https://10.0.1.11", username: admin, passwordFile: ${file} }`), processSecrets);
    if (!r.ok) throw new Error(formatConfigErrors('x', r.errors));
    expect(r.config.inventory.machines[0]!.redfish!.password).toBe(SECRET_TEXT);
    expect(r.warnings).toHaveLength(1);
    expect(r.warnings![0]!.reason).toBe('InsecureSecretFile');
    expect(r.warnings![0]!.path).toBe('inventory.machines[0].redfish');
    expect(r.warnings![0]!.message).toContain(file);
    expect(r.warnings![0]!.message).toContain('0644');
    expect(allText(r.warnings as never)).not.toContain(SECRET_TEXT);
  });

  test('static: one warning per file, however many machines share it; 0600 and 0400 warn nothing', () => {
    const shared = tempFile('bmc', SECRET_TEXT, 0o644);
    const machines = [0, 1, 2].map((i) => `    - id: m${i}\n      redfish: { endpoint: "https://10.0.1.1${i}", username: admin, passwordFile: ${shared} }\n`).join('');
    const r = loadStaticConfig(`inventory:\n  machines:\n${machines}`, processSecrets);
    expect(r.ok && r.warnings?.length).toBe(1);
    for (const mode of [0o600, 0o400]) {
      const file = tempFile('bmc', SECRET_TEXT, mode);
      const ok = loadStaticConfig(staticWith(`{ endpoint: "https://10.0.1.11", username: admin, passwordFile: ${file} }`), processSecrets);
      expect(ok.ok && (ok.warnings ?? [])).toEqual([]);
    }
  });

  test("group-read by edge-ccm's own group warns nothing (a Secret volume under fsGroup: 0440); by a foreign group it warns", () => {
    const own = tempFile('bmc', SECRET_TEXT, 0o440);
    const load = (file: string) => loadStaticConfig(staticWith(`{ endpoint: "https://10.0.1.11", username: admin, passwordFile: ${file} }`), processSecrets);
    const ownResult = load(own);
    expect(ownResult.ok && (ownResult.warnings ?? [])).toEqual([]);
    const foreign = tempFile('bmc', SECRET_TEXT, 0o640);
    giveToForeignGroup(foreign);
    const foreignResult = load(foreign);
    expect(foreignResult.ok && foreignResult.warnings?.map((w) => w.message.includes('its group'))).toEqual([true]);
  });

  test('proxmox: tokenSecretFile mode 0604 warns', () => {
    const file = tempFile('token', SECRET_TEXT, 0o604);
    const r = loadProxmoxConfig(proxmoxWith(['url: https://pve1.example.com:8006', 'tokenId: ccm@pve!edge-ccm', `tokenSecretFile: ${file}`]), processSecrets);
    if (!r.ok) throw new Error(formatConfigErrors('x', r.errors));
    expect(r.warnings?.map((w) => [w.reason, w.path])).toEqual([['InsecureSecretFile', 'clusters[0].tokenSecretFile']]);
    expect(allText(r.warnings as never)).not.toContain(SECRET_TEXT);
  });

  test('validate answers the warning beside no errors', () => {
    const file = tempFile('bmc', SECRET_TEXT, 0o644);
    const r = validateStaticConfig(staticWith(`{ endpoint: "https://10.0.1.11", username: admin, passwordFile: ${file} }`), 'x.yaml', processSecrets);
    expect(r.ok).toBe(true);
    expect(r.ok && r.warnings?.length).toBe(1);
  });

  test('the provider logs the warning at start and on a reload, and tells onConfigWarning listeners (the one in force at once)', () => {
    const { logger, lines } = recording();
    const file = tempFile('bmc', SECRET_TEXT, 0o644);
    const text = staticWith(`{ endpoint: "https://10.0.1.11", username: admin, passwordFile: ${file} }`);
    const p = createStaticProvider({ config: text, configPath: '/etc/edge-ccm/inventory.yaml', logger, secrets: processSecrets });
    expect(lines.filter((l) => l.includes('InsecureSecretFile'))).toHaveLength(1);
    const heard: [string, string][] = [];
    p.onConfigWarning((reason, problems) => heard.push([reason, problems]));
    expect(heard).toHaveLength(1);
    expect(heard[0]![0]).toBe('InsecureSecretFile');
    expect(heard[0]![1]).toContain(`/etc/edge-ccm/inventory.yaml:4: inventory.machines[0].redfish: passwordFile ${file}`);
    expect(p.reload(`${text}# edited\n`).ok).toBe(true);
    expect(heard).toHaveLength(2);
    expect(lines.filter((l) => l.includes('InsecureSecretFile'))).toHaveLength(2);
    chmodSync(file, 0o600);
    expect(p.reload(`${text}# edited again\n`).ok).toBe(true);
    expect(heard).toHaveLength(2);
    for (const l of [...lines, ...heard.flat()]) expect(l).not.toContain(SECRET_TEXT);
  });
});
