import { afterEach, describe, expect, test } from 'bun:test';
import { closeSync, mkdtempSync, openSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { loadProxmoxConfig } from '../../providers/proxmox/config-load.ts';
import { processSecrets } from './secrets.ts';
import { formatConfigErrors } from './yaml-load.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import { MAX_CONFIG_FILE_BYTES, MAX_CONFIG_STRING_LENGTH, MAX_REFERENCED_FILE_BYTES } from './limits.ts';
import { WatchedConfig } from './watch.ts';
import { createStaticProvider } from '../../providers/static/provider.ts';
import { silentLogger } from '../log.ts';
import { readBoundedFile, readBoundedFileSync } from '../util/bounded-file.ts';
import { aliasBomb } from '../../test/harness/alias-bomb.ts';
import { eventually } from '../../test/harness/eventually.ts';
import { replaceFile } from '../../test/harness/files.ts';

/**
 * Issue 11, item 5: every input is bounded. The config file and the files it names are read
 * only when they are regular files under a size limit (checked before reading, so /dev/zero, a
 * FIFO or a sparse 10 GiB file cost nothing); strings are capped; a YAML alias bomb is a config
 * error like any other, at start, in validate and on a live reload (counted, with the event).
 */

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-config-limits-'));
  dirs.push(dir);
  return dir;
}
function fifo(dir: string): string {
  const path = join(dir, 'fifo');
  const r = Bun.spawnSync(['mkfifo', path]);
  if (r.exitCode !== 0) throw new Error(`mkfifo failed (install coreutils: apt-get install coreutils): ${r.stderr}`);
  return path;
}
function sparse(dir: string, bytes: number): string {
  const path = join(dir, 'sparse');
  closeSync(openSync(path, 'w'));
  truncateSync(path, bytes);
  return path;
}

describe('bounded file reads', () => {
  test('a FIFO is refused at once, without waiting for a writer', async () => {
    const path = fifo(tempDir());
    expect(() => readBoundedFileSync(path, 1024)).toThrow(`${path} is a FIFO, not a regular file`);
    await expect(readBoundedFile(path, 1024)).rejects.toThrow(`${path} is a FIFO, not a regular file`);
  });

  test('/dev/zero is refused as a character device', async () => {
    expect(() => readBoundedFileSync('/dev/zero', 1024)).toThrow('/dev/zero is a character device, not a regular file');
    await expect(readBoundedFile('/dev/zero', 1024)).rejects.toThrow('/dev/zero is a character device, not a regular file');
  });

  test('a file over the limit is refused from its size, before reading (a sparse 10 GiB file)', async () => {
    const path = sparse(tempDir(), 10 * 1024 ** 3);
    expect(() => readBoundedFileSync(path, 1024)).toThrow(`${path} is 10737418240 bytes, more than the limit of 1024 bytes`);
    await expect(readBoundedFile(path, 1024)).rejects.toThrow('more than the limit of 1024 bytes');
  });

  test('a regular file within the limit is read whole', async () => {
    const path = join(tempDir(), 'ok');
    writeFileSync(path, 'héllo\n');
    expect(readBoundedFileSync(path, 1024)).toBe('héllo\n');
    expect(await readBoundedFile(path, 1024)).toBe('héllo\n');
    expect(readBoundedFileSync(path, 7)).toBe('héllo\n');
    expect(() => readBoundedFileSync(path, 6)).toThrow('more than the limit of 6 bytes');
  });
});

describe('secret and CA files named by the config', () => {
  const redfish = (file: string) => `inventory:\n  machines:\n    - id: m1\n      redfish: { endpoint: "https://10.0.1.11", username: admin, passwordFile: ${file} }\n`;

  test('passwordFile /dev/zero, a FIFO or an oversized file is a config error naming it', () => {
    const dir = tempDir();
    for (const [file, why] of [
      ['/dev/zero', 'is a character device, not a regular file'],
      [fifo(dir), 'is a FIFO, not a regular file'],
      [sparse(dir, MAX_REFERENCED_FILE_BYTES + 1), `more than the limit of ${MAX_REFERENCED_FILE_BYTES} bytes`],
    ] as const) {
      const r = loadStaticConfig(redfish(file), processSecrets);
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect(r.errors).toHaveLength(1);
      expect(r.errors[0]!.message).toContain(`cannot read passwordFile ${file}`);
      expect(r.errors[0]!.message).toContain(why);
    }
  });

  test('proxmox: tokenSecretFile and caFile /dev/zero are config errors', () => {
    const r = loadProxmoxConfig('clusters:\n  - region: fra1\n    url: https://pve1.example.com:8006\n    caFile: /dev/zero\n    tokenId: ccm@pve!edge-ccm\n    tokenSecretFile: /dev/zero\n', processSecrets);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path).sort()).toEqual(['clusters[0].caFile', 'clusters[0].tokenSecretFile']);
    for (const e of r.errors) expect(e.message).toContain('is a character device, not a regular file');
  });
});

describe('strings are capped', () => {
  test('a huge region is one error giving its length, not its text', () => {
    const huge = 'r'.repeat(MAX_CONFIG_STRING_LENGTH * 20);
    const r = loadStaticConfig(`inventory:\n  defaults:\n    region: ${huge}\n  machines:\n    - { id: m1 }\n`);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors).toEqual([{ path: 'inventory.defaults.region', line: 3, message: `is ${huge.length} characters long; the limit is ${MAX_CONFIG_STRING_LENGTH}` }]);
  });

  test('a huge label key or value is reported once, without its text', () => {
    const huge = 'v'.repeat(MAX_CONFIG_STRING_LENGTH + 1);
    const r = loadStaticConfig(`inventory:\n  machines:\n    - id: m1\n      labels: { example.com/a: ${huge}, ${huge}: x }\n`);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors).toHaveLength(2);
    expect(JSON.stringify(r.errors)).not.toContain(huge.slice(0, 100));
  });

  test('a machine id, node name or hostname is at most 253 characters (a Kubernetes name)', () => {
    const long = 'a'.repeat(254);
    for (const key of ['id', 'nodeName', 'hostname']) {
      const r = loadStaticConfig(`inventory:\n  machines:\n    - { ${key === 'id' ? '' : 'id: m1, '}${key}: ${long} }\n`);
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect(r.errors.map((e) => [e.path, e.message])).toEqual([[`inventory.machines[0].${key}`, 'must be at most 253 characters']]);
    }
  });

  test('a pool namespace is at most 63 characters (a namespace name)', () => {
    const r = loadStaticConfig(`loadBalancer:\n  pools:\n    - { name: p, addresses: [198.51.100.0/24], namespaces: [${'n'.repeat(64)}] }\n`);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => [e.path, e.message])).toEqual([['loadBalancer.pools[0].namespaces[0]', 'must be at most 63 characters']]);
  });
});

describe('the YAML alias bomb', () => {
  test('is a config error of both providers, not a crash', () => {
    for (const r of [loadStaticConfig(aliasBomb()), loadProxmoxConfig(aliasBomb())]) {
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect(r.errors).toHaveLength(1);
      expect(r.errors[0]!.message).toContain('too many YAML aliases');
    }
  });

  test('ordinary anchors and aliases still work', () => {
    const r = loadStaticConfig('inventory:\n  defaults:\n    labels: &l { example.com/a: b }\n  machines:\n    - { id: m1, labels: *l }\n    - { id: m2, labels: *l }\n');
    if (!r.ok) throw new Error(formatConfigErrors('x', r.errors));
    expect(r.config.inventory.machines[1]!.labels).toEqual({ 'example.com/a': 'b' });
  });

  test('on a live reload of the watched file it is rejected, counted and reported, and the good config stays', async () => {
    const dir = tempDir();
    const path = join(dir, 'inventory.yaml');
    const good = 'inventory:\n  machines:\n    - { id: m1 }\n';
    writeFileSync(path, good);
    const p = createStaticProvider({ config: good, configPath: path, logger: silentLogger, watch: { pollMs: 50, debounceMs: 20 } });
    const rejected: string[] = [];
    p.onConfigRejected((problems) => rejected.push(problems));
    const stop = new AbortController();
    const noServices = { request: async () => ({ kind: 'ServiceList', metadata: {}, items: [] }) };
    const registry = new Registry();
    await p.initialize({ transport: noServices as never, logger: silentLogger, signal: stop.signal, registry });
    try {
      replaceFile(path, aliasBomb());
      await eventually('the alias bomb rejected', () => rejected.length === 1);
      expect(rejected[0]).toContain(`${path}:1: too many YAML aliases`);
      expect(await registry.getSingleMetricAsString('edge_ccm_static_config_reload_errors_total')).toMatch(/ 1$/m);
      expect(p.currentConfig().inventory.machines.map((m) => m.id)).toEqual(['m1']);
    } finally {
      stop.abort();
      await p.close();
    }
  });
});

describe('the watched config file', () => {
  function watched(path: string) {
    const rejected: string[] = [];
    const file = new WatchedConfig<string>({ owner: 'test provider', path, load: (text) => ({ ok: true, config: text }), apply: () => {}, logger: silentLogger, pollMs: 50, debounceMs: 20 });
    file.onConfigRejected((problems) => rejected.push(problems));
    return { file, rejected };
  }

  // The watched file replaced (mv) by one it must not read: rejected with an event and counted.
  const replacements: [name: string, replacement: (dir: string) => string, label: string, message: string][] = [
    ['grown over the limit, it is rejected with an event and counted, not read', (dir) => sparse(dir, MAX_CONFIG_FILE_BYTES + 1), 'the oversized file rejected', `more than the limit of ${MAX_CONFIG_FILE_BYTES} bytes`],
    ['replaced by a FIFO, it is rejected without blocking', (dir) => fifo(dir), 'the FIFO rejected', 'is a FIFO, not a regular file'],
  ];
  test.each(replacements)('%s', async (_name, replacement, label, message) => {
    const dir = tempDir();
    const path = join(dir, 'config.yaml');
    writeFileSync(path, 'a: 1\n');
    const { file, rejected } = watched(path);
    await file.start();
    try {
      Bun.spawnSync(['mv', replacement(dir), path]);
      await eventually(label, () => rejected.length === 1);
      expect(rejected[0]).toContain(message);
      expect(file.reloads()).toEqual({ success: 0, error: 1 });
    } finally {
      file.stop();
    }
  });

  test('a load that throws is a rejected edit, counted, not a silent read failure', () => {
    const rejected: string[] = [];
    const file = new WatchedConfig<string>({
      owner: 'test provider', path: '/etc/x.yaml', apply: () => {}, logger: silentLogger,
      load: () => {
        throw new RangeError('Maximum call stack size exceeded');
      },
    });
    file.onConfigRejected((problems) => rejected.push(problems));
    expect(file.reload('x').ok).toBe(false);
    expect(rejected).toEqual(['/etc/x.yaml:1: could not be read: Maximum call stack size exceeded']);
    expect(file.reloads()).toEqual({ success: 0, error: 1 });
  });
});
